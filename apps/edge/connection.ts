import { randomUUID } from 'node:crypto';
import type { Subscriber } from './subscriptions.js';

/** Why a connection is closed right after it opens: a browser can read this, not a refused status. */
export interface Refusal {
  close: number;
  errorCode: string;
  message: string;
}

/** One /ws connection: uWS's user data, from admission to close. */
export interface Conn extends Subscriber {
  /** The upgrade's `token` and client address, kept only until the connection is admitted. */
  token: string;
  client: string;
  /** Also the connection's lease id. */
  id: string;
  /** SHA-256 of the key, hex: re-checked so a rotated key's connections close. Never the key itself. */
  keyHash: string;
  refusal: Refusal | null;
  /** Admitted and sent `connected`; its frames are received from then on, in order. */
  welcomed: boolean;
  leased: boolean;
  /** Client messages waiting for their replies. */
  pending: number;
  /** The connection's messages in order; `IDLE` when none is waiting. */
  queue: Promise<void>;
}

/** The queue of a connection with no message waiting: one settled promise shared by all of them. */
export const IDLE: Promise<void> = Promise.resolve();

/** Runs `task` after the connection's earlier work, counted in `pending` until it settles. */
export function enqueue(conn: Conn, task: () => Promise<void>): void {
  conn.pending++;
  conn.queue = conn.queue.then(task).finally(() => {
    // Nothing left in the chain: drop it, so an idle connection keeps no promise of its own.
    if (--conn.pending === 0) conn.queue = IDLE;
  });
}

export const newConn = (token = '', client = ''): Conn => ({
  token,
  client,
  id: randomUUID(),
  operatorId: '',
  keyHash: '',
  refusal: null,
  welcomed: false,
  leased: false,
  open: false,
  ws: null,
  subs: null,
  pending: 0,
  queue: IDLE,
});

/** A Postgres answer slower than this counts as Postgres being away for a client (key and venue checks). */
export const CHECK_TIMEOUT_MS = 5000;
