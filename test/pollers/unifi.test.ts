import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pollerState } from '../../postgres/queries/pollers.js';
import { pseudonym, Pseudonyms } from '../../domain/ingest/pseudonyms.js';
import { capturedLogger, FakeUnifi, PollerEnv, selfSignedCert, sleep, until } from './support.js';

/**
 * The UniFi poller end to end: a fake controller on 127.0.0.1 (self-signed, pinned), the runner,
 * ingest, Kafka, the events sink and ClickHouse, all real.
 */
let env: PollerEnv;
const tls = selfSignedCert();
const creds = { username: 'poller', password: 'S3cret-controller-pass!' };
const NOW_S = () => Math.floor(Date.now() / 1000);

beforeAll(async () => {
  env = await PollerEnv.start('unifi');
});
afterAll(async () => {
  await env?.close();
});

const unifiConfig = (url: string, extra: Record<string, unknown> = {}) => ({
  controller_url: url,
  username: creds.username,
  password: creds.password,
  site: 'default',
  certificate_sha256: tls.colons,
  ...extra,
});

describe('UniFi poller', () => {
  it('brings stat/sta clients in as device_seen events at last_seen, pseudonymised, and never logs a credential or a MAC', async () => {
    const controller = await FakeUnifi.start(tls, creds);
    const { venueId, integrationId } = await env.integration('unifi', unifiConfig(controller.url));
    const t = NOW_S() - 120;
    controller.clients = [
      {
        mac: 'A4:83:E7:5D:10:9F',
        last_seen: t,
        first_seen: t - 600,
        ap_mac: 'f0:9f:c2:aa:bb:01',
        essid: 'Venue Guest',
        rssi: 40,
        signal: -58,
        is_guest: true,
        hostname: 'Alices-iPhone',
      },
      { mac: 'da:a1:19:0b:7c:2e', last_seen: t + 1, ap_mac: 'f0:9f:c2:aa:bb:02', essid: 'Venue Guest', rssi: -70 },
      { mac: 'not-a-mac', last_seen: t }, // skipped
    ];
    const { log, text } = capturedLogger('debug');
    const runner = env.runner(log);
    try {
      const rows = await env.waitStored(venueId, 2);
      expect(rows.map((r) => r.ts)).toEqual([
        new Date(t * 1000).toISOString().slice(0, 19).replace('T', ' '),
        new Date((t + 1) * 1000).toISOString().slice(0, 19).replace('T', ' '),
      ]);
      const key = new Pseudonyms(env.cfg.PSEUDONYM_KEY).keyFor(env.op.id);
      expect(rows.map((r) => r.device)).toEqual([pseudonym(key, 'a4:83:e7:5d:10:9f'), pseudonym(key, 'da:a1:19:0b:7c:2e')]);
      const payload = JSON.parse(rows[0]!.payload);
      expect(payload).toEqual({
        mac: rows[0]!.device,
        ap_mac: 'f0:9f:c2:aa:bb:01',
        essid: 'Venue Guest',
        rssi: -58,
        is_guest: true,
        first_seen: t - 600,
        last_seen: t,
      });
      // A positive rssi (classic controllers: signal above noise) is not dBm: left out, not a rejected event.
      expect(JSON.parse(rows[1]!.payload).rssi).toBe(-70);
      for (const r of rows) expect(r.payload.toLowerCase()).not.toMatch(/a4:83:e7|da:a1:19|alices/);

      // Polled again and again: nothing stored twice while nothing moved; a poll reports the link ok.
      await until('a few more polls', () => controller.count('/api/s/default/stat/sta') >= 4);
      await env.waitStored(venueId, 2);
      const state = await pollerState(env.api.services.db, integrationId);
      expect(state).toMatchObject({ owner: runner.owner, failures: 0, cursor: { at: t + 1, ids: [pseudonym(key, 'da:a1:19:0b:7c:2e')] } });
      expect(state!.last_ok_at).not.toBeNull();
      await until('an ok poll report', () =>
        env.reports.some((r) => r.source?.integrationId === integrationId && r.source.ok && r.source.link === 'poll'),
      );
      expect(controller.logins).toBe(1);

      // The same client seen later, and a new one in the same second as the cursor: both taken.
      controller.clients = [
        { mac: 'a4:83:e7:5d:10:9f', last_seen: t + 30 },
        { mac: 'da:a1:19:0b:7c:2e', last_seen: t + 1 },
        { mac: '3c:22:fb:1a:2b:3c', last_seen: t + 1 },
      ];
      await env.waitStored(venueId, 4);
    } finally {
      await runner.stop();
      await controller.close();
    }
    const logged = text();
    expect(logged).toContain('poller took the integration');
    for (const secret of [creds.password, 'unifises=', 'a4:83:e7', 'A4:83:E7', 'da:a1:19', '3c:22:fb', 'Alices'])
      expect(logged).not.toContain(secret);
    // Nothing of the controller's traffic carried the password but the login itself.
    expect(controller.server.requests.filter((r) => r.body.includes(creds.password)).every((r) => r.path === '/api/login')).toBe(true);
  });

  it('logs in again when the session expires (401) and carries on', async () => {
    const controller = await FakeUnifi.start(tls, creds);
    const { venueId } = await env.integration('unifi', unifiConfig(controller.url));
    const t = NOW_S() - 60;
    controller.clients = [{ mac: '00:11:22:33:44:01', last_seen: t }];
    const runner = env.runner(capturedLogger().log);
    try {
      await env.waitStored(venueId, 1);
      controller.sessions.clear(); // the controller restarted: every cookie is refused with 401
      controller.clients = [{ mac: '00:11:22:33:44:01', last_seen: t + 10 }];
      await env.waitStored(venueId, 2);
      expect(controller.logins).toBe(2);
    } finally {
      await runner.stop();
      await controller.close();
    }
  });

  it('speaks UniFi OS (/api/auth/login, /proxy/network) when the classic login is not there', async () => {
    const controller = await FakeUnifi.start(tls, creds, { unifiOs: true, site: 'shop' });
    const { venueId } = await env.integration('unifi', unifiConfig(controller.url, { site: 'shop' }));
    controller.clients = [{ mac: '00:11:22:33:44:02', last_seen: NOW_S() - 30 }];
    const runner = env.runner(capturedLogger().log);
    try {
      await env.waitStored(venueId, 1);
      expect(controller.count('/api/login')).toBeGreaterThanOrEqual(1);
      expect(controller.count('/proxy/network/api/s/shop/stat/sta')).toBeGreaterThanOrEqual(1);
    } finally {
      await runner.stop();
      await controller.close();
    }
  });

  it('restarts without repeating or skipping: records that appeared while it was stopped are taken once', async () => {
    const controller = await FakeUnifi.start(tls, creds);
    const { venueId, integrationId } = await env.integration('unifi', unifiConfig(controller.url));
    const t = NOW_S() - 300;
    controller.clients = [
      { mac: '00:11:22:33:55:01', last_seen: t },
      { mac: '00:11:22:33:55:02', last_seen: t + 5 },
    ];
    const first = env.runner(capturedLogger().log);
    try {
      await env.waitStored(venueId, 2);
    } finally {
      await first.stop();
    }
    // Released on stop, and not taken again by a lease round that overlapped the stop: no owner, the cursor kept.
    expect(await pollerState(env.api.services.db, integrationId)).toMatchObject({ owner: null, lease_until: null, cursor: { at: t + 5 } });
    await sleep(600);
    expect(await pollerState(env.api.services.db, integrationId)).toMatchObject({ owner: null, lease_until: null });
    // While stopped: one client moved on, one new client in the cursor's very second, one unchanged.
    controller.clients = [
      { mac: '00:11:22:33:55:01', last_seen: t + 40 },
      { mac: '00:11:22:33:55:02', last_seen: t + 5 },
      { mac: '00:11:22:33:55:03', last_seen: t + 5 },
    ];
    await sleep(300);
    await env.waitStored(venueId, 2);
    const second = env.runner(capturedLogger().log);
    try {
      const rows = await env.waitStored(venueId, 4);
      expect(new Set(rows.map((r) => r.event_id)).size).toBe(4);
      expect(new Set(rows.map((r) => `${r.device}@${r.ts}`)).size).toBe(4);
    } finally {
      await second.stop();
      await controller.close();
    }
  });

  it('publishes a repeated poll once: a crash between publish and cursor write stores nothing twice', async () => {
    const controller = await FakeUnifi.start(tls, creds);
    const { venueId, integrationId } = await env.integration('unifi', unifiConfig(controller.url));
    const t = NOW_S() - 200;
    controller.clients = [
      { mac: '00:11:22:33:66:01', last_seen: t },
      { mac: '00:11:22:33:66:02', last_seen: t + 1 },
    ];
    const first = env.runner(capturedLogger().log);
    try {
      await env.waitStored(venueId, 2);
    } finally {
      await first.stop();
    }
    // As if the cursor write had never happened: the next owner publishes the same records again.
    await env.api.services.db.query(`UPDATE poller_state SET cursor = NULL WHERE integration_id = $1`, [integrationId]);
    const second = env.runner(capturedLogger().log);
    try {
      await until('the records polled again', async () => (await pollerState(env.api.services.db, integrationId))?.cursor);
      // Both publishes reached the stream (4 events accepted for the integration), and the store holds each once.
      const accepted = () => env.reports.filter((r) => r.source?.integrationId === integrationId).reduce((n, r) => n + r.accepted, 0);
      await until('the second publish reported', () => accepted() >= 4);
      expect(accepted()).toBe(4);
      await env.waitStored(venueId, 2);
    } finally {
      await second.stop();
      await controller.close();
    }
  });

  it('refuses a controller whose certificate does not match the pin, with an actionable error, and never sends it the password', async () => {
    const controller = await FakeUnifi.start(tls, creds);
    const { integrationId } = await env.integration('unifi', unifiConfig(controller.url, { certificate_sha256: 'ab'.repeat(32) }));
    const { log, text } = capturedLogger();
    const runner = env.runner(log);
    try {
      const state = await until('a failure recorded', async () => {
        const s = await pollerState(env.api.services.db, integrationId);
        return s && s.failures > 0 ? s : undefined;
      });
      expect(state.last_error).toContain('does not match the pinned certificate_sha256');
      expect(state.last_error).toContain(tls.sha256);
      const report = await until('a failed poll report', () =>
        env.reports.find((r) => r.source?.integrationId === integrationId && !r.source.ok),
      );
      expect(report.source).toMatchObject({ link: 'poll', ok: false, error: expect.stringContaining('pin the new fingerprint') });
      expect(controller.server.requests).toHaveLength(0);
    } finally {
      await runner.stop();
      await controller.close();
    }
    expect(text()).not.toContain(creds.password);
  });

  it('without a pin, a self-signed controller is refused by CA verification with a hint to pin it', async () => {
    const controller = await FakeUnifi.start(tls, creds);
    const config = unifiConfig(controller.url);
    delete (config as Record<string, unknown>).certificate_sha256;
    const { integrationId } = await env.integration('unifi', config);
    const runner = env.runner(capturedLogger().log);
    try {
      const state = await until('a failure recorded', async () => {
        const s = await pollerState(env.api.services.db, integrationId);
        return s && s.failures > 0 ? s : undefined;
      });
      expect(state.last_error).toMatch(/is not trusted .*pin it with certificate_sha256/);
      expect(controller.server.requests).toHaveLength(0);
    } finally {
      await runner.stop();
      await controller.close();
    }
  });

  it('names wrong credentials in words a person can act on', async () => {
    const controller = await FakeUnifi.start(tls, creds);
    const { integrationId } = await env.integration('unifi', unifiConfig(controller.url, { password: 'wrong-password-123' }));
    const runner = env.runner(capturedLogger().log);
    try {
      const report = await until('a failed poll report', () =>
        env.reports.find((r) => r.source?.integrationId === integrationId && !r.source.ok),
      );
      expect(report.source!.error).toMatch(
        /^controller answered 400 to login at https:\/\/127\.0\.0\.1:\d+\/api\/login: check username and password$/,
      );
      expect(report.source!.error).not.toContain('wrong-password');
    } finally {
      await runner.stop();
      await controller.close();
    }
  });
});
