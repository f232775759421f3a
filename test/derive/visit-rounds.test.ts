import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCh, type Ch } from '../../clickhouse/client.js';
import { insertVisitStates, storedVisits } from '../../clickhouse/queries/derive-visits.js';
import { insertEvents } from '../../clickhouse/queries/events.js';
import { periodAt } from '../../pipeline/derive/periods.js';
import type { VenueDeriveContext } from '../../pipeline/derive/context.js';
import { recomputeVisits } from '../../pipeline/derive/visits.js';
import { RoundWrites } from '../../pipeline/derive/writes.js';
import { toRow } from '../../pipeline/sink/rows.js';
import { testConfig } from '../support/env.js';
import { event } from '../unit/support/events.js';
import { MINUTE, oracleVisits, shuffled, type Sighting } from './oracle.js';

/*
 * A round recomputes only the visits its new sightings can have changed: continuing each run from
 * the period's checkpoint when they all come after it (visitPlan), else reading from a gap before
 * the earliest visit they can extend (visitWindow, pipeline/derive/visits.ts). Sightings stored piece by
 * piece, on time or shuffled (a late piece lands before, between and inside visits already
 * stored), with a recomputation of each piece's marked range after it, must end with exactly the
 * visits an independent sessionization of all of them gives (test/derive/oracle.ts): every scope,
 * device, start, end, closing time and count of sightings.
 */
let ch: Ch;
beforeAll(() => {
  ch = createCh(testConfig());
});
afterAll(async () => {
  await ch.close();
});

const RESET = 4;
const p = periodAt(Date.UTC(2026, 10, 18, 12), RESET, 'UTC');

const runArb = fc.record({
  device: fc.integer({ min: 0, max: 3 }),
  start: fc.integer({ min: 0, max: 20 * 60 }),
  sightings: fc.integer({ min: 1, max: 30 }),
  step: fc.integer({ min: 1, max: 18 }),
  inHall: fc.boolean(),
  leaves: fc.boolean(),
});

const hall = randomUUID();
const venue = (): VenueDeriveContext => ({
  operatorId: randomUUID(),
  venueId: randomUUID(),
  timezone: 'UTC',
  resetHour: RESET,
  retentionDays: 90,
  zones: new Map([[hall, 'area']]),
});

/**
 * Stores the pieces in order, recomputing each one's marked range after it (`before` runs ahead of
 * each); checks the stored visits against the oracle's and returns those.
 */
async function deliver(v: VenueDeriveContext, pieces: Sighting[][], before?: (piece: number) => Promise<void>) {
  let offset = 0;
  for (const [i, piece] of pieces.entries()) {
    await before?.(i);
    await insertEvents(
      ch,
      piece.map((s) =>
        toRow(
          event({
            operatorId: v.operatorId,
            venueId: v.venueId,
            ts: s.ts,
            type: s.left ? 'device_left' : 'device_seen',
            device: s.device,
            zoneId: s.zone,
          }),
          { topic: 'visit-rounds', partition: 0, offset: String(offset++), index: 0 },
          { timezone: 'UTC', retentionDays: 90 },
        ),
      ),
    );
    const times = piece.map((s) => s.ts);
    const out = new RoundWrites(ch);
    await recomputeVisits(ch, v, p, Math.min(...times), Math.max(...times), out);
    await out.flush();
  }
  const stored = await storedVisits(ch, {
    operatorId: v.operatorId,
    venueId: v.venueId,
    fromMs: p.start,
    toMs: p.end,
    seenFromMs: p.start,
    seenToMs: p.end - 1,
    day: p.day,
  });
  const got = stored.map((s) => [s.zone_id, s.device, s.start_ms, s.end_ms, s.closes_ms, s.sightings]).sort(byAll);
  const want = oracleVisits(pieces.flat(), RESET, 'UTC')
    .map((o) => [o.zone, o.device, o.start, o.end, o.closes, o.sightings])
    .sort(byAll);
  expect(got).toEqual(want);
  return want;
}

/** A sighting `minutes` after 06:00 of the period's day. */
const at = (device: string, minutes: number, more: Partial<Sighting> = {}): Sighting => ({
  ts: p.start + 2 * 60 * MINUTE + Math.round(minutes * MINUTE),
  device,
  zone: null,
  left: false,
  ...more,
});

describe('visits recomputed round by round', () => {
  it('read from far enough back at the edges of the window', async () => {
    const every = (device: string, from: number, to: number, step: number) =>
      Array.from({ length: Math.floor((to - from) / step) + 1 }, (_, i) => at(device, from + i * step));
    // A visit that ended more than a gap before the new sightings: its tail inside the read window
    // is not a visit of its own.
    await deliver(venue(), [every('tail', 0, 120, 5), every('tail', 140, 160, 5)]);
    // A run too short to be stored (1.5 minutes) just over a gap before the new sightings: the visit they make with it starts with it.
    await deliver(venue(), [
      [at('short', 100), at('short', 101.5)],
      [at('short', 116), at('short', 126)],
    ]);
    // A stored visit hours long, continued; and one a late sighting bridges to the one before.
    await deliver(venue(), [every('long', 0, 300, 10), every('long', 310, 330, 10)]);
    await deliver(venue(), [[...every('bridge', 0, 30, 5), ...every('bridge', 60, 90, 5)], [at('bridge', 45)]]);
    // A late device_left that splits a stored visit in two.
    await deliver(venue(), [every('split', 0, 60, 5), [at('split', 32, { left: true })]]);
  });

  it("continue each run from the period's checkpoint, and recompute what a late sighting or an interrupted round changed", async () => {
    const every = (device: string, from: number, to: number, step: number) =>
      Array.from({ length: Math.floor((to - from) / step) + 1 }, (_, i) => at(device, from + i * step));
    // The second piece puts the checkpoint at minute 34 (a margin before its first sighting); the
    // late sighting at 32 changes the run the last piece then continues from it.
    await deliver(venue(), [every('late', 0, 30, 5), every('late', 35, 40, 5), [at('late', 32)], [at('late', 50)]]);
    // A round that stored states but not their checkpoint (interrupted): the next one does not
    // continue them, it recomputes the period from its start.
    const v = venue();
    const device = 'interrupted';
    await deliver(v, [every(device, 0, 30, 5), every(device, 35, 40, 5), [at(device, 50)]], async (i) => {
      if (i !== 2) return;
      const run = { start_ms: at(device, 0).ts, last_ms: at(device, 30).ts, departed: 0, sightings: 999, randomized_mac: 0 };
      const row = { operator_id: v.operatorId, venue_id: v.venueId, day: p.day, zone_id: '', device, cp_ms: at(device, 34).ts, ...run };
      await insertVisitStates(ch, [{ ...row, retention_days: 90, version: Date.now() + 1 }]);
    });
  });

  it('equal the whole period sessionized at once, however the sightings arrive', async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(runArb, { minLength: 1, maxLength: 8 }),
        fc.record({ pieces: fc.integer({ min: 1, max: 8 }), onTime: fc.boolean(), seed: fc.integer() }),
        async (plan, delivery) => {
          const v = venue();
          const sightings: Sighting[] = [];
          for (const r of plan) {
            for (let i = 0; i < r.sightings; i++) {
              const ts = p.start + (r.start + i * r.step) * MINUTE + 3_000;
              if (ts >= p.end) break;
              sightings.push({
                ts,
                device: `dev-${v.venueId}-${r.device}`,
                zone: r.inHall ? hall : null,
                left: r.leaves && i === r.sightings - 1,
              });
            }
          }
          // Two sightings of one device in the same millisecond would tie; keep the first.
          const unique = [...new Map(sightings.map((s) => [`${s.device}|${s.ts}`, s])).values()];
          const order = delivery.onTime ? [...unique].sort((a, b) => a.ts - b.ts) : shuffled(unique, delivery.seed);
          const size = Math.ceil(order.length / delivery.pieces);
          const pieces: Sighting[][] = [];
          for (let i = 0; i < order.length; i += size) pieces.push(order.slice(i, i + size));
          const want = await deliver(v, pieces);
          runs += want.length > 0 ? 1 : 0;
        },
      ),
      { numRuns: 15 },
    );
    expect(runs).toBeGreaterThan(7);
  }, 240_000);
});

const byAll = (a: unknown[], b: unknown[]) => String(a).localeCompare(String(b));
