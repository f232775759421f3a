/**
 * The occupancy rule (docs/processors.md#occupancy), one place for the live processor and the
 * history derived from the raw table, so both give the same figure for the same events.
 *
 * Within one reset period a scope's count starts at 0 and takes its flows in a total order that
 * depends only on the events, never on how they were delivered: event time, then counts before
 * flows, then entries before exits (larger amounts first), then event id. A flow moves the count
 * and the count never goes below 0 (what an exit would take below 0 is `clamped`); a count sets it.
 */

export interface Flow {
  /** Event time, epoch ms. */
  ts: number;
  /** The event's id (ties at the same instant and amount are broken by it). */
  id: string;
  /** A connector's count (sets the figure) rather than a flow (moves it). */
  absolute: boolean;
  /** People in (+) or out (−) for a flow; the count for an absolute event. */
  amount: number;
}

/**
 * What an event does to occupancy: an `occupancy` metric sets the count (a connector's count);
 * else an entry adds its `entries` (default 1) and an exit takes its `exits` (default 1). Other
 * events do nothing.
 */
export function flowOf(
  type: string,
  m: { occupancy?: number | null; entries?: number | null; exits?: number | null },
): { absolute: boolean; amount: number } | undefined {
  if (m.occupancy !== undefined && m.occupancy !== null) return { absolute: true, amount: Math.max(0, Math.round(m.occupancy)) };
  if (type === 'entry') return { absolute: false, amount: Math.round(m.entries ?? 1) };
  if (type === 'exit') return { absolute: false, amount: -Math.round(m.exits ?? 1) };
  return undefined;
}

export function compareFlows(a: Flow, b: Flow): number {
  if (a.ts !== b.ts) return a.ts - b.ts;
  if (a.absolute !== b.absolute) return a.absolute ? -1 : 1;
  if (a.amount !== b.amount) return b.amount - a.amount;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/**
 * What a run of flows does to any figure x, as x → max(x + add, floor) (a count is add −∞):
 * flows and the clamp compose into that form, so a long run folds into two numbers and a late flow
 * costs the re-fold of its own run, not a replay of everything after it.
 */
export interface FlowEffect {
  add: number;
  floor: number;
}

export const applyEffect = (x: number, e: FlowEffect): number => Math.max(x + e.add, e.floor);

/** The figure after each instant of a period's flows (sorted by `compareFlows`), starting from `start` (0 at the period's start). */
export function periodSeries(flows: readonly Flow[], start = 0): Array<{ ts: number; value: number }> {
  const points: Array<{ ts: number; value: number }> = [];
  let value = start;
  for (const f of flows) {
    value = f.absolute ? f.amount : Math.max(0, value + f.amount);
    const last = points[points.length - 1];
    if (last && last.ts === f.ts) last.value = value;
    else points.push({ ts: f.ts, value });
  }
  return points;
}
