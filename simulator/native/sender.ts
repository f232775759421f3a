import type { Logger } from 'pino';
import { ApiError, realClock, StoppedError, type Clock } from '../client.js';
import type { Delivery } from './types.js';

/**
 * Sends vendor deliveries to the service's receivers (`POST /hooks/<integration id>`, no API key),
 * with the same retry rules as the /ingest client, but the rate limit is per integration:
 * - `429`: waits `Retry-After` (that integration only) and resends; `RateLimit-Remaining: 0`
 *   pauses that integration until the window's end instead of collecting a 429;
 * - `503`, other `5xx`, network errors: backoff (Retry-After when given, else 0.5 s doubling to
 *   30 s) and resend, signed afresh;
 * - `401`, `400`, `403`, `413`, `422`: the delivery is refused (a signature or format the receiver
 *   does not take): counted and reported, the run goes on, as a vendor's would;
 * - `404`: there is no receiver (an older service) or the integration is gone: the run stops.
 * When the run stops, a delivery only waiting (rate limit, nothing sent) is dropped at once; one
 * whose fate is unknown gets `stopGraceMs` more.
 */

export interface DeliveryAnswer {
  status: number;
  accepted: number;
  rejected: number;
  ignored: number;
  /** Set when the receiver refused the delivery as a whole. */
  refused?: string;
}

export interface SenderOptions {
  url: string;
  log: Logger;
  stopping?: () => boolean;
  stopGraceMs?: number;
  maxRetryAfterS?: number;
  /** Clock for signatures (ms). */
  now?: () => number;
  /** Time and waiting for retries; tests pass one that moves on without waiting in real time. */
  clock?: Clock;
}

export class HookSender {
  readonly stats = { requests: 0, rateLimited: 0, retried: 0 };
  private readonly pauseUntil = new Map<string, number>();
  private readonly clock: Clock;

  constructor(private readonly opts: SenderOptions) {
    this.clock = opts.clock ?? realClock;
  }

  async deliver(d: Delivery): Promise<DeliveryAnswer> {
    const path = `/hooks/${d.integrationId}`;
    let backoff = 500;
    let uncertain = false;
    let deadline: number | undefined;
    const stopAt = () => {
      if (deadline === undefined && this.opts.stopping?.())
        deadline = this.clock.now() + (uncertain ? (this.opts.stopGraceMs ?? 20_000) : 0);
      return deadline ?? Infinity;
    };
    const wait = async (ms: number) => {
      const until = this.clock.now() + ms;
      while (this.clock.now() < Math.min(until, stopAt())) await this.clock.sleep(Math.min(200, until - this.clock.now()));
    };
    for (;;) {
      if (this.clock.now() >= stopAt()) throw new StoppedError();
      await wait((this.pauseUntil.get(d.integrationId) ?? 0) - this.clock.now());
      if (this.clock.now() >= stopAt()) throw new StoppedError();
      let res: Response;
      try {
        this.stats.requests++;
        res = await fetch(this.opts.url + path, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'user-agent': `simulator (${d.kind})`,
            ...d.headers((this.opts.now ?? Date.now)()),
          },
          body: d.body,
          signal: AbortSignal.timeout(30_000),
        });
      } catch (err) {
        uncertain = true;
        this.stats.retried++;
        this.opts.log.warn({ what: d.kind, err, retryInMs: backoff }, 'webhook delivery failed; retrying');
        await wait(backoff);
        backoff = Math.min(30_000, backoff * 2);
        continue;
      }
      const text = await res.text().catch(() => '');
      const parsed = parse(text);
      const remaining = res.headers.get('ratelimit-remaining');
      const reset = Number(res.headers.get('ratelimit-reset'));
      if (remaining === '0' && reset > 0) this.pauseUntil.set(d.integrationId, this.clock.now() + reset * 1000 + 100);
      const retryAfter = Number(res.headers.get('retry-after'));
      if (res.status === 429) {
        const seconds = Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : 1;
        if (seconds > (this.opts.maxRetryAfterS ?? 120)) throw new ApiError(429, parsed, `${d.kind} to ${path}`);
        this.stats.rateLimited++;
        this.opts.log.debug({ what: d.kind, retryAfter: seconds }, 'receiver rate limit; waiting Retry-After');
        this.pauseUntil.set(d.integrationId, this.clock.now() + seconds * 1000);
        continue;
      }
      if (res.status >= 500) {
        uncertain = true;
        const ms = Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : backoff;
        this.stats.retried++;
        this.opts.log.warn({ what: d.kind, status: res.status, retryInMs: ms }, 'receiver unavailable; resending the delivery');
        await wait(ms);
        backoff = Math.min(30_000, backoff * 2);
        continue;
      }
      if (res.status === 404)
        throw new ApiError(
          404,
          parsed,
          `${d.kind} to ${path} (no webhook receiver for this integration: is the service older than the native links?)`,
        );
      if (res.status >= 400) return { status: res.status, accepted: 0, rejected: 0, ignored: 0, refused: reason(res.status, parsed) };
      const answer = (parsed ?? {}) as { accepted?: number; rejected?: number; ignored?: number };
      return {
        status: res.status,
        accepted: Number(answer.accepted ?? 0),
        rejected: Number(answer.rejected ?? 0),
        ignored: Number(answer.ignored ?? 0),
      };
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

function reason(status: number, body: unknown): string {
  const msg =
    typeof body === 'object' && body !== null && 'error' in body ? String((body as { error: unknown }).error) : JSON.stringify(body ?? '');
  return `${status} ${msg}`.slice(0, 300);
}
