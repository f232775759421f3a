import { describe, expect, it } from 'vitest';
import type { DerivedVisit } from '../../../clickhouse/queries/derive-visits.js';
import { MAX_UNQUALIFIED_SPAN_MS, VISIT_GAP_MS } from '../../../domain/analytics/visit-rule.js';
import { CHECKPOINT_MARGIN_MS, visitPlan, visitWindow } from '../../../pipeline/derive/visits.js';

const MIN = 60_000;
const p = { start: 0, end: 24 * 60 * MIN, day: '2026-11-20' };
const visit = (start: number, end: number): DerivedVisit => ({
  zone_id: '',
  device: 'd',
  start_ms: start * MIN,
  end_ms: end * MIN,
  closes_ms: end * MIN + VISIT_GAP_MS,
  sightings: 5,
  randomized_mac: 0,
});

describe('the window a visits recomputation reads', () => {
  const seen = 600 * MIN;
  it('starts a gap before a short unstored run could have begun, with no stored visit to extend', () => {
    const readFrom = seen - VISIT_GAP_MS - MAX_UNQUALIFIED_SPAN_MS - VISIT_GAP_MS;
    expect(visitWindow([visit(100, 200)], seen, p)).toEqual({ readFrom, exactFrom: readFrom + VISIT_GAP_MS });
  });

  it('reaches back to the start of a stored visit the new sightings can extend, and no further', () => {
    // 586 ends within a gap of 600: extendable; 200 does not.
    expect(visitWindow([visit(100, 200), visit(300, 586)], seen, p)).toEqual({
      readFrom: 300 * MIN - VISIT_GAP_MS,
      exactFrom: 300 * MIN,
    });
    expect(visitWindow([visit(300, 584)], seen, p).readFrom).toBe(seen - 2 * VISIT_GAP_MS - MAX_UNQUALIFIED_SPAN_MS);
  });

  it('is the whole period when it would begin before it', () => {
    expect(visitWindow([visit(10, 590)], seen, p)).toEqual({ readFrom: 0, exactFrom: 0 });
    expect(visitWindow([], 20 * MIN, p)).toEqual({ readFrom: 0, exactFrom: 0 });
  });
});

describe('how a visits recomputation reads', () => {
  const checkpoint = (cpMin: number, version = 7, newest = version) => ({ cpMs: cpMin * MIN, version, newest });
  it('continues from the checkpoint when every new sighting is at or after it, moving it to a margin before the earliest', () => {
    expect(visitPlan(checkpoint(300), 400 * MIN + 500, p)).toEqual({
      mode: 'continue',
      from: 300 * MIN,
      nextCp: 400 * MIN - CHECKPOINT_MARGIN_MS,
    });
    // Never backwards: a round whose earliest sighting is within the margin keeps it.
    expect(visitPlan(checkpoint(300), 300 * MIN, p)).toEqual({ mode: 'continue', from: 300 * MIN, nextCp: 300 * MIN });
  });

  it('reads the window, keeping the checkpoint, for a sighting from before it', () => {
    expect(visitPlan(checkpoint(300), 300 * MIN - 1, p)).toEqual({ mode: 'window', cp: 300 * MIN });
  });

  it("starts at the period's start without a checkpoint, or when a state is newer than it (an interrupted round)", () => {
    expect(visitPlan({ cpMs: 0, version: 0, newest: 0 }, 400 * MIN, p)).toMatchObject({ mode: 'continue', from: 0 });
    expect(visitPlan(checkpoint(300, 7, 9), 100 * MIN, p)).toMatchObject({ mode: 'continue', from: 0 });
  });
});
