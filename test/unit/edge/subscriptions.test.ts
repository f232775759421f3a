import { describe, expect, it } from 'vitest';
import { newCounters, newOutbox, Subscriptions, type EdgeSocket, type Subscriber } from '../../../apps/edge/subscriptions.js';
import type { StreamItem } from '../../../apps/edge/sources.js';
import { CLOSE } from '../../../apps/edge/protocol.js';

/** A socket whose client reads nothing while `reading` is false: every send adds to the buffer. */
class FakeSocket implements EdgeSocket {
  readonly sent: string[] = [];
  buffered = 0;
  reading = true;
  corks = 0;
  /** What uWS answers a send with once its own limit is passed (2: dropped). */
  sendResult: number | null = null;
  ended: { code: number; reason: string } | null = null;

  send(text: string): number {
    if (this.sendResult !== null) return this.sendResult;
    this.sent.push(text);
    if (!this.reading) this.buffered += text.length;
    return this.buffered > 0 ? 1 : 0;
  }
  getBufferedAmount(): number {
    return this.buffered;
  }
  cork(cb: () => void): void {
    this.corks++;
    cb();
  }
  end(code: number, reason: string): void {
    this.ended = { code, reason };
  }
  json(): unknown[] {
    return this.sent.map((t) => JSON.parse(t));
  }
}

const OP_A = 'operator-a';
const OP_B = 'operator-b';
const VENUE_A = '11111111-1111-4111-8111-111111111111';
const VENUE_A2 = '22222222-2222-4222-8222-222222222222';
const VENUE_B = '33333333-3333-4333-8333-333333333333';

function setup(limits = { WS_MAX_BUFFERED_BYTES: 1000, WS_MAX_SUBSCRIPTIONS: 3 }) {
  const counters = newCounters();
  const warnings: unknown[] = [];
  const registry = new Subscriptions<Subscriber & { ws: FakeSocket }>(limits, counters, {
    warn: (...args: unknown[]) => void warnings.push(args),
  } as never);
  const connect = (operatorId: string) => {
    const conn = { operatorId, open: true, ws: new FakeSocket(), subs: null };
    registry.join(conn);
    return conn;
  };
  /** Fans the items out and flushes, as a tail does for one batch. */
  const push = (...items: StreamItem[]) => {
    const outbox = newOutbox();
    for (const item of items) registry.fanOut(item, outbox);
    registry.flush(outbox);
  };
  return { registry, counters, warnings, connect, push };
}

const entry = (operatorId: string, venueId: string, metrics: Record<string, number> = { entries: 1, occupancy: 5 }): StreamItem => ({
  operatorId,
  venueId,
  eventType: 'entry',
  metrics,
  time: '2026-11-23T01:09:59.000Z',
});

describe('the subscription registry', () => {
  it('subscribes, replaces by cmdId, unsubscribes, and counts what it holds', () => {
    const { registry, connect } = setup();
    const conn = connect(OP_A);
    registry.add(conn, 1, VENUE_A, ['entries']);
    registry.add(conn, 2, VENUE_A, ['occupancy']);
    expect(registry.get(conn, 1)).toMatchObject({ cmdId: 1, venueId: VENUE_A, keys: ['entries'] });
    expect(registry.ofVenue(conn, VENUE_A).map((s) => s.cmdId)).toEqual([1, 2]);
    expect(registry.stats()).toEqual({ connections: 1, operators: 1, subscriptions: 2 });

    // The same cmdId replaces the subscription: venue and keys.
    registry.add(conn, 1, VENUE_A2, ['co2']);
    expect(registry.get(conn, 1)).toMatchObject({ venueId: VENUE_A2, keys: ['co2'] });
    expect(registry.ofVenue(conn, VENUE_A).map((s) => s.cmdId)).toEqual([2]);
    expect(registry.stats().subscriptions).toBe(2);

    registry.remove(registry.get(conn, 2)!);
    expect(registry.get(conn, 2)).toBeUndefined();
    expect(registry.watches(VENUE_A)).toBe(false);
    expect(registry.watches(VENUE_A2)).toBe(true);
    registry.remove(registry.get(conn, 1)!);
    expect(conn.subs).toBeNull();
    expect(registry.watches(VENUE_A2)).toBe(false);
    expect(registry.stats()).toEqual({ connections: 1, operators: 1, subscriptions: 0 });
  });

  it('pushes each subscription the keys it asked for, an alarm to all, and nothing without a key', () => {
    const { registry, connect, push } = setup();
    const conn = connect(OP_A);
    registry.add(conn, 1, VENUE_A, ['entries']);
    registry.add(conn, 2, VENUE_A, ['temperature']);
    push(entry(OP_A, VENUE_A), { ...entry(OP_A, VENUE_A, {}), eventType: 'alarm', alarm: { id: 'x', kind: 'created' } });
    expect(conn.ws.json()).toEqual([
      { cmdId: 1, data: { venueId: VENUE_A, eventType: 'entry', metrics: { entries: 1 }, time: '2026-11-23T01:09:59.000Z' } },
      {
        cmdId: 1,
        data: { venueId: VENUE_A, eventType: 'alarm', metrics: {}, alarm: { id: 'x', kind: 'created' }, time: '2026-11-23T01:09:59.000Z' },
      },
      {
        cmdId: 2,
        data: { venueId: VENUE_A, eventType: 'alarm', metrics: {}, alarm: { id: 'x', kind: 'created' }, time: '2026-11-23T01:09:59.000Z' },
      },
    ]);
    // One corked write for the whole batch.
    expect(conn.ws.corks).toBe(1);
  });

  it("never pushes one tenant's venue to another tenant's socket", () => {
    const { registry, connect, push, counters } = setup();
    const a = connect(OP_A);
    const b = connect(OP_B);
    registry.add(a, 1, VENUE_A, ['entries']);
    registry.add(b, 1, VENUE_B, ['entries']);
    // Defence in depth: even a subscription of B's to A's venue id receives none of A's events.
    registry.add(b, 2, VENUE_A, ['entries']);
    push(entry(OP_A, VENUE_A), entry(OP_B, VENUE_B));
    expect(a.ws.json()).toEqual([expect.objectContaining({ cmdId: 1, data: expect.objectContaining({ venueId: VENUE_A }) })]);
    expect(b.ws.json()).toEqual([expect.objectContaining({ cmdId: 1, data: expect.objectContaining({ venueId: VENUE_B }) })]);
    expect(counters.messagesSent).toBe(2);
    expect(registry.stats()).toEqual({ connections: 2, operators: 2, subscriptions: 3 });
  });

  it('holds at most WS_MAX_SUBSCRIPTIONS per connection; replacing one is always allowed', () => {
    const { registry, connect } = setup();
    const a = connect(OP_A);
    const b = connect(OP_A);
    for (const cmdId of [1, 2, 3]) {
      expect(registry.full(a, cmdId)).toBe(false);
      registry.add(a, cmdId, VENUE_A, ['entries']);
    }
    expect(registry.full(a, 4)).toBe(true);
    expect(registry.full(a, 2)).toBe(false);
    // The limit is per connection: the operator's other connection is not affected.
    expect(registry.full(b, 4)).toBe(false);
  });

  it('closes a slow consumer with 4108 once its unread bytes pass the limit, sending nothing after', () => {
    const { registry, connect, push, counters, warnings } = setup({ WS_MAX_BUFFERED_BYTES: 400, WS_MAX_SUBSCRIPTIONS: 3 });
    const slow = connect(OP_A);
    const healthy = connect(OP_A);
    slow.ws.reading = false;
    registry.add(slow, 1, VENUE_A, ['entries']);
    registry.add(healthy, 1, VENUE_A, ['entries']);
    const items = Array.from({ length: 10 }, () => entry(OP_A, VENUE_A));
    push(...items);
    const size = slow.ws.sent[0]!.length;
    const fits = Math.floor(400 / size);
    // The push that crossed the limit went out (uWS buffered it); none after it, and it is not counted.
    expect(slow.ws.sent).toHaveLength(fits + 1);
    expect(slow.ws.ended).toEqual({
      code: CLOSE.SLOW_CONSUMER,
      reason: 'SLOW_CONSUMER: more than 400 bytes unread; reconnect and read faster',
    });
    expect(counters.closedSlow).toBe(1);
    expect(warnings).toHaveLength(1);
    // The healthy connection on the same venue got every push.
    expect(healthy.ws.sent).toHaveLength(10);
    expect(healthy.ws.ended).toBeNull();
    expect(counters.messagesSent).toBe(fits + 10);
  });

  it('closes a connection whose push uWS dropped, and one whose replies pile up', () => {
    const { registry, connect, push, counters } = setup({ WS_MAX_BUFFERED_BYTES: 100, WS_MAX_SUBSCRIPTIONS: 3 });
    const dropped = connect(OP_A);
    registry.add(dropped, 1, VENUE_A, ['entries']);
    dropped.ws.sendResult = 2;
    push(entry(OP_A, VENUE_A));
    expect(dropped.ws.ended?.code).toBe(CLOSE.SLOW_CONSUMER);

    const replies = connect(OP_B);
    replies.ws.reading = false;
    for (let i = 0; i < 5 && !replies.ws.ended; i++)
      registry.send(replies, { cmdId: i, type: 'subscribed', entityId: VENUE_B, keys: ['entries'] });
    expect(replies.ws.ended?.code).toBe(CLOSE.SLOW_CONSUMER);
    expect(replies.ws.sent.length).toBeGreaterThan(1);
    expect(counters.closedSlow).toBe(2);
  });

  it('forgets a closed connection and its subscriptions; nothing is sent to it', () => {
    const { registry, connect, push } = setup();
    const a = connect(OP_A);
    const other = connect(OP_A);
    registry.add(a, 1, VENUE_A, ['entries']);
    registry.add(a, 2, VENUE_A2, ['entries']);
    registry.add(other, 1, VENUE_A2, ['entries']);

    a.open = false;
    push(entry(OP_A, VENUE_A));
    registry.send(a, { cmdId: 1, type: 'subscribed' });
    expect(a.ws.sent).toEqual([]);

    registry.leave(a);
    expect(a.subs).toBeNull();
    expect(registry.watches(VENUE_A)).toBe(false);
    expect(registry.watches(VENUE_A2)).toBe(true);
    expect(registry.stats()).toEqual({ connections: 1, operators: 1, subscriptions: 1 });
    registry.leave(a);
    expect(registry.stats().connections).toBe(1);
  });
});
