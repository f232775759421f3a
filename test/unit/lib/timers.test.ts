import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { every, TimeoutError, withTimeout } from '../../../lib/timers.js';

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('every', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('never overlaps runs: the next starts an interval after one ends', async () => {
    let inHand = 0;
    let most = 0;
    const starts: number[] = [];
    const job = every(
      100,
      async () => {
        starts.push(Date.now());
        most = Math.max(most, ++inHand);
        await pause(250);
        inHand--;
      },
      { onError: () => undefined },
    );
    const t0 = Date.now();
    await vi.advanceTimersByTimeAsync(1100);
    await job.stop();
    expect(most).toBe(1);
    expect(starts.map((t) => t - t0)).toEqual([100, 450, 800]);
  });

  it('runs at once with `immediate`, and counts from the start with `fromStart` (skipping covered ticks)', async () => {
    const starts: number[] = [];
    let runs = 0;
    const job = every(
      100,
      async () => {
        starts.push(Date.now());
        await pause(++runs === 2 ? 150 : 30);
      },
      { immediate: true, fromStart: true, onError: () => undefined },
    );
    const t0 = Date.now();
    await vi.advanceTimersByTimeAsync(450);
    await job.stop();
    expect(starts.map((t) => t - t0)).toEqual([0, 100, 300, 400]);
  });

  it('asks `pause` after each run for the wait before the next (a job with work left comes back at once)', async () => {
    const starts: number[] = [];
    let left = 2;
    const job = every(
      100,
      async () => {
        starts.push(Date.now());
        await pause(10);
        if (left > 0) left--;
      },
      { onError: () => undefined, pause: () => (left > 0 ? 0 : 100) },
    );
    const t0 = Date.now();
    await vi.advanceTimersByTimeAsync(350);
    await job.stop();
    expect(starts.map((t) => t - t0)).toEqual([100, 111, 221, 331]); // setTimeout(0) waits 1 ms
  });

  it('reports a failed run and keeps going', async () => {
    const errors: unknown[] = [];
    let runs = 0;
    const job = every(
      10,
      () => {
        runs++;
        throw new Error('boom');
      },
      { onError: (err) => errors.push(err) },
    );
    await vi.advanceTimersByTimeAsync(35);
    await job.stop();
    expect(runs).toBe(3);
    expect(errors).toHaveLength(3);
    expect((errors[0] as Error).message).toBe('boom');
  });

  it('stop() waits for the run in hand and starts no other', async () => {
    let finished = 0;
    let started = 0;
    const job = every(
      10,
      async () => {
        started++;
        await pause(100);
        finished++;
      },
      { onError: () => undefined },
    );
    await vi.advanceTimersByTimeAsync(20);
    expect(started).toBe(1);
    let stopped = false;
    const stopping = job.stop().then(() => (stopped = true));
    await vi.advanceTimersByTimeAsync(50);
    expect(stopped).toBe(false);
    await vi.advanceTimersByTimeAsync(50);
    await stopping;
    expect(finished).toBe(1);
    await vi.advanceTimersByTimeAsync(500);
    expect(started).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('withTimeout', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('gives the outcome of work that answers in time, and clears its timer', async () => {
    await expect(withTimeout(Promise.resolve(7), 1000)).resolves.toBe(7);
    await expect(withTimeout(Promise.reject(new Error('refused')), 1000)).rejects.toThrow('refused');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('rejects with a TimeoutError naming what was waited for, and clears its timer', async () => {
    const slow = withTimeout(new Promise(() => undefined), 500, 'redis');
    const outcome = slow.catch((err: unknown) => err);
    await vi.advanceTimersByTimeAsync(500);
    const err = await outcome;
    expect(err).toBeInstanceOf(TimeoutError);
    expect(err).toMatchObject({ name: 'TimeoutError', message: 'no answer from redis within 500 ms', ms: 500 });
    expect(vi.getTimerCount()).toBe(0);
    const unnamed = withTimeout(new Promise(() => undefined), 20).catch((e: Error) => e.message);
    await vi.advanceTimersByTimeAsync(20);
    expect(await unnamed).toBe('no answer within 20 ms');
  });

  it('rejects with the error a function makes, calling it only on timeout', async () => {
    const make = vi.fn(() => new RangeError('too slow'));
    await withTimeout(Promise.resolve(1), 10, make);
    expect(make).not.toHaveBeenCalled();
    const late = withTimeout(new Promise(() => undefined), 10, make).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(10);
    expect(await late).toBeInstanceOf(RangeError);
    expect(make).toHaveBeenCalledTimes(1);
  });
});
