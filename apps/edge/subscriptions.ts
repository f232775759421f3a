import type { Config } from '../../lib/config.js';
import type { Logger } from '../../lib/logger.js';
import type { TelemetryKey } from '../../lib/events/vocabulary.js';
import type { StreamItem } from './sources.js';
import { CLOSE, closeReason, pickMetrics } from './protocol.js';

/**
 * The registry of open connections and their subscriptions, the fan-out of a stream item to its
 * subscribers and the per-connection limits (subscription count, unread bytes). Knows sockets only
 * through `EdgeSocket`, so it runs without uWS.
 */

/** What the registry needs of a socket; a uWS WebSocket is one. */
export interface EdgeSocket {
  /** 0 sent, 1 buffered (back-pressure), 2 dropped (uWS's own limit). */
  send(text: string): number;
  getBufferedAmount(): number;
  /** Runs the sends in `cb` as one write. */
  cork(cb: () => void): unknown;
  end(code: number, reason: string): void;
}

export interface Subscription {
  cmdId: number;
  venueId: string;
  keys: TelemetryKey[];
  /** Subscriptions with equal keys and cmdId get the same bytes: serialised once per event. */
  shape: string;
  conn: Subscriber;
}

/** A connection as the registry sees it. */
export interface Subscriber {
  operatorId: string;
  open: boolean;
  ws: EdgeSocket | null;
  /**
   * The connection's subscriptions by cmdId: none, the only one, or a Map from the second on (most
   * connections hold one; a Map costs ~180 bytes of heap per connection). Read and changed only
   * through the registry.
   */
  subs: null | Subscription | Map<number, Subscription>;
}

/** Pushes gathered over part of a Kafka batch, sent per connection in one corked write. */
export interface Outbox {
  byConn: Map<Subscriber, string[]>;
  size: number;
}

export const newOutbox = (): Outbox => ({ byConn: new Map(), size: 0 });

/** The edge's running totals since start (exposed in /health and as metrics). */
export interface EdgeCounters {
  refused: number;
  closedSlow: number;
  closedRotated: number;
  /** Frames sent to clients (pushes, replies) and received from them. */
  messagesSent: number;
  messagesReceived: number;
}

export const newCounters = (): EdgeCounters => ({ refused: 0, closedSlow: 0, closedRotated: 0, messagesSent: 0, messagesReceived: 0 });

const subsOf = (conn: Subscriber): Subscription[] =>
  conn.subs === null ? [] : conn.subs instanceof Map ? [...conn.subs.values()] : [conn.subs];
const subCount = (conn: Subscriber): number => (conn.subs === null ? 0 : conn.subs instanceof Map ? conn.subs.size : 1);

export type SubscriptionLimits = Pick<Config, 'WS_MAX_BUFFERED_BYTES' | 'WS_MAX_SUBSCRIPTIONS'>;

export class Subscriptions<C extends Subscriber> {
  /** The open, admitted connections (refused ones never join). */
  readonly conns = new Set<C>();
  private readonly byVenue = new Map<string, Set<Subscription>>();

  constructor(
    private readonly limits: SubscriptionLimits,
    private readonly counters: EdgeCounters,
    private readonly log: Pick<Logger, 'warn'>,
  ) {}

  join(conn: C): void {
    this.conns.add(conn);
  }

  /** Forgets a closed connection and every subscription it held. */
  leave(conn: C): void {
    if (this.conns.delete(conn)) for (const sub of subsOf(conn)) this.remove(sub);
  }

  /** Sends a reply, or closes the connection as a slow consumer. */
  send(conn: Subscriber, message: unknown): void {
    if (conn.open && conn.ws) this.deliverAll(conn, [JSON.stringify(message)]);
  }

  /**
   * Sends in one corked write (one syscall for many pushes); stops and closes on a slow consumer:
   * a push is never dropped silently.
   */
  private deliverAll(conn: Subscriber, texts: string[]): void {
    const ws = conn.ws!;
    const max = this.limits.WS_MAX_BUFFERED_BYTES;
    let dropped = false;
    ws.cork(() => {
      for (const text of texts) {
        if (ws.send(text) === 2 || ws.getBufferedAmount() > max) {
          dropped = true;
          break;
        }
        this.counters.messagesSent++;
      }
    });
    const buffered = ws.getBufferedAmount();
    if (dropped || buffered > max) {
      this.counters.closedSlow++;
      this.log.warn({ operatorId: conn.operatorId, buffered }, 'closing a slow consumer');
      ws.end(CLOSE.SLOW_CONSUMER, closeReason('SLOW_CONSUMER', `more than ${max} bytes unread; reconnect and read faster`));
    }
  }

  get(conn: Subscriber, cmdId: number): Subscription | undefined {
    return conn.subs === null
      ? undefined
      : conn.subs instanceof Map
        ? conn.subs.get(cmdId)
        : conn.subs.cmdId === cmdId
          ? conn.subs
          : undefined;
  }

  /** The connection's subscriptions to a venue. */
  ofVenue(conn: Subscriber, venueId: string): Subscription[] {
    return subsOf(conn).filter((s) => s.venueId === venueId);
  }

  /** Whether subscribing with `cmdId` would pass the per-connection limit (a replacement always does). */
  full(conn: Subscriber, cmdId: number): boolean {
    return !this.get(conn, cmdId) && subCount(conn) >= this.limits.WS_MAX_SUBSCRIPTIONS;
  }

  /** Adds a subscription, replacing the connection's one with the same cmdId. */
  add(conn: Subscriber, cmdId: number, venueId: string, keys: TelemetryKey[]): void {
    const sub: Subscription = { cmdId, venueId, keys, shape: `${cmdId}|${keys.join(',')}`, conn };
    const old = this.get(conn, cmdId);
    if (old) this.remove(old);
    if (conn.subs === null) conn.subs = sub;
    else if (conn.subs instanceof Map) conn.subs.set(cmdId, sub);
    else
      conn.subs = new Map([
        [conn.subs.cmdId, conn.subs],
        [cmdId, sub],
      ]);
    let set = this.byVenue.get(venueId);
    if (!set) this.byVenue.set(venueId, (set = new Set()));
    // The venue's subscriptions share one copy of its id.
    else sub.venueId = set.values().next().value!.venueId;
    set.add(sub);
  }

  remove(sub: Subscription): void {
    const conn = sub.conn;
    if (conn.subs instanceof Map) {
      conn.subs.delete(sub.cmdId);
      if (conn.subs.size === 1) conn.subs = conn.subs.values().next().value!;
    } else if (conn.subs === sub) conn.subs = null;
    const set = this.byVenue.get(sub.venueId);
    set?.delete(sub);
    if (set?.size === 0) this.byVenue.delete(sub.venueId);
  }

  /** Whether any connection here subscribes to the venue. */
  watches(venueId: string): boolean {
    return this.byVenue.has(venueId);
  }

  /** Queues the item's pushes per connection; `flush` sends them. */
  fanOut(item: StreamItem, outbox: Outbox): void {
    const subs = this.byVenue.get(item.venueId);
    if (!subs) return;
    const bytes = new Map<string, string | null>();
    for (const sub of subs) {
      const conn = sub.conn;
      if (!conn.open || conn.operatorId !== item.operatorId) continue;
      let text = bytes.get(sub.shape);
      if (text === undefined) {
        const metrics = item.alarm ? {} : pickMetrics(item.metrics, sub.keys);
        const zone = item.zoneId === undefined ? {} : { zoneId: item.zoneId };
        const alarm = item.alarm ? { alarm: item.alarm } : {};
        text =
          metrics &&
          JSON.stringify({
            cmdId: sub.cmdId,
            data: { venueId: item.venueId, ...zone, eventType: item.eventType, metrics, ...alarm, time: item.time },
          });
        bytes.set(sub.shape, text);
      }
      if (text === null) continue;
      const queued = outbox.byConn.get(conn);
      if (queued) queued.push(text);
      else outbox.byConn.set(conn, [text]);
      outbox.size++;
    }
  }

  flush(outbox: Outbox): void {
    for (const [conn, texts] of outbox.byConn) if (conn.open && conn.ws) this.deliverAll(conn, texts);
    outbox.byConn.clear();
    outbox.size = 0;
  }

  stats(): { connections: number; operators: number; subscriptions: number } {
    const operators = new Set<string>();
    let subscriptions = 0;
    for (const c of this.conns) {
      operators.add(c.operatorId);
      subscriptions += subCount(c);
    }
    return { connections: this.conns.size, operators: operators.size, subscriptions };
  }
}
