import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluateOccupancy } from '../../domain/alarms/evaluate.js';
import { DEFAULT_OCCUPANCY_RULE } from '../../domain/alarms/rules.js';
import { authenticate } from '../../domain/tenants/operators.js';
import { toolsFrom } from '../../apps/api/mcp/tools.js';
import { OPERATIONS } from '../../apps/api/operations/index.js';
import type { BearerContext } from '../../apps/api/operations/operation.js';
import { AppError } from '../../lib/errors.js';
import { request } from '../support/http.js';
import { startApi, testConfig } from '../support/env.js';
import { recordAlarmEvent } from '../../domain/alarms/events.js';
import { lockAlarm } from '../../postgres/queries/alarms.js';
import { one, sql, transaction } from '../../postgres/client.js';
import { alarmsOf, newSite, occupancy, openAlarmStack, until, type AlarmStack, type Site } from './support.js';

let stack: AlarmStack;
let site: Site;
let other: Site;

beforeAll(async () => {
  stack = await openAlarmStack(1);
  site = await newSite(stack.api);
  other = await newSite(stack.api);
});
afterAll(async () => {
  await stack?.close();
});

/** A new zone of `s` (capacity 10) with an alarm raised by the rule at `value` people; its id. */
async function raised(s: Site, value = 10): Promise<string> {
  const zoneId = await s.zone(10);
  await evaluateOccupancy(stack.api.services.db, DEFAULT_OCCUPANCY_RULE, occupancy(s, zoneId, value), null);
  const alarm = (await alarmsOf(stack, s)).find((a) => a.zoneId === zoneId);
  expect(alarm).toBeDefined();
  return alarm.id;
}

const post = (id: string, action: 'ack' | 'clear', key = site.op.key) =>
  request(`${stack.api.url}/api/alarms/${id}/${action}`, { key, method: 'POST' });

/** An alarm of `site` in `status`, reached through the API from ACTIVE_UNACK. */
async function alarmIn(status: string): Promise<string> {
  const id = await raised(site);
  const steps: Record<string, Array<'ack' | 'clear'>> = {
    ACTIVE_UNACK: [],
    ACTIVE_ACK: ['ack'],
    CLEARED_UNACK: ['clear'],
    CLEARED_ACK: ['ack', 'clear'],
  };
  for (const step of steps[status]!) expect((await post(id, step)).status).toBe(200);
  return id;
}

const statusOf = async (id: string) => (await alarmsOf(stack, site)).find((a) => a.id === id);

describe('the alarm transition table (spec: Alarm status)', () => {
  const allowed: Array<[string, 'ack' | 'clear', string, 'acknowledgedAt' | 'clearedAt']> = [
    ['ACTIVE_UNACK', 'ack', 'ACTIVE_ACK', 'acknowledgedAt'],
    ['CLEARED_UNACK', 'ack', 'CLEARED_ACK', 'acknowledgedAt'],
    ['ACTIVE_UNACK', 'clear', 'CLEARED_UNACK', 'clearedAt'],
    ['ACTIVE_ACK', 'clear', 'CLEARED_ACK', 'clearedAt'],
  ];
  for (const [from, action, to, stamp] of allowed) {
    it(`${from} --${action}--> ${to}, setting ${stamp}`, async () => {
      const id = await alarmIn(from);
      const before = await statusOf(id);
      expect(before.status).toBe(from);
      expect(before[stamp]).toBeNull();
      const res = await post(id, action);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['id', 'status', stamp].sort());
      expect(res.body).toMatchObject({ id, status: to });
      expect(Date.now() - Date.parse(res.body[stamp])).toBeLessThan(60_000);
      const after = await statusOf(id);
      expect(after).toMatchObject({ status: to, [stamp]: res.body[stamp] });
      // The other timestamp is kept as it was.
      const otherStamp = stamp === 'acknowledgedAt' ? 'clearedAt' : 'acknowledgedAt';
      expect(after[otherStamp]).toBe(before[otherStamp]);
      const event = await until('the operator event', async () =>
        stack.tap.of(id).find((e) => e.kind === (action === 'ack' ? 'acknowledged' : 'cleared')),
      );
      expect(event).toMatchObject({ cause: 'operator', operatorId: site.op.id, venueId: site.venueId, alarm: { id, status: to } });
    });
  }

  const refused: Array<[string, 'ack' | 'clear', string]> = [
    ['ACTIVE_ACK', 'ack', 'ALREADY_ACKNOWLEDGED'],
    ['CLEARED_ACK', 'ack', 'ALREADY_ACKNOWLEDGED'],
    ['CLEARED_UNACK', 'clear', 'ALREADY_CLEARED'],
    ['CLEARED_ACK', 'clear', 'ALREADY_CLEARED'],
  ];
  for (const [from, action, code] of refused) {
    it(`${from} --${action}--> 409 ${code} naming ${from}, unchanged`, async () => {
      const id = await alarmIn(from);
      const before = await statusOf(id);
      const res = await post(id, action);
      expect(res.status).toBe(409);
      expect(res.body).toEqual({ error: expect.stringContaining(from), code, details: { status: from } });
      expect(await statusOf(id)).toEqual(before);
    });
  }
});

describe('concurrent acknowledge and clear', () => {
  it('both land, in either order, and the alarm ends CLEARED_ACK with both timestamps', async () => {
    const ids = await Promise.all(Array.from({ length: 12 }, () => raised(site)));
    const results = await Promise.all(
      ids.flatMap((id, i) => (i % 2 ? [post(id, 'ack'), post(id, 'clear')] : [post(id, 'clear'), post(id, 'ack')])),
    );
    expect(results.map((r) => r.status)).toEqual(results.map(() => 200));
    for (const id of ids) {
      const a = await statusOf(id);
      expect(a.status).toBe('CLEARED_ACK');
      expect(a.acknowledgedAt).not.toBeNull();
      expect(a.clearedAt).not.toBeNull();
    }
  });

  it('of two concurrent acknowledgements exactly one lands; the other is a 409', async () => {
    const id = await raised(site);
    const results = await Promise.all([post(id, 'ack'), post(id, 'ack'), post(id, 'ack')]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409]);
  });
});

describe('GET /api/alarms', () => {
  it('lists newest first with total, filters by status, severity and venue, and pages', async () => {
    const s = await newSite(stack.api);
    const warning = await raised(s, 8);
    const major = await raised(s, 9);
    const critical = await raised(s, 10);
    expect((await post(major, 'ack', s.op.key)).status).toBe(200);
    const list = (q: string) => request(`${stack.api.url}/api/alarms${q}`, { key: s.op.key });

    const all = await list('');
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ total: 3, limit: 50, offset: 0 });
    expect(all.body.alarms.map((a: { id: string }) => a.id)).toEqual([critical, major, warning]);
    expect(all.body.alarms.map((a: { severity: string }) => a.severity)).toEqual(['CRITICAL', 'MAJOR', 'WARNING']);
    expect(Object.keys(all.body.alarms[0]).sort()).toEqual(
      [
        'id',
        'venueId',
        'zoneId',
        'integrationId',
        'type',
        'severity',
        'status',
        'message',
        'details',
        'createdAt',
        'updatedAt',
        'acknowledgedAt',
        'clearedAt',
      ].sort(),
    );
    expect(all.body.alarms[0].details).toMatchObject({ current: 10, capacity: 10, percent: 100, threshold: 100 });

    expect((await list('?status=ACTIVE_ACK')).body).toMatchObject({ total: 1, alarms: [{ id: major }] });
    expect((await list('?severity=WARNING')).body).toMatchObject({ total: 1, alarms: [{ id: warning }] });
    expect((await list('?status=ACTIVE_UNACK&severity=CRITICAL')).body).toMatchObject({ total: 1, alarms: [{ id: critical }] });
    expect((await list(`?venue_id=${s.venueId}&status=CLEARED_ACK`)).body).toMatchObject({ total: 0, alarms: [] });
    const page = await list('?limit=1&offset=1');
    expect(page.body).toMatchObject({ total: 3, limit: 1, offset: 1, alarms: [{ id: major }] });
    expect((await list('?limit=200')).status).toBe(200);
  });

  it('refuses bad filters and paging with a 400 naming the field, never a clamp', async () => {
    const cases: Array<[string, string]> = [
      ['?limit=201', 'limit'],
      ['?limit=0', 'limit'],
      ['?limit=1e2', 'limit'],
      ['?offset=-1', 'offset'],
      ['?status=OPEN', 'status'],
      ['?severity=LOW', 'severity'],
      ['?venue_id=nope', 'venue_id'],
    ];
    for (const [q, field] of cases) {
      const res = await request(`${stack.api.url}/api/alarms${q}`, { key: site.op.key });
      expect(res.status, q).toBe(400);
      expect(res.body.code).toBe('VALIDATION_ERROR');
      expect(
        res.body.details.map((d: { field: string }) => d.field),
        q,
      ).toContain(field);
    }
    const unauth = await request(`${stack.api.url}/api/alarms`);
    expect(unauth.status).toBe(401);
  });

  it('is offered to agents as the list_alarms MCP tool, answering what the route answers', async () => {
    const tool = toolsFrom(OPERATIONS).find((t) => t.name === 'list_alarms')!;
    const ctx: BearerContext = {
      deps: stack.api.deps,
      log: stack.api.services.log,
      operations: OPERATIONS,
      operator: await authenticate(stack.api.services.db, site.op.key),
      apiKey: site.op.key,
    };
    const fromTool = JSON.parse(await tool.call({ venue_id: site.venueId, limit: 5, status: 'CLEARED_ACK' }, ctx)) as { alarms: unknown[] };
    const rest = await request(`${stack.api.url}/api/alarms?venue_id=${site.venueId}&limit=5&status=CLEARED_ACK`, { key: site.op.key });
    expect(fromTool).toEqual(rest.body);
    expect(fromTool.alarms.length).toBeGreaterThan(0);
    const bad = await tool.call({ limit: 500 }, ctx).catch((e: unknown) => e);
    expect((bad as AppError).code).toBe('VALIDATION_ERROR');
  });
});

describe('tenant isolation', () => {
  it("never lists another operator's alarms, even with its venue as a filter (403)", async () => {
    const theirs = await raised(other);
    const mine = await raised(site);
    const res = await request(`${stack.api.url}/api/alarms?limit=200`, { key: site.op.key });
    const ids = res.body.alarms.map((a: { id: string }) => a.id);
    expect(ids).toContain(mine);
    expect(ids).not.toContain(theirs);
    expect(res.body.alarms.every((a: { venueId: string }) => a.venueId === site.venueId)).toBe(true);
    const filtered = await request(`${stack.api.url}/api/alarms?venue_id=${other.venueId}`, { key: site.op.key });
    expect(filtered.status).toBe(403);
    expect(filtered.body.code).toBe('FORBIDDEN');
    const unknown = await request(`${stack.api.url}/api/alarms?venue_id=${randomUUID()}`, { key: site.op.key });
    expect(unknown.status).toBe(404);
  });

  it("refuses to acknowledge or clear another operator's alarm (403, unchanged), and an unknown id is a 404", async () => {
    const theirs = await raised(other);
    for (const action of ['ack', 'clear'] as const) {
      const res = await post(theirs, action);
      expect(res.status).toBe(403);
      expect(res.body).toMatchObject({ code: 'FORBIDDEN' });
      const missing = await post(randomUUID(), action);
      expect(missing.status).toBe(404);
      expect(missing.body).toMatchObject({ code: 'NOT_FOUND' });
      const malformed = await post('not-a-uuid', action);
      expect(malformed.status).toBe(400);
    }
    const [alarm] = (await alarmsOf(stack, other)).filter((a) => a.id === theirs);
    expect(alarm).toMatchObject({ status: 'ACTIVE_UNACK', acknowledgedAt: null, clearedAt: null });
  });
});

describe('alarm events left in the outbox', () => {
  it('are relayed to the alarms topic by the rule consumer and removed from the outbox', async () => {
    const id = await raised(site);
    const db = stack.api.services.db;
    // A change whose writer died before publishing: its event is only in the outbox.
    const outboxId = await transaction(db, async (c) => recordAlarmEvent(c, 'acknowledged', 'operator', (await lockAlarm(c, id))!));
    const event = await until('the relayed event', async () => stack.tap.of(id).find((e) => e.kind === 'acknowledged'));
    expect(event).toMatchObject({ cause: 'operator', alarm: { id } });
    await until('the outbox row removed', async () =>
      (await one(db, sql`SELECT 1 FROM alarm_outbox WHERE id = ${outboxId}`)) === undefined ? true : undefined,
    );
  });
});

describe('acknowledging while the alarms topic cannot be written', () => {
  it('still answers 200, and the relay delivers the event from the outbox later', async () => {
    // An api that cannot reach Kafka at all (a closed port): the event stays in the outbox.
    const lonely = await startApi(testConfig({ KAFKA_BROKERS: '127.0.0.1:1' }));
    try {
      const id = await raised(site);
      const res = await request(`${lonely.url}/api/alarms/${id}/ack`, { key: site.op.key, method: 'POST' });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id, status: 'ACTIVE_ACK' });
      // The rule consumer's relay (this stack's) sends what the api could not.
      const event = await until('the relayed acknowledgement', async () => stack.tap.of(id).find((e) => e.kind === 'acknowledged'));
      expect(event).toMatchObject({ cause: 'operator', alarm: { id, status: 'ACTIVE_ACK' } });
    } finally {
      await lonely.close();
    }
  });
});
