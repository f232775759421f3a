import { randomUUID } from 'node:crypto';
import { chRows, chsql, type Ch } from '../../clickhouse/client.js';

/**
 * The chaos runner's ingest fleet (also used by test/reliability/chaos-short.test.ts): clients that
 * send batches with an `Idempotency-Key` and an `event_id` per event, and resend every batch that
 * got no 202 (a 503, a 409 while the key is in flight, a timeout, a dropped connection) until one
 * comes, failing over to the other api instance like a front door would. So every event sent is
 * eventually accepted exactly once, and the raw table must hold each of them exactly once.
 */

export interface FleetTenant {
  key: string;
  venueId: string;
  /** `devices`: Meraki presence; `occupancy`: Density absolute counts (the occupancy processor's input). */
  kind: 'devices' | 'occupancy';
}

export interface FleetStats {
  batchesAccepted: number;
  eventsAccepted: number;
  /** Answers other than 202, by status (503 and 409-in-flight are the expected refusals). */
  refusals: Record<number, number>;
  /** Refusals that broke the contract: a 503 or 409 without Retry-After, any 5xx but 503, any other 4xx. */
  violations: string[];
  /** Requests that got no answer within the client timeout (a hang). */
  timeouts: number;
  /** Dropped or refused connections (an api instance killed): failed over to the other. */
  connectionErrors: number;
  acceptedByVenue: Map<string, number>;
  /** Per occupancy venue, the count of its newest event (by event time) that was accepted. */
  newestOccupancy: Map<string, { ts: number; value: number }>;
  /** When each 202 arrived (ms since epoch), to time recovery after a fault. */
  acceptedAt: number[];
  /** Per accepted batch, ms from its first attempt to its 202. */
  batchWaits: number[];
}

export interface FleetOptions {
  urls: string[];
  tenants: FleetTenant[];
  batchSize: number;
  clients: number;
  /** A request still unanswered after this is abandoned (and counted as a timeout), then resent. */
  clientTimeoutMs: number;
  /** Tag that keeps this run's event ids apart from any other run's. */
  runTag: string;
  /** Offered load in events/s over the whole fleet; 0 sends as fast as the api answers. */
  rate?: number;
  /**
   * Send an Idempotency-Key per batch (default). Without, a resend relies on the event ids alone
   * (the sink keeps the first of each): no 409 while a dead instance's key is in flight.
   */
  idempotencyKeys?: boolean;
  /**
   * Distinct devices the sightings come from, over the whole fleet (each a recurring visitor of one
   * sightings venue: the devices are shared out between them, and each venue's requests go through
   * its share in turn); 0 or absent: every sighting is a device never seen before (the most visits
   * per sighting).
   */
  devices?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A locally administered MAC (first octet `prefix`) from five more bytes (each number's low 8 bits). */
const mac = (prefix: string, bytes: number[]) => `${prefix}:${bytes.map((b) => (b & 0xff).toString(16).padStart(2, '0')).join(':')}`;

export class Fleet {
  readonly stats: FleetStats = {
    batchesAccepted: 0,
    eventsAccepted: 0,
    refusals: {},
    violations: [],
    timeouts: 0,
    connectionErrors: 0,
    acceptedByVenue: new Map(),
    newestOccupancy: new Map(),
    acceptedAt: [],
    batchWaits: [],
  };
  private seq = 0;
  /** Requests built so far per sightings venue, and each one's share of the devices. */
  private readonly deviceTurns = new Map<FleetTenant, { sent: number; first: number; count: number }>();
  private target = 0;
  private running: Promise<void>[] = [];

  constructor(private readonly opts: FleetOptions) {}

  /** Sends until `events` more events are accepted (in whole batches) and `keepGoing` says stop, with `clients` concurrent senders. */
  async ingest(events: number, keepGoing: () => boolean = () => false): Promise<void> {
    this.target = this.stats.eventsAccepted + events;
    let queued = this.stats.eventsAccepted;
    const client = async (c: number) => {
      const perBatchMs = this.opts.rate ? (this.opts.batchSize / this.opts.rate) * this.opts.clients * 1000 : 0;
      while (queued < this.target || keepGoing()) {
        queued += this.opts.batchSize;
        const t0 = Date.now();
        await this.sendUntilAccepted(c);
        const wait = perBatchMs - (Date.now() - t0);
        if (wait > 0) await sleep(wait);
      }
    };
    this.running = Array.from({ length: this.opts.clients }, (_, c) => client(c));
    await Promise.all(this.running);
  }

  /** A sightings venue's share of the fleet's devices: `devices` split as evenly as it goes between them. */
  private deviceShare(tenant: FleetTenant): { sent: number; first: number; count: number } {
    let share = this.deviceTurns.get(tenant);
    if (!share) {
      const venues = this.opts.tenants.filter((t) => t.kind === 'devices');
      const slot = venues.indexOf(tenant);
      const first = Math.floor((slot * this.opts.devices!) / venues.length);
      const count = Math.floor(((slot + 1) * this.opts.devices!) / venues.length) - first;
      this.deviceTurns.set(tenant, (share = { sent: 0, first, count: Math.max(1, count) }));
    }
    return share;
  }

  private batch(): { tenant: FleetTenant; body: string; newest: { ts: number; value: number } | null } {
    const n = this.seq++;
    const tenant = this.opts.tenants[n % this.opts.tenants.length]!;
    const now = Date.now();
    let newest: { ts: number; value: number } | null = null;
    const turn = tenant.kind === 'devices' && this.opts.devices ? this.deviceShare(tenant) : undefined;
    const start = turn ? turn.sent++ * this.opts.batchSize : 0;
    const events = Array.from({ length: this.opts.batchSize }, (_, i) => {
      const ts = now - (this.opts.batchSize - i) * 10;
      const base = { event_id: `${this.opts.runTag}-${n}-${i}`, timestamp: new Date(ts).toISOString() };
      if (tenant.kind === 'occupancy') {
        const value = (n * 7 + i) % 250;
        newest = { ts, value };
        return { ...base, type: 'occupancy', payload: { space_id: 'spc_1', occupancy: value } };
      }
      const d = turn ? turn.first + ((start + i) % turn.count) : 0;
      const clientMac = this.opts.devices ? mac('06', [d >> 24, d >> 16, d >> 8, d, 0]) : mac('02', [n >> 16, n >> 8, n, i >> 8, i]);
      return { ...base, type: 'device_seen', payload: { clientMac, rssi: 30, radio: 'WiFi' } };
    });
    return {
      tenant,
      body: JSON.stringify({ venue_id: tenant.venueId, connector_type: tenant.kind === 'occupancy' ? 'density' : 'meraki', events }),
      newest,
    };
  }

  private async sendUntilAccepted(client: number): Promise<void> {
    const { tenant, body, newest } = this.batch();
    const idempotencyKey = randomUUID();
    let instance = client % this.opts.urls.length;
    const firstAttempt = Date.now();
    for (;;) {
      const url = this.opts.urls[instance]!;
      let res: Response;
      try {
        res = await fetch(`${url}/ingest`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            authorization: `Bearer ${tenant.key}`,
            ...(this.opts.idempotencyKeys === false ? {} : { 'idempotency-key': idempotencyKey }),
          },
          body,
          signal: AbortSignal.timeout(this.opts.clientTimeoutMs),
        });
      } catch (err) {
        if ((err as Error).name === 'TimeoutError') this.stats.timeouts++;
        else this.stats.connectionErrors++;
        instance = (instance + 1) % this.opts.urls.length;
        await sleep(200);
        continue;
      }
      const text = await res.text().catch(() => '');
      if (res.status === 202) {
        const answer = JSON.parse(text) as { accepted: number; rejected: number };
        if (answer.rejected > 0) this.stats.violations.push(`202 with ${answer.rejected} rejected events: ${text.slice(0, 200)}`);
        this.stats.batchesAccepted++;
        this.stats.eventsAccepted += answer.accepted;
        this.stats.acceptedByVenue.set(tenant.venueId, (this.stats.acceptedByVenue.get(tenant.venueId) ?? 0) + answer.accepted);
        this.stats.acceptedAt.push(Date.now());
        this.stats.batchWaits.push(Date.now() - firstAttempt);
        if (newest) {
          const had = this.stats.newestOccupancy.get(tenant.venueId);
          if (!had || newest.ts > had.ts) this.stats.newestOccupancy.set(tenant.venueId, newest);
        }
        return;
      }
      this.stats.refusals[res.status] = (this.stats.refusals[res.status] ?? 0) + 1;
      const retryAfter = Number(res.headers.get('retry-after'));
      if ((res.status === 503 || res.status === 409) && retryAfter > 0) {
        await sleep(Math.min(retryAfter * 1000, 1_000));
        continue;
      }
      this.stats.violations.push(
        `${res.status} without the contract (retry-after ${res.headers.get('retry-after')}): ${text.slice(0, 200)}`,
      );
      await sleep(500);
    }
  }
}

export interface StorageCheck {
  accepted: number;
  stored: number;
  distinct: number;
  duplicates: number;
  /** Accepted events not stored (per venue: accepted − distinct stored, when positive). */
  missing: number;
  /** Venues whose `events` rollup count differs from their raw row count. */
  rollupMismatches: string[];
}

/** Counts the raw table (and the `events` rollup) for the fleet's venues against what was accepted. */
export async function checkStorage(ch: Ch, stats: FleetStats): Promise<StorageCheck> {
  const venues = [...stats.acceptedByVenue.keys()];
  if (venues.length === 0) return { accepted: 0, stored: 0, distinct: 0, duplicates: 0, missing: 0, rollupMismatches: [] };
  const raw = await chRows<{ venue: string; n: string; d: string }>(
    ch,
    chsql`SELECT toString(venue_id) AS venue, count() AS n, uniqExact(event_id) AS d FROM events WHERE has(${venues}, toString(venue_id)) GROUP BY venue_id`,
  );
  const rolled = await chRows<{ venue: string; n: string }>(
    ch,
    chsql`SELECT toString(venue_id) AS venue, countMerge(v_count) AS n FROM telemetry_1m WHERE key = 'events' AND has(${venues}, toString(venue_id)) GROUP BY venue_id`,
  );
  const rolledBy = new Map(rolled.map((r) => [r.venue, Number(r.n)]));
  let stored = 0;
  let distinct = 0;
  let missing = 0;
  const rollupMismatches: string[] = [];
  const rawBy = new Map(raw.map((r) => [r.venue, r]));
  for (const venue of venues) {
    const r = rawBy.get(venue);
    const n = Number(r?.n ?? 0);
    const d = Number(r?.d ?? 0);
    stored += n;
    distinct += d;
    missing += Math.max(0, stats.acceptedByVenue.get(venue)! - d);
    if ((rolledBy.get(venue) ?? 0) !== n) rollupMismatches.push(`${venue}: raw ${n}, rollup ${rolledBy.get(venue) ?? 0}`);
  }
  return { accepted: stats.eventsAccepted, stored, distinct, duplicates: stored - distinct, missing, rollupMismatches };
}

/** Waits until every accepted event is stored (or the timeout), then checks; returns the check and how long the wait took. */
export async function settle(ch: Ch, stats: FleetStats, timeoutMs: number): Promise<{ check: StorageCheck; drainMs: number }> {
  const started = Date.now();
  let check = await checkStorage(ch, stats).catch(() => null);
  while ((!check || check.missing > 0 || check.rollupMismatches.length > 0) && Date.now() - started < timeoutMs) {
    await sleep(500);
    check = await checkStorage(ch, stats).catch(() => check);
  }
  return { check: check ?? (await checkStorage(ch, stats)), drainMs: Date.now() - started };
}
