import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CanonicalEvent } from '../../lib/events/canonical.js';
import type { Config } from '../../lib/config.js';
import { createLogger } from '../../lib/logger.js';
import { chRows, chsql, clusterOf, createCh, insertRows, raw, type Ch } from '../../clickhouse/client.js';
import { migrateClickhouse, serverExecutor } from '../../clickhouse/migrate.js';
import { operatorActivity, operatorEventCount } from '../../clickhouse/queries/dashboard.js';
import { telemetrySeries } from '../../clickhouse/queries/telemetry.js';
import { dropExpiredPartitions } from '../../pipeline/retention.js';
import type { RunningSink } from '../../pipeline/sink/events-sink.js';
import { testConfig } from '../support/env.js';
import {
  allCommitted,
  cutOnceTarget,
  deviceId,
  event,
  expectedTotals,
  expectRollupsOf,
  newTenant,
  offsets,
  openHarness,
  produceRequests,
  rollupTotals,
  startSink,
  waitFor,
  type Harness,
} from '../pipeline/harness.js';
// @ts-expect-error plain ESM script without types
import { CH_CLUSTER_NODES, STACK_DIR, clickhouseClusterEnv, clickhouseNodes, status, up } from '../../scripts/stack.mjs';

// Cluster mode against the real thing: `stack.mjs up --clickhouse-cluster` (ZooKeeper and 2 shards
// x 2 replicas of ClickHouse 18.16), the migrations in cluster mode, and the events sink writing
// the same Kafka topic into the single server and into the cluster at once: every count, rollup
// and query must answer alike, a replay after a crash between insert and commit must store nothing
// twice, an insert cut between its raw part and its views must be repaired on both replicas,
// retention must drop a partition on every replica, and a replica killed under load must lose and
// double nothing. Part of `npm test` (about 90 s beside the other e2e files with a cold cluster,
// 40 s with a running one; CLICKHOUSE_CLUSTER_TEST=0 skips it). The cluster is left running (a
// later run reuses it); `node scripts/stack.mjs down --clickhouse-cluster` stops it.

type Node = { name: string; url: string; shard: number; replica: number };
const nodes = clickhouseNodes as Node[];

describe.skipIf(process.env.CLICKHOUSE_CLUSTER_TEST === '0')('ClickHouse cluster mode (2 shards x 2 replicas)', () => {
  let h: Harness;
  let cfg: Config;
  let cluster: Ch;
  /** One client per node, on the local (replicated) database. */
  let local: Array<{ node: Node; ch: Ch }> = [];
  const log = createLogger('cluster-test', 'silent');

  beforeAll(async () => {
    const { env } = await up({ quiet: true, clickhouseCluster: true });
    expect(env.CLICKHOUSE_CLUSTER_NODES).toBe(CH_CLUSTER_NODES.join(','));
    h = await openHarness();
    cfg = testConfig({ ...clickhouseClusterEnv(), CLICKHOUSE_DATABASE: `${h.cfg.CLICKHOUSE_DATABASE}_c` });
    const admin = createCh(cfg, null, { requestTimeoutMs: 600_000 });
    await migrateClickhouse(serverExecutor(admin), cfg.CLICKHOUSE_DATABASE);
    await admin.close();
    cluster = createCh(cfg);
    const localDb = clusterOf(cluster)!.localDatabase(cfg.CLICKHOUSE_DATABASE);
    local = nodes.map((node) => ({ node, ch: clusterOf(cluster)!.nodeClient(node.url, localDb) }));
  }, 300_000);

  afterAll(async () => {
    await cluster?.close();
    for (const { ch } of local) await ch.close();
    // The test's databases go; the replicated tables' ZooKeeper paths name the database, so none is reused.
    const admin = cfg && createCh(cfg, null);
    if (admin) {
      for (const { node } of local) {
        const c = clusterOf(admin)!.nodeClient(node.url, null);
        await c.command({ query: `DROP DATABASE IF EXISTS ${cfg.CLICKHOUSE_DATABASE}` }).catch(() => undefined);
        await c.command({ query: `DROP DATABASE IF EXISTS ${cfg.CLICKHOUSE_DATABASE}_local` }).catch(() => undefined);
        await c.close();
      }
      await admin.close();
    }
    await h?.close();
  });

  /** Floating sums added in another order (per shard, then merged) differ in the last bits: compared to 12 digits. */
  const rounded = (v: unknown): unknown => JSON.parse(JSON.stringify(v, (_, x) => (typeof x === 'number' ? Number(x.toPrecision(12)) : x)));

  const count = async (ch: Ch, where: string) =>
    (await chRows<{ n: number }>(ch, raw(`SELECT toUInt32(count()) AS n FROM events WHERE ${where}`)))[0]!.n;

  function workload(t: { operatorId: string; venueIds: string[] }, n: number, end = Date.now()): CanonicalEvent[] {
    return Array.from({ length: n }, (_, i) => {
      const base = { operatorId: t.operatorId, venueId: t.venueIds[i % t.venueIds.length]!, ts: end - 7_200_000 + i * 1_733 };
      switch (i % 4) {
        case 0:
          return event({ ...base, type: 'environment', metrics: { temperature: 18 + (i % 50) / 10, co2: 400 + (i % 300) } });
        case 1:
          return event({ ...base, type: 'entry', metrics: { entries: 1 + (i % 3) } });
        case 2:
          return event({ ...base, type: 'exit', metrics: { exits: 1 + (i % 2) } });
        default:
          return event({ ...base, type: 'device_seen', device: deviceId(`dev-${i % 37}`) });
      }
    });
  }

  it('creates every table replicated on every node, with a Distributed table of each name, and re-runs as a no-op', async () => {
    const again = await migrateClickhouse(serverExecutor(createCh(cfg, null)), cfg.CLICKHOUSE_DATABASE);
    expect(again.applied).toEqual([]);
    const engines = await Promise.all(
      local.map(({ ch }) =>
        chRows<{ name: string; engine: string }>(
          ch,
          chsql`SELECT name, engine FROM system.tables WHERE database = currentDatabase() ORDER BY name`,
        ),
      ),
    );
    for (const e of engines) expect(e).toEqual(engines[0]);
    const tables = engines[0]!.filter((t) => t.engine !== 'MaterializedView' && t.name !== 'schema_migrations');
    expect(tables.map((t) => t.name)).toEqual(
      expect.arrayContaining(['events', 'telemetry_1m', 'telemetry_1h', 'telemetry_1d', 'derived_visits', 'retention_classes']),
    );
    for (const t of tables) expect(t.engine, t.name).toMatch(/^Replicated\w*MergeTree$/);
    const dist = await chRows<{ name: string; engine: string }>(
      cluster,
      chsql`SELECT name, engine FROM system.tables WHERE database = currentDatabase() ORDER BY name`,
    );
    expect(dist.map((t) => t.name)).toEqual(tables.map((t) => t.name));
    expect(new Set(dist.map((t) => t.engine))).toEqual(new Set(['Distributed']));
  });

  it('stores what the sink writes exactly once, sharded by venue, with rollups and query answers equal to one server', async () => {
    const t = await newTenant(h.db, 'pro', [
      'UTC',
      'Europe/Berlin',
      'Asia/Kolkata',
      'America/New_York',
      'Australia/Sydney',
      'Europe/London',
      'Asia/Tokyo',
      'America/Chicago',
    ]);
    const events = workload(t, 3000);
    await produceRequests(
      h,
      [...events].sort((a, b) => a.venueId.localeCompare(b.venueId)),
      40,
    );
    const single = await startSink(h, `cluster-test-single-${randomUUID()}`, { batchRows: 500 });
    const gc = `cluster-test-cluster-${randomUUID()}`;
    const clustered = await startSink(h, gc, { batchRows: 500, ch: cluster });
    try {
      await allCommitted(h, gc, 60_000);
      await waitFor('the single server', async () => (await count(h.ch, `kafka_topic = '${h.topics.events}'`)) === events.length, 60_000);
    } finally {
      await single.stop();
      await clustered.stop();
    }
    const where = `kafka_topic = '${h.topics.events}'`;
    expect(await count(cluster, where)).toBe(events.length);
    // Each venue's rows on one shard only, and both replicas of that shard hold them all.
    const perNode = await Promise.all(
      local.map(async ({ node, ch }) => ({
        node,
        venues: await chRows<{ venue: string; n: number }>(
          ch,
          raw(`SELECT toString(venue_id) AS venue, toUInt32(count()) AS n FROM events WHERE ${where} GROUP BY venue ORDER BY venue`),
        ),
      })),
    );
    for (const s of [1, 2]) {
      const [a, b] = perNode.filter((p) => p.node.shard === s);
      await waitFor(`shard ${s}'s replicas to agree`, async () => {
        const again = await chRows<{ venue: string; n: number }>(
          local.find((l) => l.node === b!.node)!.ch,
          raw(`SELECT toString(venue_id) AS venue, toUInt32(count()) AS n FROM events WHERE ${where} GROUP BY venue ORDER BY venue`),
        );
        return JSON.stringify(again) === JSON.stringify(a!.venues);
      });
    }
    const shard1 = new Set(perNode.find((p) => p.node.shard === 1 && p.node.replica === 1)!.venues.map((v) => v.venue));
    const shard2 = new Set(perNode.find((p) => p.node.shard === 2 && p.node.replica === 1)!.venues.map((v) => v.venue));
    expect([...shard1].filter((v) => shard2.has(v))).toEqual([]);
    expect(shard1.size + shard2.size).toBe(t.venueIds.length);
    expect(shard1.size).toBeGreaterThan(0);
    expect(shard2.size).toBeGreaterThan(0);

    // Rollups: exact, and the same on both.
    const want = expectedTotals(events);
    for (const table of ['telemetry_1m', 'telemetry_1h', 'telemetry_1d'] as const) {
      const got = await rollupTotals({ ...h, ch: cluster }, table, t.venueIds);
      const one = await rollupTotals(h, table, t.venueIds);
      expect(rounded(got), table).toEqual(rounded(one));
      expect(got.events!.count, table).toBe(want.events!.count);
      expect(got.temperature!.sum, table).toBeCloseTo(want.temperature!.sum, 6);
    }
    // The api's queries (their retention_classes subqueries run per shard), same answers.
    const now = Math.floor(Date.now() / 1000);
    const window = { operatorId: t.operatorId, fromSec: now - 86_400, toSec: now + 60 };
    expect(await operatorEventCount(cluster, window)).toBe(await operatorEventCount(h.ch, window));
    expect(await operatorEventCount(cluster, window)).toBe(events.length);
    expect(rounded(await operatorActivity(cluster, { ...window, bucketSec: 3600 }))).toEqual(
      rounded(await operatorActivity(h.ch, { ...window, bucketSec: 3600 })),
    );
    for (const venueId of t.venueIds.slice(0, 2)) {
      for (const resolution of ['1m', '1h'] as const) {
        const q = {
          operatorId: t.operatorId,
          venueId,
          keys: ['temperature', 'entries', 'events', 'devices'],
          agg: 'SUM' as const,
          resolution,
          fromSec: now - 86_400,
          toSec: now + 60,
          bucketSec: resolution === '1m' ? 300 : 3600,
        };
        expect(rounded(await telemetrySeries(cluster, q)), `${venueId} ${resolution}`).toEqual(rounded(await telemetrySeries(h.ch, q)));
      }
    }
  }, 180_000);

  it('replays a consumer killed between insert and commit without storing anything twice', async () => {
    // Topics of its own (a fresh harness), so the group's offsets and the skipped count are this test's.
    const h2 = await openHarness();
    try {
      const t = await newTenant(h2.db, 'starter', ['UTC', 'Europe/Paris', 'Asia/Tokyo', 'America/Denver']);
      const events = workload(t, 1500);
      await produceRequests(
        h2,
        [...events].sort((a, b) => a.venueId.localeCompare(b.venueId)),
        70,
      );
      const g = `cluster-test-replay-${randomUUID()}`;
      let crashed = false;
      const first: RunningSink = await startSink(h2, g, {
        ch: cluster,
        batchRows: 300,
        afterInsert: async () => {
          // The process "dies" right after ClickHouse took the rows: nothing is committed. A batch
          // queued behind it is inserted and "dies" too (a dead process commits nothing).
          if (!crashed) void first.consumer.consumer.stop();
          crashed = true;
          throw new Error('simulated crash between insert and commit');
        },
      });
      await waitFor('the crash', async () => crashed);
      await first.consumer.stop();
      const where = `kafka_topic = '${h2.topics.events}'`;
      const before = await count(cluster, where);
      expect(before).toBeGreaterThan(0);
      expect((await offsets(h2, g)).committed.every((c) => c === -1)).toBe(true);
      const second = await startSink(h2, g, { ch: cluster, batchRows: 300 });
      try {
        await allCommitted(h2, g, 60_000);
        expect(second.sink.stats.skipped).toBe(before);
      } finally {
        await second.stop();
      }
      expect(await count(cluster, where)).toBe(events.length);
      const got = await rollupTotals({ ...h2, ch: cluster }, 'telemetry_1m', t.venueIds);
      expect(got.events!.count).toBe(events.length);
    } finally {
      await h2.close();
    }
  }, 120_000);

  it('repairs the rollups of an insert cut between its raw part and its views, on both replicas of each shard', async () => {
    const h4 = await openHarness();
    try {
      const t = await newTenant(h4.db, 'pro', ['UTC', 'Europe/Rome', 'Asia/Singapore', 'America/Lima']);
      const events = workload(t, 1200);
      // The first insert stores its raw rows with every node's views detached, then fails; the
      // retry finds the rows stored.
      const target = cutOnceTarget(h4.db, () => local.map((l) => l.ch));
      await produceRequests(h4, events, 60);
      const g = `cluster-test-cut-${randomUUID()}`;
      const sink = await startSink(h4, g, { ch: cluster, batchRows: 400 }, target);
      try {
        await allCommitted(h4, g, 60_000);
        await waitFor('the views repaired', async () => sink.sink.stats.viewRepairs > 0 && sink.sink.viewRepairsPending === 0, 60_000);
        expect(sink.sink.stats.viewRowsToppedUp).toBeGreaterThan(0);
      } finally {
        await sink.stop();
      }
      expect(await count(cluster, `kafka_topic = '${h4.topics.events}'`)).toBe(events.length);
      await expectRollupsOf({ ch: cluster }, events, t.venueIds);
      const want = expectedTotals(events);
      // The repair went through the replication log: both replicas of a shard hold the same figures.
      const perNode = async (ch: Ch) =>
        chRows<{ n: string }>(
          ch,
          raw(
            `SELECT toString(countMerge(v_count)) AS n FROM telemetry_1h WHERE has([${t.venueIds.map((v) => `'${v}'`).join(',')}], toString(venue_id))`,
          ),
        );
      await waitFor(
        'the repair on both replicas',
        async () => {
          const [a, b, c, d] = await Promise.all(local.map((l) => perNode(l.ch)));
          return (
            a![0]!.n === b![0]!.n &&
            c![0]!.n === d![0]!.n &&
            Number(a![0]!.n) + Number(c![0]!.n) ===
              want.events!.count + want.temperature!.count + want.co2!.count + want.entries!.count + want.exits!.count
          );
        },
        30_000,
      );
    } finally {
      await h4.close();
    }
  }, 120_000);

  it('drops an expired partition on every replica of every shard', async () => {
    // Venues of both shards (the Distributed tables' sharding key: cityHash64 of the venue id, modulo 2).
    const candidates = Array.from({ length: 16 }, () => randomUUID());
    const shardOf = await chRows<{ v: string; s: number }>(
      cluster,
      raw(`SELECT v, toUInt8(cityHash64(v) % 2) AS s FROM (SELECT arrayJoin([${candidates.map((c) => `'${c}'`).join(',')}]) AS v)`),
    );
    const t = {
      operatorId: randomUUID(),
      venueIds: [...shardOf.filter((x) => x.s === 0).slice(0, 2), ...shardOf.filter((x) => x.s === 1).slice(0, 2)].map((x) => x.v),
    };
    expect(t.venueIds.length).toBe(4);
    const old = Date.UTC(2020, 0, 15, 12) / 1000;
    const fresh = Math.floor(Date.now() / 1000) - 3600;
    const row = (venueId: string, ts: number, retention: number) => ({
      event_id: randomUUID(),
      operator_id: t.operatorId,
      venue_id: venueId,
      zone_id: '',
      connector_type: 'meraki',
      event_type: 'environment',
      ts,
      local_day: new Date(ts * 1000).toISOString().slice(0, 10),
      ts_ms: 0,
      received_at: ts,
      device: '',
      randomized_mac: 0,
      metric_names: ['temperature'],
      metric_values: [20],
      payload: '{}',
      retention_days: retention,
      kafka_topic: 'retention-test',
      kafka_partition: 0,
      kafka_offset: 0,
      kafka_index: 0,
    });
    // Class 7 (never used elsewhere by the tests): old rows on both shards, and fresh ones that stay.
    await insertRows(cluster, 'events', [...t.venueIds.map((v) => row(v, old, 7)), ...t.venueIds.map((v) => row(v, fresh, 7))]);
    const oldPartition = `7-20200115`;
    const partsOn = async (ch: Ch) =>
      (
        await chRows<{ table: string }>(
          ch,
          chsql`SELECT DISTINCT table FROM system.parts WHERE database = currentDatabase() AND active AND partition_id = ${oldPartition}`,
        )
      )
        .map((r) => r.table)
        .sort();
    await waitFor('the old partition on every replica', async () =>
      (await Promise.all(local.map(({ ch }) => partsOn(ch)))).every((p) => p.includes('events')),
    );

    const dropped = await dropExpiredPartitions(cluster, log);
    expect(dropped).toEqual(
      expect.arrayContaining([
        { table: 'events', partitionId: oldPartition },
        { table: 'telemetry_1m', partitionId: oldPartition },
      ]),
    );
    // Each (table, partition) reported once, as on one server.
    expect(new Set(dropped.map((d) => `${d.table}:${d.partitionId}`)).size).toBe(dropped.length);
    await waitFor(
      'the drop on every replica',
      async () => (await Promise.all(local.map(({ ch }) => partsOn(ch)))).every((p) => p.length === 0),
      30_000,
    );
    expect(await count(cluster, `has([${t.venueIds.map((v) => `'${v}'`).join(',')}], toString(venue_id))`)).toBe(t.venueIds.length);
    expect(await dropExpiredPartitions(cluster, log)).toEqual([]);
  }, 90_000);

  it('keeps storing and answering while a replica is killed, and the replica catches up when started again', async () => {
    const h3 = await openHarness();
    const victim = nodes.find((n) => n.shard === 2 && n.replica === 1)! as Node & { kill(): Promise<boolean> };
    const mate = local.find((l) => l.node.shard === 2 && l.node.replica === 2)!;
    try {
      const t = await newTenant(h3.db, 'pro', [
        'UTC',
        'Europe/Berlin',
        'Asia/Kolkata',
        'America/New_York',
        'Australia/Sydney',
        'Europe/London',
        'Asia/Tokyo',
        'America/Chicago',
      ]);
      const events = workload(t, 2400);
      const g = `cluster-test-kill-${randomUUID()}`;
      const sink = await startSink(h3, g, { ch: cluster, batchRows: 200 });
      const where = `kafka_topic = '${h3.topics.events}'`;
      try {
        await produceRequests(h3, events.slice(0, 800), 40);
        await waitFor('the first third', async () => (await count(cluster, where)) === 800, 60_000);
        expect(await victim.kill()).toBe(true);
        // Inserts and reads of shard 2 move to its second replica: the sink goes on storing and
        // committing (it commits only behind stored rows), and queries answer. Parts the dead
        // replica took just before and its mate had not fetched yet stay out of sight until it
        // returns (asynchronous replication, no insert quorum): at least the first third shows.
        await produceRequests(h3, events.slice(800, 1600), 40);
        await allCommitted(h3, g, 60_000);
        expect(await count(cluster, where)).toBeGreaterThanOrEqual(800);
        await up({ quiet: true, clickhouseCluster: true });
        await produceRequests(h3, events.slice(1600), 40);
        await allCommitted(h3, g, 60_000);
        // An insert cut by the kill may have left a view short: the sink repairs it once every
        // replica answers with nothing queued (docs/pipeline.md#materialized-views-and-partial-failure).
        await waitFor('the views of failed inserts checked', async () => sink.sink.viewRepairsPending === 0, 120_000);
        expect(sink.sink.stats.viewRepairsAbandoned).toBe(0);
      } finally {
        await sink.stop();
      }
      await waitFor('every event in sight again', async () => (await count(cluster, where)) === events.length, 60_000);
      expect(
        (await chRows<{ d: number }>(cluster, raw(`SELECT toUInt32(uniqExact(event_id)) AS d FROM events WHERE ${where}`)))[0]!.d,
      ).toBe(events.length);
      // The restarted replica ends with exactly its mate's rows.
      const victimCh = local.find((l) => l.node === victim)!.ch;
      const shardRows = (ch: Ch) => count(ch, where);
      await waitFor(
        'the restarted replica to catch up',
        async () => (await shardRows(victimCh)) === (await shardRows(mate.ch)) && (await shardRows(mate.ch)) > 0,
        60_000,
      );
      await expectRollupsOf({ ch: cluster }, events, t.venueIds);
    } finally {
      await up({ quiet: true, clickhouseCluster: true });
      await h3.close();
    }
  }, 180_000);

  it('reuses the running cluster on another up, and reports it in the stack status', async () => {
    const { services } = (await up({ quiet: true, clickhouseCluster: true })) as { services: Array<{ name: string; status: string }> };
    const mine = ['zookeeper', 'ch-s1r1', 'ch-s1r2', 'ch-s2r1', 'ch-s2r2'];
    for (const n of mine) expect(services.find((x) => x.name === n)?.status, n).toBe('reused');
    const s = (await status()) as Array<{ name: string; status: string }>;
    for (const n of mine) expect(s.find((x) => x.name === n)?.status, n).toBe('running');
    // Folders private, and the files holding the password (users.xml; config.xml's cluster definition) 0600.
    const dir = path.join(STACK_DIR, 'clickhouse-cluster');
    const mode = (p: string) => (fs.statSync(p).mode & 0o777).toString(8);
    for (const d of [dir, ...mine.map((n) => path.join(dir, n)), ...nodes.map((n) => path.join(dir, n.name, 'data'))])
      expect(mode(d), d).toBe('700');
    for (const n of nodes)
      for (const f of ['config.xml', 'users.xml']) expect(mode(path.join(dir, n.name, f)), `${n.name}/${f}`).toBe('600');
  });
});
