import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topicOffsets } from '../../lib/kafka.js';
import { derivedTopicNames } from '../../lib/topology.js';
import { one, rows, sql } from '../../postgres/client.js';
import {
  drained,
  health,
  newSite,
  occupancy,
  openAlarmStack,
  sendHealth,
  sendOccupancy,
  sleep,
  until,
  type AlarmStack,
  type Site,
} from './support.js';

let stack: AlarmStack;
let site: Site;
const children: ChildProcess[] = [];

/** Starts the rule consumer as a child process; resolves once it runs. */
async function startChild(
  groupId: string,
  minDurationMs: number,
  commitIntervalMs: number,
): Promise<{ child: ChildProcess; exited: Promise<number | null> }> {
  const child = spawn(
    process.execPath,
    [
      'node_modules/vite-node/vite-node.mjs',
      'test/alarms/rules-child.ts',
      stack.cfg.KAFKA_TOPIC_PREFIX,
      groupId,
      String(minDurationMs),
      String(commitIntervalMs),
    ],
    { env: process.env, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  children.push(child);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('ready') && resolve());
    child.on('exit', (code) => reject(new Error(`the rule consumer exited early (${code})`)));
  });
  return { child, exited };
}

async function committed(groupId: string, topic: string): Promise<number[]> {
  const admin = stack.kafka.admin();
  await admin.connect();
  try {
    const [t] = await admin.fetchOffsets({ groupId, topics: [topic] });
    return t!.partitions.map((p) => Number(p.offset));
  } finally {
    await admin.disconnect();
  }
}

beforeAll(async () => {
  stack = await openAlarmStack(1, { rules: false });
  site = await newSite(stack.api);
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await stack?.close();
});

const alarmsBySource = async (sourceId: string) =>
  rows<{ id: string; status: string; severity: string }>(
    stack.api.services.db,
    sql`SELECT id, status, severity FROM alarms WHERE source_id = ${sourceId} ORDER BY created_at, id`,
  );

describe('the rule consumer killed (kill -9) and restarted', () => {
  it('resumes from its state in Postgres: every input read again is skipped, no duplicate alarm, and a pending breach still raises', async () => {
    const groupId = `${stack.cfg.KAFKA_TOPIC_PREFIX}.alarms.kill-${randomUUID().slice(0, 6)}`;
    // Offsets are never committed by this first instance: after the kill every input is read again.
    const first = await startChild(groupId, 1_500, 3_600_000);

    const zone = await site.zone(100, 'Episodes');
    const slow = await site.zone(100, 'Pending');
    const integrationId = await site.integration();
    const t0 = Date.now() - 60_000;
    // Event times 2 s apart: each breach outlasts the 1.5 s minimum duration by the next update.
    const at = (u: ReturnType<typeof occupancy>, i: number) => ({ ...u, ts: t0 + i * 2_000 });
    await sendOccupancy(
      stack,
      [85, 95, 105, 60, 90, 92].map((v, i) => at(occupancy(site, zone, v), i)),
    );
    await sendHealth(stack, [
      health(site, integrationId, 'offline', 'healthy', null),
      health(site, integrationId, 'healthy', 'offline', Date.now()),
      health(site, integrationId, 'offline', 'healthy', Date.now()),
    ]);
    // One update, then nothing: raised by the timer once its minimum duration has passed.
    await sendOccupancy(stack, [{ ...occupancy(site, slow, 97), ts: Date.now() + 2_000 }]);

    await until('the first instance to apply everything', async () => {
      const [a, c] = [await alarmsBySource(zone), await alarmsBySource(integrationId)];
      const pending = await one(
        stack.api.services.db,
        sql`SELECT 1 FROM alarm_rule_state WHERE source_id = ${slow} AND pending IS NOT NULL`,
      );
      return a.length === 2 && a[1]!.severity === 'MAJOR' && c.length === 2 && pending ? true : undefined;
    });
    first.child.kill('SIGKILL');
    await first.exited;
    const topics = derivedTopicNames(stack.cfg.KAFKA_TOPIC_PREFIX);
    expect((await committed(groupId, topics.occupancy)).every((o) => o === -1)).toBe(true);
    const before = { zone: await alarmsBySource(zone), connector: await alarmsBySource(integrationId) };
    expect(before.zone.map((a) => [a.severity, a.status])).toEqual([
      ['CRITICAL', 'CLEARED_UNACK'],
      ['MAJOR', 'ACTIVE_UNACK'],
    ]);
    expect(before.connector.map((a) => a.status)).toEqual(['CLEARED_UNACK', 'ACTIVE_UNACK']);
    expect(await alarmsBySource(slow)).toEqual([]);

    await startChild(groupId, 1_500, 0);
    await drained(stack, groupId);
    const raised = await until('the pending breach to be raised after the restart', async () => {
      const a = await alarmsBySource(slow);
      return a.length > 0 ? a : undefined;
    });
    await sleep(1_000);
    expect(await alarmsBySource(slow)).toEqual(raised);
    expect(raised.map((a) => [a.severity, a.status])).toEqual([['MAJOR', 'ACTIVE_UNACK']]);
    expect(await alarmsBySource(zone)).toEqual(before.zone);
    expect(await alarmsBySource(integrationId)).toEqual(before.connector);

    // Every alarm's creation reached the alarms topic, once per alarm (the outbox relays what the kill left).
    const all = [...before.zone, ...before.connector, ...raised].map((a) => a.id).sort();
    const created = await until('a created event for every alarm', async () => {
      const ids = [...new Set(stack.tap.events.filter((e) => e.kind === 'created').map((e) => e.alarm.id))].sort();
      return ids.length === all.length ? ids : undefined;
    });
    expect(created).toEqual(all);
  });

  it('stopped with SIGTERM, it finishes, commits what it applied and exits 0', async () => {
    const groupId = `${stack.cfg.KAFKA_TOPIC_PREFIX}.alarms.term-${randomUUID().slice(0, 6)}`;
    const { child, exited } = await startChild(groupId, 0, 3_600_000);
    const zone = await site.zone(10);
    await sendOccupancy(stack, [occupancy(site, zone, 9), occupancy(site, zone, 11)]);
    await until('the alarm', async () => ((await alarmsBySource(zone)).some((a) => a.severity === 'CRITICAL') ? true : undefined));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const topics = derivedTopicNames(stack.cfg.KAFKA_TOPIC_PREFIX);
    const admin = stack.kafka.admin();
    await admin.connect();
    const ends = await topicOffsets(admin, topics.occupancy);
    await admin.disconnect();
    const offsets = await committed(groupId, topics.occupancy);
    const total = (xs: number[]) => xs.reduce((s, x) => s + Math.max(0, x), 0);
    expect(total(offsets)).toBe(total(ends.map((e) => Number(e.offset))));
  });
});
