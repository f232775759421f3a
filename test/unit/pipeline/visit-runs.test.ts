import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { VISIT_GAP_MS } from '../../../domain/analytics/visit-rule.js';
import { closesAt, foldRuns, qualifies, sightingKey, type VisitRun } from '../../../domain/analytics/visit-runs.js';

const MIN = 60_000;
const base = 1_000 * MIN;
const key = (min: number, left = false) => sightingKey(min * MIN, left);
const run = (start: number, last: number, sightings: number, left = false): VisitRun => ({
  start: base + start * MIN,
  last: base + last * MIN,
  left,
  sightings,
});

describe('runs of sightings', () => {
  it('end at a gap over 15 minutes or at a departure; the departure belongs to its run', () => {
    const { runs } = foldRuns(undefined, [key(0), key(15), key(31), key(32, true), key(33)], base, base);
    expect(runs).toEqual([run(0, 15, 2), run(31, 32, 2, true), run(33, 33, 1)]);
    expect(runs.map(qualifies)).toEqual([true, false, false]);
    expect(closesAt(runs[0]!, base + 20 * MIN)).toBe(base + 20 * MIN);
    expect(closesAt(runs[0]!, base + 60 * MIN)).toBe(base + 15 * MIN + VISIT_GAP_MS);
    expect(closesAt(runs[1]!, base + 60 * MIN)).toBe(base + 32 * MIN);
  });

  it('continue the run stored at a checkpoint, and give the run as of the next one', () => {
    const prefix = run(0, 20, 5);
    const { runs, atCut } = foldRuns(prefix, [key(30), key(40), key(70)], base, base + 40 * MIN);
    expect(runs).toEqual([run(0, 40, 7), run(70, 70, 1)]);
    expect(atCut).toEqual(run(0, 30, 6));
    expect(prefix).toEqual(run(0, 20, 5));
    // Nothing before the cut: the run as stored; nothing at all: none.
    expect(foldRuns(prefix, [key(50)], base, base + 45 * MIN).atCut).toEqual(prefix);
    expect(foldRuns(undefined, [key(50)], base, base + 45 * MIN).atCut).toBeUndefined();
  });

  it('are the same read at once or continued from any checkpoint', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 600 }), fc.boolean()), { maxLength: 40 }),
        fc.integer({ min: 0, max: 600 }),
        (raw, cutMin) => {
          const keys = raw.map(([m, left]) => key(m, left)).sort((a, b) => a - b);
          const whole = foldRuns(undefined, keys, base, base);
          const cut = base + cutMin * MIN;
          const first = foldRuns(
            undefined,
            keys.filter((k) => base + Math.floor(k / 2) < cut),
            base,
            cut,
          );
          const rest = foldRuns(
            first.atCut,
            keys.filter((k) => base + Math.floor(k / 2) >= cut),
            base,
            cut,
          );
          const done = first.runs.slice(0, first.atCut ? -1 : undefined);
          expect([...done, ...rest.runs]).toEqual(whole.runs);
        },
      ),
    );
  });
});
