import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { RecentIds } from '../../../pipeline/sink/recent-ids.js';

const MINUTE = 60_000;
const T0 = Date.UTC(2026, 10, 28, 12, 0, 0);
const id = () => randomUUID().replace(/^(.{14})./, '$18');

/** A memory on a clock the test moves. */
function memory(opts: ConstructorParameters<typeof RecentIds>[0] = {}) {
  const clock = { now: T0 };
  return { clock, recent: new RecentIds(opts, () => clock.now) };
}

describe('the sink memory of recent ids', () => {
  it('answers nothing for a partition it does not own, nor before the trust delay after owning it', () => {
    const { clock, recent } = memory();
    const a = id();
    expect(recent.knownNew(0, a, T0)).toBe(false);
    recent.own(0, T0);
    // An event another writer stored before T0 can be timed up to 5 minutes (accepted skew) + 1 (clocks) after it.
    expect(recent.knownNew(0, a, T0 + 6 * MINUTE - 1)).toBe(false);
    clock.now = T0 + 7 * MINUTE;
    recent.sweep();
    expect(recent.knownNew(0, a, T0 + 6 * MINUTE)).toBe(true);
    expect(recent.knownNew(1, a, T0 + 6 * MINUTE)).toBe(false);
  });

  it('never calls an id it stored new, in its own partition and minute', () => {
    const { recent } = memory({ trustAfterMs: 0 });
    recent.own(0, T0);
    recent.own(1, T0);
    const ids = Array.from({ length: 5000 }, id);
    ids.forEach((x, i) => recent.add(0, x, T0 + (i % 3) * MINUTE));
    expect(recent.ids).toBe(5000);
    ids.forEach((x, i) => expect(recent.knownNew(0, x, T0 + (i % 3) * MINUTE)).toBe(false));
    // Elsewhere the same id is new: another partition's or another minute's memory does not hold it.
    expect(ids.filter((x) => recent.knownNew(1, x, T0)).length).toBe(5000);
    expect(ids.filter((x, i) => recent.knownNew(0, x, T0 + ((i % 3) + 1) * MINUTE)).length).toBeGreaterThan(3300);
    // Fresh ids are new, but for the rare 32-bit hash shared with a stored one (that one is looked up).
    expect(Array.from({ length: 5000 }, id).filter((x) => recent.knownNew(0, x, T0 + MINUTE)).length).toBeGreaterThan(4990);
  });

  it('forgets a partition after a failed insert and everything on clear, until owned again', () => {
    const { recent } = memory({ trustAfterMs: 0 });
    recent.own(0, T0);
    recent.own(1, T0);
    recent.add(0, id(), T0);
    recent.add(1, id(), T0);
    recent.forget(0);
    expect(recent.ids).toBe(1);
    expect(recent.knownNew(0, id(), T0)).toBe(false);
    expect(recent.knownNew(1, id(), T0)).toBe(true);
    recent.add(0, id(), T0);
    expect(recent.ids).toBe(1);
    recent.clear();
    expect(recent.ids).toBe(0);
    expect(recent.knownNew(1, id(), T0)).toBe(false);
  });

  it('keeps the owner since its first look-up, not its latest', () => {
    const { clock, recent } = memory();
    recent.own(0, T0);
    recent.own(0, T0 + 10 * MINUTE);
    clock.now = T0 + 7 * MINUTE;
    expect(recent.knownNew(0, id(), T0 + 6 * MINUTE)).toBe(true);
  });

  it('looks up what left the window, and does not trust the window again if the clock steps back', () => {
    const { clock, recent } = memory({ trustAfterMs: 0, windowMs: 5 * MINUTE });
    recent.own(0, T0);
    const old = id();
    recent.add(0, old, T0);
    clock.now = T0 + 6 * MINUTE;
    recent.sweep();
    expect(recent.ids).toBe(0);
    expect(recent.knownNew(0, id(), T0)).toBe(false);
    recent.add(0, old, T0);
    expect(recent.ids).toBe(0);
    clock.now = T0;
    recent.sweep();
    expect(recent.knownNew(0, old, T0)).toBe(false);
    expect(recent.knownNew(0, id(), T0 + MINUTE)).toBe(true);
  });

  it('drops its oldest minutes first when over its size, and looks those minutes up from then on', () => {
    const { clock, recent } = memory({ trustAfterMs: 0, maxIds: 100 });
    clock.now = T0 + 3 * MINUTE;
    recent.own(0, T0);
    for (const m of [2, 0, 1]) for (let i = 0; i < 60; i++) recent.add(0, id(), T0 + m * MINUTE);
    recent.sweep();
    // 180 ids: minute 0 goes (120 left), then minute 1 (60 left).
    expect(recent.ids).toBe(60);
    expect(recent.knownNew(0, id(), T0 + MINUTE)).toBe(false);
    expect(recent.knownNew(0, id(), T0 + 2 * MINUTE)).toBe(true);
  });
});
