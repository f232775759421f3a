import { describe, expect, it } from 'vitest';
import { MARK_KIND, type Mark } from '../../../clickhouse/queries/derive.js';
import { byVenue, markedSpan } from '../../../pipeline/derive/marks.js';

const mark = (venue: string, kind: number, min: number, max: number, operator = 'op-1'): Mark => ({
  mark_id: `${venue}-${kind}-${min}`,
  operator_id: operator,
  venue_id: venue,
  min_ts: min,
  max_ts: max,
  inserted_at: 0,
  kind,
});

describe("a round's marks, per venue", () => {
  it('span the sightings for the visits and the door flows for the occupancy history, apart', () => {
    const got = byVenue([
      mark('a', MARK_KIND.sightings, 100, 200),
      mark('a', MARK_KIND.flows, 500, 600),
      mark('a', MARK_KIND.sightings, 50, 120),
      mark('b', MARK_KIND.flows, 10, 20),
    ]);
    expect(got).toEqual([
      { operator_id: 'op-1', venue_id: 'a', ranges: { visits: [50_000, 200_999], occupancy: [500_000, 600_999] } },
      { operator_id: 'op-1', venue_id: 'b', ranges: { occupancy: [10_000, 20_999] } },
    ]);
  });

  it('count a mark of unknown kind (before migration 0012, the rollup repair) for both', () => {
    const got = byVenue([mark('a', MARK_KIND.both, 100, 200), mark('a', MARK_KIND.sightings, 300, 400)]);
    expect(got[0]!.ranges).toEqual({ visits: [100_000, 400_999], occupancy: [100_000, 200_999] });
  });

  it("keep another operator's marks for the same venue id apart (the job then skips them)", () => {
    const got = byVenue([mark('a', MARK_KIND.flows, 1, 2, 'op-1'), mark('a', MARK_KIND.flows, 3, 4, 'op-2')]);
    expect(got.map((m) => m.operator_id)).toEqual(['op-1', 'op-2']);
  });
});

describe("the span of a venue's marked ranges", () => {
  it('covers both kinds, or the one there is', () => {
    expect(markedSpan({ visits: [5, 9], occupancy: [1, 7] })).toEqual([1, 9]);
    expect(markedSpan({ occupancy: [3, 4] })).toEqual([3, 4]);
  });
});
