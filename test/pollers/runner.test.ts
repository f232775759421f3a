import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pollerState, recordPollFailure, releaseLeases, saveCursor, takeLeases } from '../../postgres/queries/pollers.js';
import { capturedLogger, FakeUnifi, PollerEnv, selfSignedCert, sleep, until } from './support.js';

/** The runner: backoff and recovery, timeouts, and one owner per integration across runners. */
let env: PollerEnv;
const tls = selfSignedCert();
const creds = { username: 'poller', password: 'runner-test-password-9' };
const NOW_S = () => Math.floor(Date.now() / 1000);
const config = (url: string) => ({
  controller_url: url,
  username: creds.username,
  password: creds.password,
  certificate_sha256: tls.sha256,
});

beforeAll(async () => {
  env = await PollerEnv.start('pollrun');
});
afterAll(async () => {
  await env?.close();
});

describe('poller runner', () => {
  it('backs off exponentially while the controller fails, records and reports the failures, then recovers', async () => {
    const controller = await FakeUnifi.start(tls, creds);
    controller.failWith = 500;
    const { venueId, integrationId } = await env.integration('unifi', config(controller.url));
    const { log, text } = capturedLogger();
    const runner = env.runner(log, { backoffBaseMs: 150, maxBackoffMs: 1200 });
    try {
      const failing = await until('4 failures in a row', async () => {
        const s = await pollerState(env.api.services.db, integrationId);
        return s && s.failures >= 4 ? s : undefined;
      });
      expect(failing.last_error).toMatch(/^controller answered 500 to login at https:\/\/127\.0\.0\.1:\d+\/api\/login$/);
      expect(failing.last_error_at).not.toBeNull();
      // The pauses: 150, 300, 600, 1200 ms (±10 % jitter), then 1200 (the cap); the attempts at least that far apart.
      const pauses = text()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
        .filter((l) => l.msg === 'poll failed' && l.integrationId === integrationId)
        .map((l) => l.retryInMs as number);
      expect(pauses.length).toBeGreaterThanOrEqual(4);
      [150, 300, 600, 1200].forEach((ms, i) => {
        expect(pauses[i]).toBeGreaterThanOrEqual(ms * 0.9);
        expect(pauses[i]).toBeLessThanOrEqual(ms * 1.1);
      });
      const at = controller.server.requests.map((r) => r.at);
      at.slice(1, 4).forEach((t, i) => expect(t - at[i]!).toBeGreaterThanOrEqual(pauses[i]! - 5));
      const report = await until('a failed poll report', () =>
        env.reports.find((r) => r.source?.integrationId === integrationId && r.source.ok === false),
      );
      expect(report).toMatchObject({
        venueId,
        connectorType: 'unifi',
        accepted: 0,
        rejected: 0,
        source: { link: 'poll', ok: false, error: failing.last_error },
      });

      // The controller comes back: the next attempt (within the 1.2 s cap) brings the clients in.
      controller.clients = [{ mac: '00:11:22:33:77:01', last_seen: NOW_S() - 20 }];
      controller.failWith = undefined;
      await env.waitStored(venueId, 1);
      const ok = await pollerState(env.api.services.db, integrationId);
      expect(ok).toMatchObject({ failures: 0, last_error: failing.last_error });
      expect(ok!.last_ok_at!.getTime()).toBeGreaterThan(failing.last_error_at!.getTime());
      const failedAt = env.reports.indexOf(report);
      await until('an ok report after the failures', () =>
        env.reports.slice(failedAt).some((r) => r.source?.integrationId === integrationId && r.source.ok),
      );
    } finally {
      await runner.stop();
      await controller.close();
    }
  });

  it('times a hanging controller out without holding up the other integrations', async () => {
    const hanging = await FakeUnifi.start(tls, creds);
    hanging.server.hang = true;
    const healthy = await FakeUnifi.start(tls, creds);
    const a = await env.integration('unifi', config(hanging.url));
    const b = await env.integration('unifi', config(healthy.url));
    const t = NOW_S() - 100;
    healthy.clients = [{ mac: '00:11:22:33:88:01', last_seen: t }];
    const runner = env.runner(capturedLogger().log, { requestTimeoutMs: 1000 });
    try {
      await env.waitStored(b.venueId, 1);
      // The healthy controller is polled on its interval while the other hangs.
      const before = healthy.count('/api/s/default/stat/sta');
      healthy.clients = [{ mac: '00:11:22:33:88:01', last_seen: t + 1 }];
      await env.waitStored(b.venueId, 2);
      expect(healthy.count('/api/s/default/stat/sta')).toBeGreaterThan(before);
      const state = await until('the hanging controller timed out', async () => {
        const s = await pollerState(env.api.services.db, a.integrationId);
        return s && s.failures > 0 ? s : undefined;
      });
      expect(state.last_error).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/api\/login did not answer within 1 s$/);
    } finally {
      const stopping = Date.now();
      await runner.stop();
      // Stopping aborts a request hanging in hand after the grace (1 s), it does not wait for its timeout.
      expect(Date.now() - stopping).toBeLessThan(3000);
      await hanging.close();
      await healthy.close();
    }
  });

  it('gives each integration one owner across two runners, and hands it over when one stops', async () => {
    const controllers = await Promise.all([0, 1, 2, 3].map(() => FakeUnifi.start(tls, creds)));
    const integrations: Array<{ venueId: string; integrationId: string }> = [];
    const t = NOW_S() - 200;
    for (const [i, c] of controllers.entries()) {
      c.clients = [{ mac: `00:11:22:33:99:0${i}`, last_seen: t }];
      integrations.push(await env.integration('unifi', config(c.url)));
    }
    const mine = new Set(integrations.map((i) => i.integrationId));
    // A login that times out is made again at the next poll (right, but a second login is what this
    // counts): on a full test run's loaded machine a TLS login once took over 1.5 s, so these wait longer.
    const r1 = env.runner(capturedLogger().log, { requestTimeoutMs: 5000 });
    const r2 = env.runner(capturedLogger().log, { requestTimeoutMs: 5000 });
    let r2Stopped = false;
    try {
      for (const i of integrations) await env.waitStored(i.venueId, 1);
      // Sampled for 2 s: never an integration owned by both, every one owned by one of them.
      for (let k = 0; k < 10; k++) {
        const o1 = r1.owned().filter((id) => mine.has(id));
        const o2 = r2.owned().filter((id) => mine.has(id));
        expect(o1.filter((id) => o2.includes(id))).toEqual([]);
        expect(new Set([...o1, ...o2]).size).toBe(integrations.length);
        await sleep(200);
      }
      // One owner polled each controller: one login each, no session of a second poller.
      expect(controllers.map((c) => c.logins)).toEqual([1, 1, 1, 1]);
      const { rows } = await env.api.services.db.query(
        `SELECT integration_id, owner FROM poller_state WHERE integration_id = ANY($1::uuid[])`,
        [[...mine]],
      );
      for (const row of rows) expect([r1.owner, r2.owner]).toContain(row.owner);
      // The other runner's integrations pass to r1 at once (released, not waiting for the lease to lapse).
      await r2.stop();
      r2Stopped = true;
      await until('r1 owns all', () => integrations.every((i) => r1.owned().includes(i.integrationId)));
      for (const [i, c] of controllers.entries()) c.clients = [{ mac: `00:11:22:33:99:0${i}`, last_seen: t + 10 }];
      for (const i of integrations) await env.waitStored(i.venueId, 2);
    } finally {
      if (!r2Stopped) await r2.stop();
      await r1.stop();
      for (const c of controllers) await c.close();
    }
  });

  it('takes over an integration whose owner died once its lease lapses', async () => {
    const controller = await FakeUnifi.start(tls, creds);
    const { venueId, integrationId } = await env.integration('unifi', config(controller.url));
    controller.clients = [{ mac: '00:11:22:33:aa:01', last_seen: NOW_S() - 50 }];
    // A dead owner: its lease row says someone holds it for 1.5 s more.
    await env.api.services.db.query(
      `INSERT INTO poller_state (integration_id, owner, lease_until) VALUES ($1, 'dead-instance', now() + interval '1500 milliseconds')`,
      [integrationId],
    );
    const runner = env.runner(capturedLogger().log);
    try {
      await sleep(700);
      expect(runner.owned()).not.toContain(integrationId);
      expect(await env.stored(venueId)).toHaveLength(0);
      await env.waitStored(venueId, 1);
      expect((await pollerState(env.api.services.db, integrationId))!.owner).toBe(runner.owner);
    } finally {
      await runner.stop();
      await controller.close();
    }
  });

  it('fences the cursor and failure writes on a live lease: an owner that lost its lease moves nothing', async () => {
    const db = env.api.services.db;
    const { integrationId: id } = await env.integration('unifi', config('https://127.0.0.1:9'));
    const other = await env.integration('unifi', config('https://127.0.0.1:9'));
    // A takes both (one statement); B gets neither while A's leases live.
    expect((await takeLeases(db, [id, other.integrationId], 'A', 300)).map((r) => r.integration_id).sort()).toEqual(
      [id, other.integrationId].sort(),
    );
    expect(await takeLeases(db, [id, other.integrationId], 'B', 5000)).toEqual([]);
    expect(await saveCursor(db, id, 'A', { at: 1, ids: [] })).toBe(true);
    // A stalls past its lease; B takes over and moves on.
    await sleep(400);
    expect((await takeLeases(db, [id], 'B', 5000)).map((r) => r.integration_id)).toEqual([id]);
    expect(await saveCursor(db, id, 'A', { at: 99, ids: [] })).toBe(false);
    expect(await recordPollFailure(db, id, 'A', 'late failure')).toBeUndefined();
    expect(await saveCursor(db, id, 'B', { at: 2, ids: [] })).toBe(true);
    expect(await pollerState(db, id)).toMatchObject({ owner: 'B', cursor: { at: 2, ids: [] }, failures: 0, last_error: null });
    // A renewing its old lease does not take it back; A releasing releases nothing of B's.
    expect(await takeLeases(db, [id], 'A', 5000)).toEqual([]);
    expect(await releaseLeases(db, [id], 'A')).toBe(0);
    expect(await releaseLeases(db, [id, other.integrationId], 'B')).toBe(1);
    await db.query(`UPDATE integrations SET is_active = false WHERE id = ANY($1::uuid[])`, [[id, other.integrationId]]);
    // A round whose list predates the deactivation leases neither again.
    expect(await takeLeases(db, [id, other.integrationId], 'C', 5000)).toEqual([]);
  });

  it('stops polling an integration that is deactivated', async () => {
    const controller = await FakeUnifi.start(tls, creds);
    const { venueId, integrationId } = await env.integration('unifi', config(controller.url));
    controller.clients = [{ mac: '00:11:22:33:bb:01', last_seen: NOW_S() - 50 }];
    const runner = env.runner(capturedLogger().log);
    try {
      await env.waitStored(venueId, 1);
      await env.api.services.db.query(`UPDATE integrations SET is_active = false WHERE id = $1`, [integrationId]);
      await until('released', async () => {
        const state = await pollerState(env.api.services.db, integrationId);
        return !runner.owned().includes(integrationId) && state!.owner === null;
      });
      const releasedAt = Date.now();
      // A request already on the wire when the poll was aborted may still land; after that, none.
      await sleep(500);
      const polls = controller.count('/api/s/default/stat/sta');
      await sleep(1000);
      const late = controller.server.requests.slice(-3).map((r) => `${r.method} ${r.path} at +${r.at - releasedAt} ms`);
      expect(controller.count('/api/s/default/stat/sta'), `polled after the release: ${late.join(', ')}`).toBe(polls);
    } finally {
      await runner.stop();
      await controller.close();
    }
  });
});
