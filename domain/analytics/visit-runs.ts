import { MIN_DWELL_MS, MIN_SIGHTINGS, VISIT_GAP_MS } from './visit-rule.js';

/**
 * A device's run of sightings in one scope (visit-rule.ts): the sightings of a visit, or of a
 * passer-by when it does not qualify. Times in epoch ms.
 */
export interface VisitRun {
  start: number;
  last: number;
  /** The run's last sighting was a `device_left`: the next one starts a new run. */
  left: boolean;
  sightings: number;
}

/**
 * A sighting as one sortable number: `ms * 2 + left`, so a `device_left` sorts after a sighting of
 * the same instant. Keys are relative to a base (the period's start) to stay small.
 */
export const sightingKey = (ms: number, left: boolean) => ms * 2 + (left ? 1 : 0);

/**
 * The runs of one scope and device from its sorted sighting keys (relative to `base`), continuing
 * `prefix` (its run as of the time the keys start from, if it had sightings before), and the run
 * as of `cut`: the one its sightings before `cut` end with, which a later recomputation from `cut`
 * continues. The first run is `prefix` itself, extended or not.
 */
export function foldRuns(
  prefix: VisitRun | undefined,
  keys: readonly number[],
  base: number,
  cut: number,
): { runs: VisitRun[]; atCut: VisitRun | undefined } {
  const runs: VisitRun[] = [];
  let run = prefix && { ...prefix };
  if (run) runs.push(run);
  let atCut: VisitRun | undefined;
  let cutPassed = false;
  for (const key of keys) {
    const ms = base + Math.floor(key / 2);
    const left = key % 2 === 1;
    if (!cutPassed && ms >= cut) {
      atCut = run && { ...run };
      cutPassed = true;
    }
    if (run && !run.left && ms - run.last <= VISIT_GAP_MS) {
      run.last = ms;
      run.left = left;
      run.sightings++;
    } else {
      run = { start: ms, last: ms, left, sightings: 1 };
      runs.push(run);
    }
  }
  if (!cutPassed) atCut = run && { ...run };
  return { runs, atCut };
}

/** A run counts as a visit with MIN_SIGHTINGS sightings over at least MIN_DWELL_MS. */
export const qualifies = (r: VisitRun) => r.sightings >= MIN_SIGHTINGS && r.last - r.start >= MIN_DWELL_MS;

/** When a visit ends unless seen again: at its `device_left`, else a gap after its last sighting, at most the period's end. */
export const closesAt = (r: VisitRun, periodEnd: number) => (r.left ? r.last : Math.min(r.last + VISIT_GAP_MS, periodEnd));
