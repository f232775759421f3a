import { describe, expect, it } from 'vitest';
import { MARK_KIND, type Mark } from '../../../clickhouse/queries/derive.js';
import { byVenue, carriedMarks, markedSpan } from '../../../pipeline/derive/marks.js';
import { runFairly } from '../../../pipeline/derive/schedule.js';

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

describe('the periods a round carries over', () => {
  const HOUR = 3_600_000;
  const period = (start: number) => ({ start, end: start + 24 * HOUR, day: `d${start}` });
  it('are marked again by kind, cut to the span of the periods left, and come back as the same ranges', () => {
    const [a] = byVenue([mark('a', MARK_KIND.sightings, 3_600, 500_000), mark('a', MARK_KIND.flows, 90_000, 100_000)]);
    const left = [period(0), period(24 * HOUR)].map((p) => ({ marks: a!, period: p }));
    const carried = carriedMarks(left);
    expect(carried).toEqual([
      { operator_id: 'op-1', venue_id: 'a', min_ts: 3_600, max_ts: 2 * 86_400 - 1, kind: MARK_KIND.sightings },
      { operator_id: 'op-1', venue_id: 'a', min_ts: 90_000, max_ts: 100_000, kind: MARK_KIND.flows },
    ]);
    // Read back next round, they cover exactly the two periods' share of the original ranges.
    const back = byVenue(carried.map((c, i) => ({ ...c, mark_id: `c${i}`, inserted_at: 0 })));
    expect(back[0]!.ranges).toEqual({ visits: [3_600_000, 2 * 86_400_000 - 1], occupancy: [90_000_000, 100_000_999] });
  });

  it('leave out a kind whose range does not reach the periods left', () => {
    const [a] = byVenue([mark('a', MARK_KIND.sightings, 0, 10), mark('a', MARK_KIND.flows, 200_000, 200_010)]);
    expect(carriedMarks([{ marks: a!, period: period(0) }]).map((c) => c.kind)).toEqual([MARK_KIND.sightings]);
  });
});

describe("a round's time, shared between operators", () => {
  /** Items are their cost in ms on a clock that moves only while they run. */
  async function schedule(queues: Record<string, number[]>, budgetMs: number, stopAfter = Infinity) {
    let t = 0;
    const ran: string[] = [];
    const left = await runFairly(
      new Map(Object.entries(queues).map(([op, costs]) => [op, costs.map((c, i) => ({ op, i, c }))])),
      budgetMs,
      async (item) => {
        ran.push(`${item.op}${item.i}`);
        t += item.c;
      },
      { clock: () => t, stopped: () => ran.length >= stopAfter },
    );
    return { ran, left: left.map((x) => `${x.op}${x.i}`) };
  }

  it('goes to the operator that used the least time, so expensive periods earn no more of it', async () => {
    const got = await schedule({ a: [100, 100, 100, 100], b: [10, 10, 10, 10, 10] }, 180);
    expect(got.ran).toEqual(['a0', 'b0', 'b1', 'b2', 'b3', 'b4', 'a1']);
    expect(got.left).toEqual(['a2', 'a3']);
  });

  it("still runs every operator's first period once the budget is spent", async () => {
    const got = await schedule({ big: [1_000, 1_000], small: [5, 5], other: [5] }, 0);
    expect(got.ran.sort()).toEqual(['big0', 'other0', 'small0']);
    expect(got.left.sort()).toEqual(['big1', 'small1']);
  });

  it("starts nothing more once the process is stopping, not even an operator's first period", async () => {
    const got = await schedule({ a: [1, 2], b: [3], c: [4] }, Infinity, 1);
    expect(got.ran).toEqual(['a0']);
    expect(got.left.sort()).toEqual(['a1', 'b0', 'c0']);
  });

  it('runs everything when the budget allows', async () => {
    expect(await schedule({ a: [1, 2, 3], b: [4] }, Infinity)).toEqual({ ran: ['a0', 'b0', 'a1', 'a2'], left: [] });
  });
});
