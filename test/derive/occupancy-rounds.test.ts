import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCh, type Ch } from '../../clickhouse/client.js';
import { storedOccupancy, storedZoneOccupancy } from '../../clickhouse/queries/derive.js';
import { insertEvents } from '../../clickhouse/queries/events.js';
import { periodAt } from '../../pipeline/derive/periods.js';
import type { VenueDeriveContext } from '../../pipeline/derive/context.js';
import { recomputeOccupancy } from '../../pipeline/derive/recompute.js';
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

describe('the occupancy history recomputed round by round', () => {
  it('equals the whole period recomputed at once, for the venue and its area zone', async () => {
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
    // Every 2 minutes from 05:00 to 11:00: entries outnumber exits in the morning, then the reverse; a tenth at the area zone.
    const flows = Array.from({ length: 180 }, (_, i) => ({
      ts: p.start + 3_600_000 + i * 120_000 + 300,
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
    const pieceMs = 20 * 60_000;
    for (let from = p.start + 3_600_000; from < p.start + 8 * 3_600_000; from += pieceMs) {
      const piece = rowsOf(rounds, from, from + pieceMs);
      if (piece.length === 0) continue;
      await insertEvents(ch, piece);
      await recomputeOccupancy(ch, rounds, p, from);
    }
    await insertEvents(ch, rowsOf(atOnce, p.start, p.end));
    await recomputeOccupancy(ch, atOnce, p);

    const history = async (v: VenueDeriveContext) => {
      const range = { operatorId: v.operatorId, venueId: v.venueId, fromMs: p.start, toMs: p.end };
      const byAt = (a: { at: number }, b: { at: number }) => a.at - b.at;
      return { venue: (await storedOccupancy(ch, range)).sort(byAt), zone: (await storedZoneOccupancy(ch, range)).sort(byAt) };
    };
    const whole = await history(atOnce);
    expect(whole.venue.length).toBeGreaterThan(150);
    expect(whole.zone.length).toBeGreaterThan(10);
    expect(Math.max(...whole.venue.map((x) => x.value))).toBeGreaterThan(20);
    expect(await history(rounds)).toEqual(whole);
  });
});
