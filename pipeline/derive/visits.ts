import type { Ch } from '../../clickhouse/client.js';
import {
  sightingKeys,
  storedVisits,
  visitCheckpoint,
  visitStates,
  type DerivedVisit,
  type VisitScope,
  type VisitState,
  type VisitStateRow,
} from '../../clickhouse/queries/derive-visits.js';
import { MAX_UNQUALIFIED_SPAN_MS, VISIT_GAP_MS } from '../../domain/analytics/visit-rule.js';
import { closesAt, foldRuns, qualifies, type VisitRun } from '../../domain/analytics/visit-runs.js';
import { changes, nextVersion } from './changes.js';
import type { Period } from './periods.js';
import type { VenueDeriveContext } from './context.js';
import type { RoundWrites } from './writes.js';

const visitKey = (v: DerivedVisit) => `${v.zone_id}|${v.device}|${v.start_ms}`;
const sameVisit = (a: DerivedVisit, b: DerivedVisit) =>
  a.end_ms === b.end_ms && a.closes_ms === b.closes_ms && a.sightings === b.sightings && a.randomized_mac === b.randomized_mac;

const scopeKey = (x: { zone_id: string; device: string }) => `${x.zone_id}|${x.device}`;
const runOf = (s: VisitState): VisitRun => ({ start: s.start_ms, last: s.last_ms, left: s.departed === 1, sightings: s.sightings });
const sameRun = (a: VisitRun, b: VisitRun) => a.start === b.start && a.last === b.last && a.left === b.left && a.sightings === b.sightings;

/**
 * How far before the earliest new sighting of a round the next checkpoint is put: a later round
 * whose new sightings reach further back than the checkpoint (a connector's backfill) recomputes
 * from the visits' window instead. A minute covers the lateness of batching connectors (Meraki
 * posts every minute) and of the pipeline, at the cost of reading a minute more each round.
 */
export const CHECKPOINT_MARGIN_MS = 60_000;

/**
 * Where the sightings a recomputation without the checkpoint reads begin, and from which start on
 * its visits are exact (docs/processors.md#derived-from-the-raw-table). New sightings from
 * `seenFrom` on can change only a visit whose last sighting is at most VISIT_GAP_MS before them: a
 * stored one (its start is known), or a run too short to be stored (it began at most
 * MAX_UNQUALIFIED_SPAN_MS before its end). Reading from one gap before the earliest such start, a
 * visit that starts a gap or more after the read's start is known whole: nothing in the gap before
 * it was missed.
 */
export function visitWindow(stored: readonly DerivedVisit[], seenFrom: number, p: Period): { readFrom: number; exactFrom: number } {
  let earliest = seenFrom - VISIT_GAP_MS - MAX_UNQUALIFIED_SPAN_MS;
  for (const s of stored) if (s.end_ms >= seenFrom - VISIT_GAP_MS && s.start_ms < earliest) earliest = s.start_ms;
  const readFrom = earliest - VISIT_GAP_MS;
  return readFrom <= p.start ? { readFrom: p.start, exactFrom: p.start } : { readFrom, exactFrom: readFrom + VISIT_GAP_MS };
}

/**
 * How a recomputation reads: from the period's checkpoint, continuing the runs stored as of it,
 * when every new sighting is at or after it (`from` = the checkpoint, a whole second); else from the
 * visits' window, fresh, exact from `exactFrom` on, keeping the checkpoint. A period without a
 * valid checkpoint (none yet, or states newer than it: an interrupted round) reads from its start.
 */
export function visitPlan(
  checkpoint: { cpMs: number; version: number; newest: number },
  seenFrom: number,
  p: Period,
): { mode: 'continue'; from: number; nextCp: number } | { mode: 'window'; cp: number } {
  const valid = checkpoint.version > 0 && checkpoint.newest === checkpoint.version;
  const cp = valid ? checkpoint.cpMs : p.start;
  if (seenFrom < cp) return { mode: 'window', cp };
  return { mode: 'continue', from: cp, nextCp: Math.max(cp, Math.floor((seenFrom - CHECKPOINT_MARGIN_MS) / 1000) * 1000) };
}

/**
 * A period's visits from the raw sightings, given to `out` where they differ from what is stored. Only
 * the devices seen in [seenFrom, seenTo] (the marked range) are recomputed: a device's visits
 * depend on its own sightings alone, and the others' did not change. A round on time continues
 * each run from the period's checkpoint and reads only the sightings since (visitPlan): a device
 * present all day costs a round its last minute, not its day. A round with sightings from before
 * the checkpoint reads from the visits' window (visitWindow) and keeps the checkpoint.
 */
export async function recomputeVisits(
  ch: Ch,
  v: VenueDeriveContext,
  p: Period,
  seenFrom: number,
  seenTo: number,
  out: RoundWrites,
): Promise<number> {
  const venue = { operatorId: v.operatorId, venueId: v.venueId, day: p.day };
  const seen = { ...venue, fromMs: p.start, toMs: p.end, seenFromMs: Math.max(seenFrom, p.start), seenToMs: Math.min(seenTo, p.end - 1) };
  const plan = visitPlan(await visitCheckpoint(ch, venue), seen.seenFromMs, p);
  const version = nextVersion();
  const stateRow = (k: { zone_id: string; device: string }, r: VisitRun, mac: number, cp: number): VisitStateRow => ({
    operator_id: v.operatorId,
    venue_id: v.venueId,
    day: p.day,
    zone_id: k.zone_id,
    device: k.device,
    cp_ms: cp,
    start_ms: r.start,
    last_ms: r.last,
    departed: r.left ? 1 : 0,
    sightings: r.sightings,
    randomized_mac: mac,
    retention_days: v.retentionDays,
    version,
  });
  const { computed, stored, states, cp } =
    plan.mode === 'continue' ? await continued(ch, seen, p, plan, stateRow) : await fromWindow(ch, seen, p, plan.cp, stateRow);
  // The checkpoint row last: it lands only after the states it covers.
  if (cp !== undefined) states.push(stateRow({ zone_id: '', device: '' }, { start: 0, last: 0, left: false, sightings: 0 }, 0, cp));

  const { upserts, removed } = changes(computed, stored, visitKey, sameVisit);
  if (upserts.length + removed.length > 0) {
    const row = (x: DerivedVisit, live: number) => ({
      operator_id: v.operatorId,
      venue_id: v.venueId,
      day: p.day,
      ...x,
      retention_days: v.retentionDays,
      live,
      version,
    });
    out.addVisits([...upserts.map((x) => row(x, 1)), ...removed.map((x) => row(x, 0))]);
  }
  // Written after the visits (RoundWrites): a round interrupted in between is redone from the same checkpoint.
  out.addStates(states);
  return upserts.length + removed.length;
}

type Seen = VisitScope & { day: string };
type StateRowOf = (k: { zone_id: string; device: string }, r: VisitRun, mac: number, cp: number) => VisitStateRow;
/** What a recomputation compares and writes; `cp` is the checkpoint to write, when it is to be written. */
interface Recomputed {
  computed: DerivedVisit[];
  stored: DerivedVisit[];
  states: VisitStateRow[];
  cp?: number;
}

/**
 * From the checkpoint: every device with a sighting since, the seen ones' visits and the others'
 * runs moved to the next checkpoint, each run continued from its state. From the period's start
 * (no valid checkpoint) nothing is continued: a state there may be an interrupted round's.
 */
async function continued(ch: Ch, seen: Seen, p: Period, plan: { from: number; nextCp: number }, stateRow: StateRowOf): Promise<Recomputed> {
  const scope = { ...seen, seenFromMs: plan.from, seenToMs: p.end - 1 };
  const [prior, keys, storedNow] = await Promise.all([
    plan.from === p.start ? Promise.resolve([]) : visitStates(ch, scope),
    sightingKeys(ch, { ...scope, fromMs: plan.from, baseMs: p.start }),
    storedVisits(ch, scope),
  ]);
  const prefixes = new Map(prior.map((s) => [scopeKey(s), s]));
  const computed: DerivedVisit[] = [];
  const states: VisitStateRow[] = [];
  // Per scope and device, the start from which its stored visits are compared.
  const bound = new Map<string, number>();
  for (const k of keys) {
    const before = prefixes.get(scopeKey(k));
    prefixes.delete(scopeKey(k));
    const prefix = before && runOf(before);
    const { runs, atCut } = foldRuns(prefix, k.keys, p.start, plan.nextCp);
    const mac = before ? before.randomized_mac : k.randomized_mac;
    computed.push(...runs.filter(qualifies).map((r) => visitOf(k, r, mac, p)));
    bound.set(scopeKey(k), prefix ? prefix.start : plan.from);
    if (atCut && !(prefix && sameRun(prefix, atCut))) states.push(stateRow(k, atCut, mac, plan.nextCp));
  }
  // A scope with a run before the checkpoint and no sighting since: its visits are as stored.
  for (const [key, s] of prefixes) {
    bound.set(key, s.start_ms);
    const r = runOf(s);
    if (qualifies(r)) computed.push(visitOf(s, r, s.randomized_mac, p));
  }
  const stored = storedNow.filter((s) => s.start_ms >= (bound.get(scopeKey(s)) ?? plan.from));
  const moved = states.length > 0 || plan.nextCp !== plan.from;
  return { computed, stored, states, cp: moved ? plan.nextCp : undefined };
}

/**
 * From the visits' window (visitWindow), fresh, for a round with sightings from before the
 * checkpoint `cp`, which it keeps: it rewrites the runs at it that it saw whole and that changed;
 * one that began before the window has no new sighting.
 */
async function fromWindow(ch: Ch, seen: Seen, p: Period, cp: number, stateRow: StateRowOf): Promise<Recomputed> {
  const storedNow = await storedVisits(ch, seen);
  const { readFrom, exactFrom } = visitWindow(storedNow, seen.seenFromMs, p);
  const [prior, keys] = await Promise.all([visitStates(ch, seen), sightingKeys(ch, { ...seen, fromMs: readFrom, baseMs: p.start })]);
  const before = new Map(prior.map((s) => [scopeKey(s), runOf(s)]));
  const computed: DerivedVisit[] = [];
  const states: VisitStateRow[] = [];
  for (const k of keys) {
    const { runs, atCut } = foldRuns(undefined, k.keys, p.start, cp);
    computed.push(...runs.filter((r) => r.start >= exactFrom && qualifies(r)).map((r) => visitOf(k, r, k.randomized_mac, p)));
    const was = before.get(scopeKey(k));
    if (atCut && atCut.start >= exactFrom && !(was && sameRun(was, atCut))) states.push(stateRow(k, atCut, k.randomized_mac, cp));
  }
  const stored = storedNow.filter((s) => s.start_ms >= exactFrom);
  return { computed, stored, states, cp: states.length > 0 ? cp : undefined };
}

const visitOf = (k: { zone_id: string; device: string }, r: VisitRun, mac: number, p: Period): DerivedVisit => ({
  zone_id: k.zone_id,
  device: k.device,
  start_ms: r.start,
  end_ms: r.last,
  closes_ms: closesAt(r, p.end),
  sightings: r.sightings,
  randomized_mac: mac,
});
