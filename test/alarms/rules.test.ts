import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluateOccupancy } from '../../domain/alarms/evaluate.js';
import { DEFAULT_OCCUPANCY_RULE } from '../../domain/alarms/rules.js';
import { one, sql } from '../../postgres/client.js';
import { runAlarmRules } from '../../pipeline/alarms/alarm-rules.js';
import { request } from '../support/http.js';
import {
  alarmsOf,
  drained,
  health,
  newSite,
  occupancy,
  openAlarmStack,
  sendHealth,
  sendOccupancy,
  until,
  type AlarmStack,
  type Site,
} from './support.js';

let stack: AlarmStack;
let site: Site;

beforeAll(async () => {
  stack = await openAlarmStack(6);
  site = await newSite(stack.api);
});
afterAll(async () => {
  await stack?.close();
});

const activeCount = async (zoneId: string) =>
  (await one<{ n: number }>(
    stack.api.services.db,
    sql`SELECT count(*)::int AS n FROM alarms WHERE zone_id = ${zoneId} AND cleared_at IS NULL`,
  ))!.n;
const allCount = async (sourceId: string) =>
  (await one<{ n: number }>(stack.api.services.db, sql`SELECT count(*)::int AS n FROM alarms WHERE source_id = ${sourceId}`))!.n;

describe('zone occupancy alarms, from occupancy updates on Kafka', () => {
  it('a zone driven over capacity by updates from six concurrent producers raises exactly one alarm', async () => {
    const zones = [await site.zone(40, 'Main hall'), await site.zone(40, 'Bar')];
    // Each producer sends its own interleaving of figures over capacity, all at once.
    await Promise.all(
      stack.producers.map((p, i) =>
        Promise.all(
          zones.map((zoneId) =>
            sendOccupancy(
              stack,
              Array.from({ length: 20 }, (_, k) => occupancy(site, zoneId, 41 + ((k * 7 + i) % 20), 40)),
              p,
            ),
          ),
        ),
      ),
    );
    await drained(stack);
    for (const zoneId of zones) {
      expect(await allCount(zoneId)).toBe(1);
      const [alarm] = (await alarmsOf(stack, site)).filter((a) => a.zoneId === zoneId);
      expect(alarm).toMatchObject({
        venueId: site.venueId,
        zoneId,
        integrationId: null,
        type: 'zone_occupancy_high',
        severity: 'CRITICAL',
        status: 'ACTIVE_UNACK',
        acknowledgedAt: null,
        clearedAt: null,
      });
      expect(alarm.details).toMatchObject({ capacity: 40, threshold: 100 });
      expect(alarm.details.current).toBeGreaterThanOrEqual(41);
      expect(alarm.message).toContain('% of capacity');
      const events = await until('the created event', async () => (stack.tap.of(alarm.id).length > 0 ? stack.tap.of(alarm.id) : undefined));
      expect(events[0]).toMatchObject({ kind: 'created', cause: 'rule', operatorId: site.op.id, venueId: site.venueId });
    }
  });

  it('with two members in the group sharing the partitions, concurrent producers still raise one alarm per zone', async () => {
    const second = await runAlarmRules({
      kafka: stack.kafka,
      db: stack.api.services.db,
      log: stack.api.services.log,
      publisher: stack.publisher,
      prefix: stack.cfg.KAFKA_TOPIC_PREFIX,
      commitIntervalMs: 0,
      tickMs: 300,
    });
    try {
      const sites = [site, await newSite(stack.api), await newSite(stack.api)];
      const zones = await Promise.all(sites.map(async (s) => ({ s, zoneId: await s.zone(10) })));
      await Promise.all(
        stack.producers.map((p, i) =>
          Promise.all(
            zones.map(({ s, zoneId }) =>
              sendOccupancy(
                stack,
                Array.from({ length: 10 }, (_, k) => occupancy(s, zoneId, 8 + ((k + i) % 5))),
                p,
              ),
            ),
          ),
        ),
      );
      await drained(stack);
      for (const { zoneId } of zones) {
        expect(await allCount(zoneId)).toBe(1);
        expect(await activeCount(zoneId)).toBe(1);
      }
    } finally {
      await second.stop();
    }
  });

  it('the database refuses a second active alarm even when the rule is evaluated concurrently outside Kafka', async () => {
    const zoneId = await site.zone(10);
    await Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        evaluateOccupancy(stack.api.services.db, DEFAULT_OCCUPANCY_RULE, occupancy(site, zoneId, 9 + (i % 4)), null),
      ),
    );
    expect(await activeCount(zoneId)).toBe(1);
    expect(await allCount(zoneId)).toBe(1);
  });

  it('a count flickering at the threshold raises one alarm, and escalation and de-escalation keep that one alarm', async () => {
    const zoneId = await site.zone(100, 'Flicker');
    const flicker = [79, 80, 79, 81, 78, 80, 76, 80, 79, 82, 77, 80];
    await sendOccupancy(
      stack,
      flicker.map((v) => occupancy(site, zoneId, v)),
    );
    await drained(stack);
    let [alarm] = (await alarmsOf(stack, site)).filter((a) => a.zoneId === zoneId);
    expect(await allCount(zoneId)).toBe(1);
    expect(alarm).toMatchObject({ severity: 'WARNING', status: 'ACTIVE_UNACK' });

    // Rising: MAJOR at 90 %, CRITICAL at 100 %; falling: a level is left 5 points below its threshold.
    const path: Array<[number, string]> = [
      [92, 'MAJOR'],
      [101, 'CRITICAL'],
      [96, 'CRITICAL'],
      [94, 'MAJOR'],
      [86, 'MAJOR'],
      [84, 'WARNING'],
      [99, 'MAJOR'],
      [82, 'WARNING'],
    ];
    let raisedWith = { value: 0, message: '' };
    for (const [value, severity] of path) {
      const before = alarm.severity;
      await sendOccupancy(stack, [occupancy(site, zoneId, value)]);
      await drained(stack);
      [alarm] = (await alarmsOf(stack, site)).filter((a) => a.zoneId === zoneId);
      expect({ value, severity: alarm.severity, status: alarm.status }).toEqual({ value, severity, status: 'ACTIVE_UNACK' });
      // The newest figure beside the one the alarm was raised (or re-graded) with, whose message stays.
      expect(alarm.details.latest).toMatchObject({ current: value, percent: value });
      if (severity !== before) raisedWith = { value, message: alarm.message };
      expect(alarm.details).toMatchObject({ current: raisedWith.value, capacity: 100, percent: raisedWith.value });
      expect(alarm.message).toBe(raisedWith.message);
      expect(alarm.message).toContain(`at ${raisedWith.value}% of capacity`);
    }
    expect(await allCount(zoneId)).toBe(1);
    const kinds = await until('the severity events', async () => {
      const k = stack.tap.of(alarm.id).map((e) => `${e.kind}:${e.alarm.severity}`);
      return k.length >= 7 ? k : undefined;
    });
    expect(kinds).toEqual([
      'created:WARNING',
      'severity_changed:MAJOR',
      'severity_changed:CRITICAL',
      'severity_changed:MAJOR',
      'severity_changed:WARNING',
      'severity_changed:MAJOR',
      'severity_changed:WARNING',
    ]);
    expect(stack.tap.of(alarm.id)[1]!.previousSeverity).toBe('WARNING');
  });

  it('clears only below the clear margin (ACTIVE_UNACK → CLEARED_UNACK), and a later breach raises a new alarm', async () => {
    const zoneId = await site.zone(100);
    await sendOccupancy(
      stack,
      [85, 78, 75].map((v) => occupancy(site, zoneId, v)),
    );
    await drained(stack);
    let alarms = (await alarmsOf(stack, site)).filter((a) => a.zoneId === zoneId);
    expect(alarms.map((a) => a.status)).toEqual(['ACTIVE_UNACK']);

    await sendOccupancy(stack, [occupancy(site, zoneId, 74)]);
    await drained(stack);
    alarms = (await alarmsOf(stack, site)).filter((a) => a.zoneId === zoneId);
    expect(alarms).toHaveLength(1);
    expect(alarms[0]).toMatchObject({ status: 'CLEARED_UNACK', acknowledgedAt: null });
    expect(Date.parse(alarms[0].clearedAt)).toBeGreaterThan(Date.parse(alarms[0].createdAt) - 1);
    const first = alarms[0].id;
    await until('the cleared event', async () =>
      stack.tap.of(first).some((e) => e.kind === 'cleared' && e.cause === 'rule') ? true : undefined,
    );

    await sendOccupancy(
      stack,
      [70, 81].map((v) => occupancy(site, zoneId, v)),
    );
    await drained(stack);
    alarms = (await alarmsOf(stack, site)).filter((a) => a.zoneId === zoneId);
    expect(alarms.map((a) => [a.status, a.severity])).toEqual([
      ['ACTIVE_UNACK', 'WARNING'],
      ['CLEARED_UNACK', 'WARNING'],
    ]);
    expect(alarms[1].id).toBe(first);
  });

  it('an acknowledged alarm clears automatically to CLEARED_ACK, keeping its acknowledgement', async () => {
    const zoneId = await site.zone(20);
    await sendOccupancy(stack, [occupancy(site, zoneId, 19)]);
    await drained(stack);
    const [alarm] = (await alarmsOf(stack, site)).filter((a) => a.zoneId === zoneId);
    const ack = await request(`${stack.api.url}/api/alarms/${alarm.id}/ack`, { key: site.op.key, method: 'POST' });
    expect(ack.body).toMatchObject({ id: alarm.id, status: 'ACTIVE_ACK' });
    await sendOccupancy(stack, [occupancy(site, zoneId, 3)]);
    await drained(stack);
    const [after] = (await alarmsOf(stack, site)).filter((a) => a.zoneId === zoneId);
    expect(after).toMatchObject({ id: alarm.id, status: 'CLEARED_ACK', acknowledgedAt: ack.body.acknowledgedAt });
    expect(after.clearedAt).not.toBeNull();
  });

  it('after an operator clears an alarm while the zone stays full, no new alarm until the breach ends, unless it gets worse', async () => {
    const zoneId = await site.zone(100);
    await sendOccupancy(stack, [occupancy(site, zoneId, 85)]);
    await drained(stack);
    const [alarm] = (await alarmsOf(stack, site)).filter((a) => a.zoneId === zoneId);
    const cleared = await request(`${stack.api.url}/api/alarms/${alarm.id}/clear`, { key: site.op.key, method: 'POST' });
    expect(cleared.status).toBe(200);
    await sendOccupancy(
      stack,
      [86, 84, 88].map((v) => occupancy(site, zoneId, v)),
    );
    await drained(stack);
    expect(await allCount(zoneId)).toBe(1);
    // Worse than what was cleared: a new alarm.
    await sendOccupancy(stack, [occupancy(site, zoneId, 93)]);
    await drained(stack);
    const alarms = (await alarmsOf(stack, site)).filter((a) => a.zoneId === zoneId);
    expect(alarms.map((a) => [a.severity, a.status])).toEqual([
      ['MAJOR', 'ACTIVE_UNACK'],
      ['WARNING', 'CLEARED_UNACK'],
    ]);
  });

  it('a zone without capacity never raises a capacity alarm; removing a capacity clears its alarm', async () => {
    const none = await site.zone(null, 'Open air');
    await sendOccupancy(stack, [occupancy(site, none, 500), occupancy(site, none, 5000)]);
    const zoneId = await site.zone(10, 'Shrinking');
    await sendOccupancy(stack, [occupancy(site, zoneId, 12)]);
    await drained(stack);
    expect(await allCount(none)).toBe(0);
    expect(await activeCount(zoneId)).toBe(1);
    const put = await request(`${stack.api.url}/api/venues/${site.venueId}/zones/${zoneId}`, {
      key: site.op.key,
      method: 'PUT',
      json: { capacity: null },
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    await sendOccupancy(stack, [occupancy(site, zoneId, 13)]);
    await drained(stack);
    expect(await activeCount(zoneId)).toBe(0);
    expect(await allCount(zoneId)).toBe(1);
  });
});

describe('alarms of deleted sources', () => {
  it('deleting a zone or an integration clears its active alarm (an acknowledged one to CLEARED_ACK), without waiting for an input', async () => {
    const zoneId = await site.zone(10, 'Closing');
    const integrationId = await site.integration();
    await sendOccupancy(stack, [occupancy(site, zoneId, 10)]);
    await sendHealth(stack, [health(site, integrationId, 'offline', 'healthy', null)]);
    await drained(stack);
    const mine = async () => (await alarmsOf(stack, site)).filter((a) => a.zoneId === zoneId || a.integrationId === integrationId);
    const [zoneAlarm, connectorAlarm] = [
      (await mine()).find((a) => a.zoneId === zoneId),
      (await mine()).find((a) => a.integrationId === integrationId),
    ];
    expect(await request(`${stack.api.url}/api/alarms/${connectorAlarm.id}/ack`, { key: site.op.key, method: 'POST' })).toMatchObject({
      status: 200,
    });
    for (const path of [`zones/${zoneId}`, `integrations/${integrationId}`]) {
      const del = await request(`${stack.api.url}/api/venues/${site.venueId}/${path}`, { key: site.op.key, method: 'DELETE' });
      expect(del.status, JSON.stringify(del.body)).toBe(200);
    }
    const after = await until('both alarms cleared', async () => {
      const a = await mine();
      return a.every((x) => x.clearedAt !== null) ? a : undefined;
    });
    expect(after.find((a) => a.id === zoneAlarm.id)).toMatchObject({ status: 'CLEARED_UNACK' });
    expect(after.find((a) => a.id === connectorAlarm.id)).toMatchObject({ status: 'CLEARED_ACK' });
    await until('the cleared events', async () =>
      stack.tap.of(zoneAlarm.id).some((e) => e.kind === 'cleared') && stack.tap.of(connectorAlarm.id).some((e) => e.kind === 'cleared')
        ? true
        : undefined,
    );
  });
});

describe('connector health alarms', () => {
  it('a connector going offline raises an alarm on the integration, degraded changes its severity, and its recovery clears it', async () => {
    const integrationId = await site.integration();
    const lastEventAt = Date.now() - 6 * 60_000;
    await sendHealth(stack, [health(site, integrationId, 'offline', 'healthy', lastEventAt)]);
    await drained(stack);
    let [alarm] = (await alarmsOf(stack, site)).filter((a) => a.integrationId === integrationId);
    expect(alarm).toMatchObject({ zoneId: null, integrationId, type: 'connector_unhealthy', severity: 'MAJOR', status: 'ACTIVE_UNACK' });
    expect(alarm.details).toMatchObject({ status: 'offline', connectorType: 'meraki', lastEventAt: new Date(lastEventAt).toISOString() });
    expect(alarm.message).toContain('offline');

    await sendHealth(stack, [health(site, integrationId, 'degraded', 'offline', Date.now())]);
    await drained(stack);
    [alarm] = (await alarmsOf(stack, site)).filter((a) => a.integrationId === integrationId);
    expect(alarm).toMatchObject({ severity: 'MINOR', status: 'ACTIVE_UNACK' });

    await sendHealth(stack, [health(site, integrationId, 'healthy', 'degraded', Date.now())]);
    await drained(stack);
    const alarms = (await alarmsOf(stack, site)).filter((a) => a.integrationId === integrationId);
    expect(alarms).toHaveLength(1);
    expect(alarms[0]).toMatchObject({ id: alarm.id, status: 'CLEARED_UNACK' });
    const kinds = await until('the connector alarm events', async () => {
      const k = stack.tap.of(alarm.id).map((e) => e.kind);
      return k.length >= 3 ? k : undefined;
    });
    expect(kinds).toEqual(['created', 'severity_changed', 'cleared']);
  });

  it('a health change of another venue, or an undecodable message, raises nothing and does not stop the consumer', async () => {
    const other = await newSite(stack.api);
    const theirs = await other.integration();
    const integrationId = await site.integration();
    // Claims the other operator's integration for this venue: refused by the rule.
    const forged = { ...health(site, theirs, 'offline', null, null) };
    const topic = `${stack.cfg.KAFKA_TOPIC_PREFIX}.connector-health.v1`;
    await stack.producers[0]!.send({ topic, messages: [{ key: site.venueId, value: Buffer.from('{"not":"a health change"}') }] });
    await sendHealth(stack, [forged, health(site, integrationId, 'offline', null, null)]);
    await drained(stack);
    expect(await allCount(theirs)).toBe(0);
    expect(await allCount(integrationId)).toBe(1);
  });
});

describe('per-venue alarm rules (GET/PUT/DELETE /api/venues/{id}/alarm-rules)', () => {
  const rulesUrl = (s: Site) => `${stack.api.url}/api/venues/${s.venueId}/alarm-rules`;

  it('a venue starts on the defaults; its own thresholds apply from the next update; a reset brings the defaults back', async () => {
    const s = await newSite(stack.api);
    const initial = await request(rulesUrl(s), { key: s.op.key });
    expect(initial.body).toEqual({
      venue_id: s.venueId,
      zone_occupancy: { warning_percent: 80, major_percent: 90, critical_percent: 100, hysteresis_points: 5, min_duration_seconds: 0 },
      is_default: true,
      updated_at: null,
    });
    const put = await request(rulesUrl(s), {
      key: s.op.key,
      method: 'PUT',
      json: { zone_occupancy: { warning_percent: 50, major_percent: 60 } },
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(put.body).toMatchObject({
      zone_occupancy: { warning_percent: 50, major_percent: 60, critical_percent: 100, hysteresis_points: 5 },
      is_default: false,
    });
    expect((await request(rulesUrl(s), { key: s.op.key })).body).toEqual(put.body);

    const zoneId = await s.zone(100);
    await sendOccupancy(stack, [occupancy(s, zoneId, 55)]);
    await drained(stack);
    let [alarm] = (await alarmsOf(stack, s)).filter((a) => a.zoneId === zoneId);
    expect(alarm).toMatchObject({ severity: 'WARNING', status: 'ACTIVE_UNACK', details: { threshold: 50, clearBelow: 45 } });
    await sendOccupancy(stack, [occupancy(s, zoneId, 61)]);
    await drained(stack);
    [alarm] = (await alarmsOf(stack, s)).filter((a) => a.zoneId === zoneId);
    expect(alarm.severity).toBe('MAJOR');

    const reset = await request(rulesUrl(s), { key: s.op.key, method: 'DELETE' });
    expect(reset.body).toMatchObject({ is_default: true, zone_occupancy: { warning_percent: 80 } });
    await sendOccupancy(stack, [occupancy(s, zoneId, 61)]);
    await drained(stack);
    [alarm] = (await alarmsOf(stack, s)).filter((a) => a.zoneId === zoneId);
    expect(alarm.status).toBe('CLEARED_UNACK');
  });

  it('a minimum duration holds a breach back: raised by a later update past it, or by the timer when no update comes', async () => {
    const s = await newSite(stack.api);
    const put = await request(rulesUrl(s), { key: s.op.key, method: 'PUT', json: { zone_occupancy: { min_duration_seconds: 2 } } });
    expect(put.status).toBe(200);
    const [brief, held, quiet] = [await s.zone(10, 'Brief'), await s.zone(10, 'Held'), await s.zone(10, 'Quiet')];
    const t0 = Date.now() - 60_000;
    // Read a minute late (a backlog): the timer (300 ms ticks) waits the duration from the reading,
    // so the update ending the breach, read a second later, comes in time.
    await sendOccupancy(stack, [{ ...occupancy(s, brief, 9), ts: t0 }]);
    await drained(stack);
    await sleep(1_000);
    await sendOccupancy(stack, [
      // Over for 1 s, then below the clear line: never raised.
      { ...occupancy(s, brief, 7), ts: t0 + 1_000 },
      { ...occupancy(s, brief, 9), ts: t0 + 2_500 },
      { ...occupancy(s, brief, 5), ts: t0 + 3_000 },
      // Over, and still over 2 s later: raised by that update.
      { ...occupancy(s, held, 9), ts: t0 },
      { ...occupancy(s, held, 10), ts: t0 + 2_000 },
    ]);
    const sentAt = Date.now();
    await sendOccupancy(stack, [occupancy(s, quiet, 10)]);
    await drained(stack);
    const bySource = async () => {
      const all = await alarmsOf(stack, s);
      return {
        brief: all.filter((a) => a.zoneId === brief),
        held: all.filter((a) => a.zoneId === held),
        quiet: all.filter((a) => a.zoneId === quiet),
      };
    };
    let now = await bySource();
    expect(now.brief).toEqual([]);
    expect(now.held.map((a) => a.severity)).toEqual(['CRITICAL']);
    if (Date.now() - sentAt < 1_500) expect(now.quiet).toEqual([]);
    await until('the quiet zone raised by the timer', async () => ((await bySource()).quiet.length === 1 ? true : undefined));
    expect(Date.now() - sentAt).toBeGreaterThanOrEqual(1_900);
    now = await bySource();
    expect(now.quiet.map((a) => [a.severity, a.status])).toEqual([['CRITICAL', 'ACTIVE_UNACK']]);
    expect(now.brief).toEqual([]);
  });

  it('refuses rules that could not work, naming the field, and keeps the previous ones', async () => {
    const s = await newSite(stack.api);
    const cases: Array<[unknown, string]> = [
      [{ zone_occupancy: { major_percent: 70 } }, 'zone_occupancy.major_percent'],
      [{ zone_occupancy: { critical_percent: 90 } }, 'zone_occupancy.critical_percent'],
      [{ zone_occupancy: { hysteresis_points: 80 } }, 'zone_occupancy.hysteresis_points'],
      [{ zone_occupancy: { warning_percent: 0 } }, 'zone_occupancy.warning_percent'],
      [{ zone_occupancy: { min_duration_seconds: 1.5 } }, 'zone_occupancy.min_duration_seconds'],
      [{ zone_occupancy: { colour: 'red' } }, 'zone_occupancy'],
      [{ zone_occupancy: {} }, 'zone_occupancy'],
      [{}, 'zone_occupancy'],
    ];
    for (const [json, field] of cases) {
      const res = await request(rulesUrl(s), { key: s.op.key, method: 'PUT', json });
      expect(res.status, JSON.stringify(json)).toBe(400);
      expect(res.body.code).toBe('VALIDATION_ERROR');
      expect(res.body.details.map((d: { field: string }) => d.field).join(' '), JSON.stringify(json)).toContain(field);
    }
    expect((await request(rulesUrl(s), { key: s.op.key })).body.is_default).toBe(true);
  });

  it("another operator's venue is a 403 and an unknown venue a 404, for reading, changing and resetting", async () => {
    const theirs = await newSite(stack.api);
    const before = await request(rulesUrl(theirs), {
      key: theirs.op.key,
      method: 'PUT',
      json: { zone_occupancy: { warning_percent: 70 } },
    });
    expect(before.status).toBe(200);
    const unknown = { ...theirs, venueId: '00000000-0000-4000-8000-000000000000' };
    for (const [method, json] of [
      ['GET', undefined],
      ['PUT', { zone_occupancy: { warning_percent: 10 } }],
      ['DELETE', undefined],
    ] as const) {
      const res = await request(rulesUrl(theirs), { key: site.op.key, method, json });
      expect(res.status, method).toBe(403);
      expect((await request(rulesUrl(unknown), { key: site.op.key, method, json })).status, method).toBe(404);
    }
    expect((await request(rulesUrl(theirs), { key: theirs.op.key })).body).toEqual(before.body);
  });
});
