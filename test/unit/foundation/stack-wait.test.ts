import { describe, expect, it } from 'vitest';
import { waitFor } from '../../../scripts/stack/common.mjs';

/** A check that turns true `ms` after the start. */
const readyAfter = (ms: number) => {
  const at = Date.now() + ms;
  return async () => Date.now() >= at;
};

describe('the stack waiting for an engine to answer', () => {
  it('waits past the time-out while the engine is still busy (e.g. Kafka recovering its logs)', async () => {
    expect(await waitFor(readyAfter(300), { timeoutMs: 100, busy: () => true, intervalMs: 20 })).toBe('ok');
  });

  it('gives up at the time-out when the engine is not busy', async () => {
    expect(await waitFor(readyAfter(300), { timeoutMs: 100, busy: () => false, intervalMs: 20 })).toBe('timeout');
  });

  it('gives up at five times the time-out however busy the engine says it is', async () => {
    const started = Date.now();
    expect(await waitFor(async () => false, { timeoutMs: 100, busy: () => true, intervalMs: 20 })).toBe('timeout');
    expect(Date.now() - started).toBeGreaterThanOrEqual(500);
    expect(Date.now() - started).toBeLessThan(1500);
  });
});
