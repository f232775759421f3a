import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createCh } from '../../clickhouse/client.js';
import { CLICKHOUSE_MIGRATIONS, migrateClickhouse, serverExecutor } from '../../clickhouse/migrate.js';
import { insertEvents } from '../../clickhouse/queries/events.js';
import { venueDwell } from '../../domain/analytics/dwell.js';
import { visitorScoring } from '../../domain/analytics/scoring.js';
import { getTelemetry } from '../../domain/telemetry/telemetry.js';
import { createLogger } from '../../lib/logger.js';
import { startDeriveJob } from '../../pipeline/derive/job.js';
import { toRow } from '../../pipeline/sink/rows.js';
import { createDb } from '../../postgres/client.js';
import { testConfig } from '../support/env.js';
import { deviceId, event, newVenue } from '../processors/harness.js';
import { DAY, HOUR, MINUTE, oracleDwell, oracleOccupancy, oracleScoring, oracleVisits, type DoorEvent, type Sighting } from './oracle.js';

/**
 * An existing deployment: events stored under migration 0009 (visits and occupancy history then
 * came from the stream processors). After migration 0010 the derive job's first round rebuilds
 * visits, loyalty and the occupancy history of every stored venue period from the raw table.
 */
const dir = mkdtempSync(join(tmpdir(), 'ch-migrations-'));
for (const file of readdirSync(CLICKHOUSE_MIGRATIONS).filter((f) => f.endsWith('.sql') && Number.parseInt(f, 10) <= 9))
  copyFileSync(join(CLICKHOUSE_MIGRATIONS, file), join(dir, file));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the derive job on a database migrated from 0009', () => {
  it('rebuilds the derived figures of the stored events on its first round', async () => {
    const cfg = testConfig();
    const database = `${cfg.CLICKHOUSE_DATABASE}_upgrade_${Date.now()}`;
    const admin = createCh(cfg, null);
    const engine = serverExecutor(admin);
    const ch = createCh(cfg, database);
    const db = createDb(cfg, 2);
    const job = startDeriveJob({ ch, db, log: createLogger('derive-upgrade', cfg.LOG_LEVEL), intervalMs: 3_600_000 });
    try {
      await migrateClickhouse(engine, database, dir);
      const v = await newVenue(db, { timezone: 'America/New_York', resetHour: 5, zones: [{ slug: 'door', type: 'entrance' }] });
      const now = Date.now();
      const start = Math.floor((now - 3 * DAY) / HOUR) * HOUR;
      const sightings: Sighting[] = [];
      const doors: DoorEvent[] = [];
      const rows = [];
      for (let i = 0; i < 120; i++) {
        const ts = start + i * 17 * MINUTE;
        const device = deviceId(`upgrade-${i % 4}`);
        sightings.push({ ts, device, zone: null, left: false }, { ts: ts + 3 * MINUTE, device, zone: null, left: false });
        rows.push(event({ ...v, ts, type: 'device_seen', device }), event({ ...v, ts: ts + 3 * MINUTE, type: 'device_seen', device }));
        const door = event({
          ...v,
          ts: ts + 30_000,
          type: i % 3 ? 'entry' : 'exit',
          zoneId: v.zones.door!,
          metrics: i % 3 ? { entries: 2 } : { exits: 3 },
        });
        doors.push({ ts: door.ts, id: door.id, kind: i % 3 ? 'entry' : 'exit', amount: i % 3 ? 2 : 3, forVenue: true });
        rows.push(door);
      }
      await insertEvents(
        ch,
        rows.map((e, i) =>
          toRow(e, { topic: 'upgrade', partition: 0, offset: String(i), index: 0 }, { timezone: 'America/New_York', retentionDays: 365 }),
        ),
      );

      expect((await migrateClickhouse(engine, database)).applied).toEqual([
        '10_derived_from_raw',
        '11_zone_occupancy',
        '12_derive_mark_kinds',
        '13_visit_state',
      ]);
      const tables = (await engine.query<{ name: string }>(`SELECT name FROM system.tables WHERE database = '${database}'`)).map(
        (t) => t.name,
      );
      expect(tables).not.toContain('visits');
      expect(tables).toContain('derived_visits');
      await job.runOnce();
      expect(job.stats.failures).toBe(0);

      const deps = { db, ch };
      const visits = oracleVisits(sightings, 5, 'America/New_York');
      expect(visits.length).toBeGreaterThan(50);
      const dwell = await venueDwell(deps, v.operatorId, { id: v.venueId, range: '7d' }, now);
      expect(dwell.zones[0]!.buckets.map((b) => b.count)).toEqual(oracleDwell(visits, now, 7).get('')!);
      const scoring = await visitorScoring(deps, v.operatorId, { id: v.venueId, range: '7d' }, now);
      expect(scoring.segments.map((s) => s.count)).toEqual(oracleScoring(visits, now, 7, 5, 'America/New_York'));
      const series = (await getTelemetry(deps, v.operatorId, v.venueId, {
        keys: ['occupancy'],
        startTs: start - HOUR,
        endTs: now,
        interval: HOUR,
        agg: 'MAX',
        fill: 'null',
      })) as Record<string, Array<{ ts: number; value: number | null }>>;
      const points = oracleOccupancy(doors, 5, 'America/New_York');
      const maxByHour = new Map<number, number>();
      for (const p of points.filter((x) => x.ts >= start - HOUR))
        maxByHour.set(Math.floor(p.ts / HOUR) * HOUR, Math.max(maxByHour.get(Math.floor(p.ts / HOUR) * HOUR) ?? 0, p.value));
      expect(series.occupancy!.filter((p) => p.value !== null).map((p) => [p.ts, p.value])).toEqual(
        [...maxByHour].sort((a, b) => a[0] - b[0]),
      );

      // Marks by kind (migration 0012): new sightings recompute the visits only, new door flows the
      // occupancy history only (this database holds this venue's marks alone).
      const later = (e: ReturnType<typeof event>, i: number) =>
        toRow(
          e,
          { topic: 'upgrade', partition: 0, offset: String(10_000 + i), index: 0 },
          { timezone: 'America/New_York', retentionDays: 365 },
        );
      const counts = () => ({ visits: job.stats.visitPeriods, occupancy: job.stats.occupancyPeriods });
      let before = counts();
      await insertEvents(ch, [later(event({ ...v, ts: now - 10 * MINUTE, type: 'device_seen', device: deviceId('upgrade-late') }), 0)]);
      await job.runOnce();
      expect(counts()).toEqual({ visits: before.visits + 1, occupancy: before.occupancy });
      before = counts();
      await insertEvents(ch, [
        later(event({ ...v, ts: now - 9 * MINUTE, type: 'entry', zoneId: v.zones.door!, metrics: { entries: 1 } }), 1),
      ]);
      await job.runOnce();
      expect(counts()).toEqual({ visits: before.visits, occupancy: before.occupancy + 1 });
      expect(job.stats.failures).toBe(0);
    } finally {
      await job.stop();
      await engine.exec(`DROP DATABASE IF EXISTS ${database}`);
      await ch.close();
      await admin.close();
      await db.end();
    }
  }, 120_000);
});
