import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCh, type Ch } from '../../clickhouse/client.js';
import { storedOccupancy, storedZoneOccupancy } from '../../clickhouse/queries/derive.js';
import { insertEvents } from '../../clickhouse/queries/events.js';
import { periodAt } from '../../pipeline/derive/periods.js';
import type { VenueDeriveContext } from '../../pipeline/derive/context.js';
import { recomputeOccupancy } from '../../pipeline/derive/recompute.js';
import { RoundWrites } from '../../pipeline/derive/writes.js';
import { toRow } from '../../pipeline/sink/rows.js';
import { testConfig } from '../support/env.js';
import { event } from '../unit/support/events.js';

/*
 * A round recomputes a period's occupancy from the first second its marks touch, continuing from
 * the last stored figures (pipeline/derive/recompute.ts). Door and area events stored piece by
 * piece, with a round after each piece, must end with the history of the same events recomputed
 * at once, for the venue and for the zone.
 */
let ch: Ch;
beforeAll(() => {
  ch = createCh(testConfig());
});
afterAll(async () => {
  await ch.close();
});

/**
 * Stores door and area flows (entries outnumber exits for the first 100, then the reverse; every
 * tenth at the area zone) piece by piece with a round after each, and the same flows at once with
 * one recomputation of the whole period, each for its own venue; returns both histories.
 */
async function roundByRound(times: number[], pieceMs: number) {
  const area = randomUUID();
  const venue = (): VenueDeriveContext => ({
    operatorId: randomUUID(),
    venueId: randomUUID(),
    timezone: 'UTC',
    resetHour: 4,
    retentionDays: 90,
    zones: new Map([[area, 'area']]),
  });
  const [rounds, atOnce] = [venue(), venue()];
  const p = periodAt(Date.UTC(2026, 10, 17, 12), 4, 'UTC');
  const flows = times.map((ts, i) => ({
    ts: p.start + ts,
    type: (i < 100 ? i % 3 !== 2 : i % 3 === 2) ? ('entry' as const) : ('exit' as const),
    zoneId: i % 10 === 0 ? area : null,
    count: 1 + (i % 4),
  }));
  let offset = 0;
  const rowsOf = (v: VenueDeriveContext, from: number, to: number) =>
    flows
      .filter((f) => f.ts >= from && f.ts < to)
      .map((f) =>
        toRow(
          event({
            operatorId: v.operatorId,
            venueId: v.venueId,
            ts: f.ts,
            type: f.type,
            zoneId: f.zoneId,
            connectorType: 'density',
            metrics: f.type === 'entry' ? { entries: f.count } : { exits: f.count },
          }),
          { topic: 'occupancy-rounds', partition: 0, offset: String(offset++), index: 0 },
          { timezone: 'UTC', retentionDays: 90 },
        ),
      );
  for (let from = p.start; from < p.end; from += pieceMs) {
    const piece = rowsOf(rounds, from, from + pieceMs);
    if (piece.length === 0) continue;
    await insertEvents(ch, piece);
    // The round's marks start at the piece's first flow, not at a whole look-back before it.
    const out = new RoundWrites(ch);
    await recomputeOccupancy(ch, rounds, p, out, Math.min(...piece.map((r) => r.ts * 1000 + r.ts_ms)));
    await out.flush();
  }
  await insertEvents(ch, rowsOf(atOnce, p.start, p.end));
  const whole = new RoundWrites(ch);
  await recomputeOccupancy(ch, atOnce, p, whole);
  await whole.flush();

  const history = async (v: VenueDeriveContext) => {
    const range = { operatorId: v.operatorId, venueId: v.venueId, fromMs: p.start, toMs: p.end };
    const byAt = (a: { at: number }, b: { at: number }) => a.at - b.at;
    return { venue: (await storedOccupancy(ch, range)).sort(byAt), zone: (await storedZoneOccupancy(ch, range)).sort(byAt) };
  };
  return { rounds: await history(rounds), whole: await history(atOnce) };
}

const HOUR = 3_600_000;

describe('the occupancy history recomputed round by round', () => {
  it('equals the whole period recomputed at once, for the venue and its area zone', async () => {
    // Every 2 minutes from 05:00 to 11:00, in 20-minute pieces: the last figures are found in the hour before.
    const { rounds, whole } = await roundByRound(
      Array.from({ length: 180 }, (_, i) => HOUR + i * 120_000 + 300),
      20 * 60_000,
    );
    expect(whole.venue.length).toBeGreaterThan(150);
    expect(whole.zone.length).toBeGreaterThan(10);
    expect(Math.max(...whole.venue.map((x) => x.value))).toBeGreaterThan(20);
    expect(rounds).toEqual(whole);
  });

  it('continues from the minute before on a busy venue, and from the hour before for a quieter zone', async () => {
    // Every 7 seconds for half an hour, in 1-minute pieces: the venue's last figure is always in the
    // minute before, the area zone's (every 70 s) not always.
    const { rounds, whole } = await roundByRound(
      Array.from({ length: 260 }, (_, i) => HOUR + i * 7_000 + 300),
      60_000,
    );
    expect(whole.zone.length).toBeGreaterThan(20);
    expect(rounds).toEqual(whole);
  });

  it('recomputes the whole period when a figure is older than the hour before', async () => {
    // Two bursts two hours apart: the second continues from figures the look-backs cannot reach.
    const burst = (at: number) => Array.from({ length: 60 }, (_, i) => at + i * 10_000 + 300);
    const { rounds, whole } = await roundByRound([...burst(HOUR), ...burst(3 * HOUR)], 5 * 60_000);
    expect(whole.venue.length).toBeGreaterThan(100);
    expect(rounds).toEqual(whole);
  });
});
