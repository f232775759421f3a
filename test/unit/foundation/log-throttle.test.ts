import { describe, expect, it } from 'vitest';
import { LogThrottle } from '../../../lib/log-throttle.js';

describe('LogThrottle', () => {
  it('allows one line per key and period, carrying the count since the previous line', () => {
    const t = new LogThrottle(60_000);
    expect(t.add('venue-a|duplicate', 3, 0)).toBe(3);
    expect(t.add('venue-a|duplicate', 2, 10_000)).toBeUndefined();
    expect(t.add('venue-b|duplicate', 1, 10_000)).toBe(1);
    expect(t.add('venue-a|duplicate', 4, 59_999)).toBeUndefined();
    expect(t.add('venue-a|duplicate', 1, 60_000)).toBe(7);
    expect(t.add('venue-a|duplicate', 1, 60_001)).toBeUndefined();
  });
});
