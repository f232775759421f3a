import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { ConnectorType } from '../lib/events/vocabulary.js';
import type { IngestEvent } from './traffic/index.js';

/**
 * The simulator's HTTP side: JSON calls to the API, and `POST /ingest` with retries that never lose
 * or duplicate a batch. Each batch carries an `Idempotency-Key` kept across its retries, so a
 * resend after a timeout or a dropped connection is stored once (docs/events.md, "Safe retries").
 *
 * - `429`: waits `Retry-After` seconds and resends (rate limit); a quota refusal with a long
 *   Retry-After is not worth waiting for and stops the run instead.
 * - `503`, other `5xx`, `409` "still in flight", network errors: backoff (Retry-After when given,
 *   else 0.5 s doubling up to 30 s) and resend, logging each.
 * - When `RateLimit-Remaining` reaches 0 the next request waits for the window to end instead of
 *   collecting a 429.
 * - Any other `4xx` is a mistake that resending cannot fix: it throws `ApiError`.
 */

export interface IngestAnswer {
  accepted: number;
  rejected: number;
  errors: Array<{ index: number; reason: string }>;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
    what: string,
  ) {
    const msg =
      typeof body === 'object' && body !== null && 'error' in body ? String((body as { error: unknown }).error) : JSON.stringify(body);
    super(`${what}: ${status} ${msg}`);
    this.name = 'ApiError';
  }
}

/** The run was asked to stop while a batch was still waiting to be resent. */
export class StoppedError extends Error {
  constructor() {
    super('stopped before the batch was accepted');
    this.name = 'StoppedError';
  }
}

export interface ClientOptions {
  url: string;
  key?: string;
  log: Logger;
  /** Set when the run should stop: waits end early; a batch that may have been stored gets `stopGraceMs` more to be accepted. */
  stopping?: () => boolean;
  stopGraceMs?: number;
  /** Longest Retry-After worth waiting for (a monthly quota answers with days). */
  maxRetryAfterS?: number;
  /** Time and waiting; tests pass one that moves on without waiting in real time. */
  clock?: Clock;
}

export interface Clock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

export interface ClientStats {
  requests: number;
  rateLimited: number;
  retried: number;
  waitedMs: number;
}

interface StopClock {
  deadline?: number;
  /** An attempt ended without a definite answer (it may have been stored). */
  uncertain?: boolean;
}

export const realClock: Clock = { now: Date.now, sleep: (ms) => new Promise<void>((r) => setTimeout(r, ms)) };

export class ApiClient {
  key: string | undefined;
  readonly stats: ClientStats = { requests: 0, rateLimited: 0, retried: 0, waitedMs: 0 };
  private pauseUntil = 0;
  private readonly clock: Clock;

  constructor(private readonly opts: ClientOptions) {
    this.key = opts.key;
    this.clock = opts.clock ?? realClock;
  }

  get url(): string {
    return this.opts.url;
  }

  /** A JSON call (set-up), with the same retries as ingest. */
  async call<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: T }> {
    const res = await this.send(method, path, body, headers, `${method} ${path}`);
    return res as { status: number; body: T };
  }

  /** Sends one batch until it is answered 202; returns the per-event answer. */
  async ingest(venueId: string, connectorType: ConnectorType, events: IngestEvent[]): Promise<IngestAnswer & { replayed: boolean }> {
    const idempotencyKey = randomUUID();
    const res = await this.send(
      'POST',
      '/ingest',
      { venue_id: venueId, connector_type: connectorType, events },
      { 'idempotency-key': idempotencyKey },
      `ingest ${connectorType}`,
    );
    if (res.status !== 202) throw new ApiError(res.status, res.body, `ingest ${connectorType}`);
    return { ...(res.body as IngestAnswer), replayed: res.replayed };
  }

  private async send(
    method: string,
    path: string,
    body: unknown,
    headers: Record<string, string>,
    what: string,
  ): Promise<{ status: number; body: unknown; replayed: boolean }> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    let backoff = 500;
    const stop: StopClock = {};
    for (let attempt = 1; ; attempt++) {
      if (this.clock.now() >= this.stopDeadline(stop)) throw new StoppedError();
      await this.wait(this.pauseUntil - this.clock.now(), stop);
      if (this.clock.now() >= this.stopDeadline(stop)) throw new StoppedError();
      let res: Response;
      try {
        this.stats.requests++;
        res = await fetch(this.opts.url + path, {
          method,
          headers: {
            ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
            ...(this.key ? { authorization: `Bearer ${this.key}` } : {}),
            ...headers,
          },
          body: payload,
          signal: AbortSignal.timeout(60_000),
        });
      } catch (err) {
        stop.uncertain = true;
        this.stats.retried++;
        this.opts.log.warn({ what, attempt, err, retryInMs: backoff }, 'request failed; retrying');
        await this.wait(backoff, stop);
        backoff = Math.min(30_000, backoff * 2);
        continue;
      }
      const text = await res.text().catch(() => '');
      const parsed = parse(text);
      const remaining = res.headers.get('ratelimit-remaining');
      const reset = Number(res.headers.get('ratelimit-reset'));
      if (remaining === '0' && reset > 0) this.pauseUntil = this.clock.now() + reset * 1000 + 100;
      const retryAfter = Number(res.headers.get('retry-after'));
      if (res.status === 429) {
        const code = (parsed as { code?: string } | undefined)?.code;
        const seconds = Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : 1;
        if (code === 'QUOTA_EXCEEDED' || seconds > (this.opts.maxRetryAfterS ?? 120)) throw new ApiError(429, parsed, what);
        this.stats.rateLimited++;
        this.opts.log.info({ what, retryAfter: seconds }, 'rate limited; waiting Retry-After before resending');
        this.pauseUntil = this.clock.now() + seconds * 1000;
        continue;
      }
      const inFlight = res.status === 409 && Number.isFinite(retryAfter) && retryAfter > 0;
      if (res.status >= 500 || inFlight) {
        stop.uncertain = true;
        const wait = Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : backoff;
        this.stats.retried++;
        this.opts.log.warn({ what, status: res.status, attempt, retryInMs: wait }, 'service unavailable; resending the same batch');
        await this.wait(wait, stop);
        backoff = Math.min(30_000, backoff * 2);
        continue;
      }
      if (res.status >= 400) throw new ApiError(res.status, parsed, what);
      return { status: res.status, body: parsed, replayed: res.headers.get('idempotent-replayed') === 'true' };
    }
  }

  /**
   * Once the run is stopping, until when this batch may still be tried (Infinity before). A batch
   * whose every answer so far was definite (none yet, a 429) is dropped at once: nothing of it was
   * stored. One whose fate is unknown (a dropped connection, a 5xx) gets the grace period, so a
   * batch that may have been stored is completed, not left to be sent again.
   */
  private stopDeadline(stop: StopClock): number {
    if (stop.deadline === undefined && this.opts.stopping?.())
      stop.deadline = this.clock.now() + (stop.uncertain ? (this.opts.stopGraceMs ?? 20_000) : 0);
    return stop.deadline ?? Infinity;
  }

  /** Waits in short steps, so a stop request cuts a long Retry-After down to the grace period. */
  private async wait(ms: number, stop: StopClock): Promise<void> {
    const until = this.clock.now() + ms;
    while (this.clock.now() < Math.min(until, this.stopDeadline(stop))) {
      const step = Math.min(250, until - this.clock.now());
      this.stats.waitedMs += step;
      await this.clock.sleep(step);
    }
  }
}

function parse(text: string): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text.slice(0, 200);
  }
}
