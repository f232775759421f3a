import type { Logger } from 'pino';
import type { ConnectorType } from '../../lib/events/vocabulary.js';
import { ApiError, StoppedError, type ApiClient, type IngestAnswer } from '../client.js';
import type { GeneratedEvent } from '../traffic/index.js';
import { squareLocation, type SimVenue } from '../venues.js';
import { FakeUnifiController } from './controller.js';
import { MAX_OBSERVATIONS } from './meraki.js';
import { HookSender, type DeliveryAnswer } from './sender.js';
import { newSecret, newValidator } from './sign.js';
import { NATIVE_CONNECTORS, translate } from './translate.js';
import type { Delivery, LinkConfig } from './types.js';

export { FakeUnifiController } from './controller.js';
export { HookSender } from './sender.js';
export { translate, NATIVE_CONNECTORS } from './translate.js';
export type { Delivery, LinkConfig, Translated, UnifiRecord } from './types.js';

/**
 * `--native`: the fleet's connectors reach the service the way the vendors do. Each integration
 * with a native link gets the config that link needs (fresh secrets every run: they are write-only
 * in the API, so the simulator registers its own), each stream's batches are translated into the
 * vendor's deliveries (`translate.ts`) and sent to `/hooks/<integration id>` by one courier per
 * stream, so integrations proceed in parallel, each within its own receiver rate limit, and UniFi
 * sightings are served by a fake controller the pipeline's poller logs in to.
 */

export interface NativeStats {
  /** Webhook deliveries answered 2xx. */
  deliveries: number;
  /** Deliveries the receiver refused as a whole (bad signature, not the vendor's format). */
  refused: number;
  /** Events the receivers accepted and rejected within the deliveries they took. */
  accepted: number;
  rejected: number;
  /** Parts the receivers deliberately did not store (the same Meraki client and minute twice in a post…). */
  ignored: number;
  /** UniFi: client records handed to the fake controller. */
  records?: number;
}

export interface NativeOptions {
  client: ApiClient;
  log: Logger;
  venues: SimVenue[];
  /** The service's front door (the receivers are at `<url>/hooks/<id>`). */
  url: string;
  /** Where the fake controller's certificate is kept (made once, reused). */
  certDir: string;
  stopping: () => boolean;
  controllerPort?: number;
  /** Batches a stream may have waiting behind the one in flight. */
  maxQueued?: number;
  /** Pause between the config updates and the first delivery (default CONFIG_SETTLE_MS; tests with fresh integrations: 0). */
  settleMs?: number;
}

/** What a stream's batch came to once delivered: the /ingest part's answer, and the native totals. */
export interface NativeOutcome {
  ingestEvents: GeneratedEvent[];
  ingestAnswer: IngestAnswer | undefined;
  native: { deliveries: number; refused: number; accepted: number; rejected: number; ignored: number; records: number };
}

/**
 * The receivers reuse an integration's config for up to 5 s (INTEGRATION_CACHE_TTL_MS in
 * domain/ingest/receivers): deliveries wait that long after the last update so none meets the
 * secrets of an earlier run.
 */
export const CONFIG_SETTLE_MS = 5_500;

/** Deliveries of one integration in flight at once. */
export const DELIVERY_CONCURRENCY = 4;

export class NativeLinks {
  readonly stats: Partial<Record<ConnectorType, NativeStats>> = {};
  /** The first few refusals, with the receiver's reason. */
  readonly refusals: Array<{ connector: ConnectorType; venue: string; reason: string }> = [];
  readonly sender: HookSender;
  private readonly links = new Map<string, LinkConfig>();
  private readonly couriers = new Map<string, Courier>();

  private constructor(
    private readonly opts: NativeOptions,
    readonly controller: FakeUnifiController | undefined,
  ) {
    this.sender = new HookSender({ url: opts.url, log: opts.log, stopping: opts.stopping });
  }

  /** Starts the fake controller (if a venue has UniFi), registers every native link's config, and checks Meraki's validator as Meraki does. */
  static async start(opts: NativeOptions): Promise<NativeLinks> {
    const needsController = opts.venues.some((v) => v.connectors.includes('unifi'));
    const controller = needsController
      ? await FakeUnifiController.start({
          certDir: opts.certDir,
          log: opts.log,
          ...(opts.controllerPort ? { port: opts.controllerPort } : {}),
        })
      : undefined;
    const links = new NativeLinks(opts, controller);
    try {
      await links.register();
    } catch (err) {
      await controller?.close();
      throw err;
    }
    return links;
  }

  /** Whether this connector's traffic goes through a vendor link in native mode. */
  routes(connector: ConnectorType): boolean {
    return NATIVE_CONNECTORS.includes(connector);
  }

  link(venue: SimVenue, connector: ConnectorType): LinkConfig | undefined {
    const id = venue.integrations[connector];
    return id ? this.links.get(id) : undefined;
  }

  /**
   * How many of a live stream's buffered events are ready to go: Meraki posts once a minute (per AP
   * in v2, per network in v3), so a minute still under way is held back (everything else goes as
   * it comes).
   */
  ready(venue: SimVenue, connector: ConnectorType, buffer: GeneratedEvent[], generatedUntil: number): number {
    if (connector !== 'meraki' || !this.link(venue, connector)) return buffer.length;
    const minute = Math.floor(generatedUntil / 60_000) * 60_000;
    let n = 0;
    while (n < buffer.length && buffer[n]!.ts < minute) n++;
    return n;
  }

  /** A stream has batches queued or in flight. */
  busy(streamId: string): boolean {
    return (this.couriers.get(streamId)?.queued ?? 0) > 0;
  }

  /**
   * Queues a stream's batch for delivery (waits only while the stream already has `maxQueued`
   * batches waiting); `done` runs once every part of it was delivered, in stream order.
   */
  async enqueue(
    streamId: string,
    venue: SimVenue,
    connector: ConnectorType,
    events: GeneratedEvent[],
    liveFrom: number,
    done: (o: NativeOutcome) => void,
  ): Promise<void> {
    let courier = this.couriers.get(streamId);
    if (!courier) this.couriers.set(streamId, (courier = new Courier()));
    await courier.push(async () => done(await this.deliverBatch(venue, connector, events, liveFrom)), this.opts.maxQueued ?? 2);
  }

  /** Waits for every queued batch; rethrows a fatal error (a stop is not one). */
  async drain(): Promise<void> {
    for (const c of this.couriers.values()) await c.drain();
  }

  /**
   * At the end of a run: gives the poller up to `waitMs` to fetch the UniFi records not served yet
   * (it polls once a minute), then stops the controller.
   */
  async close(waitMs: number): Promise<void> {
    if (!this.controller) return;
    const pending = this.controller.pending();
    if (pending > 0 && waitMs > 0 && !this.opts.stopping()) {
      this.opts.log.info(
        { records: pending },
        `waiting up to ${Math.round(waitMs / 1000)} s for the UniFi poller to fetch the last records`,
      );
      const until = Date.now() + waitMs;
      let all = false;
      while (!all && Date.now() < until && !this.opts.stopping()) {
        all = await this.controller.waitServed(Math.min(30_000, until - Date.now()), this.opts.stopping);
        if (!all && Date.now() < until && !this.opts.stopping())
          this.opts.log.info({ records: this.controller.pending() }, 'still waiting for the UniFi poller (Ctrl-C to stop now)');
      }
      if (!all)
        this.opts.log.warn(
          { records: this.controller.pending() },
          'UniFi records the poller has not fetched are dropped (is the pipeline running its pollers?); the state file counts them as sent',
        );
    }
    await this.controller.close();
  }

  /** `meraki 12 posts (0 refused) 3,402/0 · unifi 1,204 records, 1,100 served in 3 polls`. */
  describe(): string {
    const n = (x: number) => x.toLocaleString('en-US');
    const parts = Object.entries(this.stats).map(([c, s]) => {
      if (c === 'unifi') {
        const ctl = this.controller?.stats;
        return `unifi ${n(s.records ?? 0)} records, ${n(ctl?.served ?? 0)} served in ${n(ctl?.polls ?? 0)} polls`;
      }
      return `${c} ${n(s.deliveries)} ${c === 'meraki' ? 'posts' : 'webhooks'} (${n(s.refused)} refused) ${n(s.accepted)}/${n(s.rejected)}${s.ignored ? ` (${n(s.ignored)} ignored)` : ''}`;
    });
    const left = [...new Set(this.opts.venues.flatMap((v) => v.connectors.filter((c) => !this.routes(c))))];
    return `native: ${parts.join(' · ') || '-'}${left.length ? ` (${left.join(', ')}: /ingest only, no receiver)` : ''}`;
  }

  private async deliverBatch(
    venue: SimVenue,
    connector: ConnectorType,
    events: GeneratedEvent[],
    liveFrom: number,
  ): Promise<NativeOutcome> {
    const link = this.link(venue, connector);
    const out: NativeOutcome = {
      ingestEvents: events,
      ingestAnswer: undefined,
      native: { deliveries: 0, refused: 0, accepted: 0, rejected: 0, ignored: 0, records: 0 },
    };
    if (!link) {
      out.ingestAnswer = events.length
        ? await this.opts.client.ingest(
            venue.id,
            connector,
            events.map((e) => e.event),
          )
        : undefined;
      return out;
    }
    const t = translate(connector, events, { venue, link, liveFrom });
    const stats = (this.stats[connector] ??= { deliveries: 0, refused: 0, accepted: 0, rejected: 0, ignored: 0 });
    if (t.records?.length) {
      this.controller?.add(String(link.config.site), t.records);
      stats.records = (stats.records ?? 0) + t.records.length;
      out.native.records += t.records.length;
    }
    const deliverOne = async (d: Delivery) => {
      const answer: DeliveryAnswer = await this.sender.deliver(d);
      if (answer.refused !== undefined) {
        stats.refused++;
        out.native.refused++;
        if (this.refusals.length < 20) this.refusals.push({ connector, venue: venue.key, reason: `${d.kind}: ${answer.refused}` });
        if (stats.refused <= 3) this.opts.log.warn({ connector, venue: venue.key, kind: d.kind }, `delivery refused: ${answer.refused}`);
        return;
      }
      stats.deliveries++;
      stats.accepted += answer.accepted;
      stats.rejected += answer.rejected;
      stats.ignored += answer.ignored;
      out.native.deliveries++;
      out.native.accepted += answer.accepted;
      out.native.rejected += answer.rejected;
      out.native.ignored += answer.ignored;
    };
    // A few deliveries of the integration in flight at once, as vendors deliver; the rate limit is shared (sender.ts).
    let next = 0;
    let failure: unknown;
    const worker = async () => {
      while (failure === undefined && next < t.deliveries.length) {
        const d = t.deliveries[next++]!;
        try {
          await deliverOne(d);
        } catch (err) {
          failure ??= err;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(DELIVERY_CONCURRENCY, t.deliveries.length) }, worker));
    if (failure !== undefined) throw failure;
    // What has no vendor form goes last, so a stop part-way leaves nothing on /ingest to be sent twice.
    out.ingestEvents = t.ingest;
    if (t.ingest.length > 0)
      out.ingestAnswer = await this.opts.client.ingest(
        venue.id,
        connector,
        t.ingest.map((e) => e.event),
      );
    return out;
  }

  private async register(): Promise<void> {
    const { client, log, venues } = this.opts;
    let merakiSeen = 0;
    const meraki: Array<{ venue: SimVenue; link: LinkConfig }> = [];
    for (const venue of venues) {
      for (const connector of venue.connectors) {
        const integrationId = venue.integrations[connector];
        if (!integrationId || !this.routes(connector)) continue;
        const path = `/api/venues/${venue.id}/integrations/${integrationId}`;
        const current = await client.call<{ config: Record<string, unknown> }>('GET', path);
        const fields = this.nativeFields(venue, connector, integrationId);
        const config = { ...current.body.config, ...fields };
        await client.call('PUT', path, { config });
        const link: LinkConfig = { integrationId, connector, config };
        if (connector === 'meraki') link.merakiVersion = merakiSeen++ % 2 === 0 ? 2 : 3;
        if (connector === 'unifi') this.controller!.addAccount(String(config.username), String(config.password), String(config.site));
        this.links.set(integrationId, link);
        if (connector === 'meraki') meraki.push({ venue, link });
      }
    }
    if (this.links.size > 0) await new Promise((r) => setTimeout(r, this.opts.settleMs ?? CONFIG_SETTLE_MS));
    for (const m of meraki) await this.checkValidator(m.venue, m.link);
    const left = [...new Set(venues.flatMap((v) => v.connectors.filter((c) => !this.routes(c))))];
    log.info(
      `native links: ${[...this.links.values()].map((l) => `${venues.find((v) => v.integrations[l.connector] === l.integrationId)?.key}/${l.connector}${l.merakiVersion ? ` (v${l.merakiVersion})` : ''}`).join(', ')}` +
        (left.length ? `; ${left.join(', ')} stay on /ingest (no receiver in the service)` : '') +
        (this.controller ? `; fake UniFi controller at ${this.controller.url}` : ''),
    );
  }

  private nativeFields(venue: SimVenue, connector: ConnectorType, integrationId: string): Record<string, unknown> {
    switch (connector) {
      case 'meraki':
        return { webhook_secret: newSecret(), validator: newValidator() };
      case 'square':
        return {
          webhook_signature_key: newSecret(),
          notification_url: notificationUrl(this.opts.url, integrationId),
          location_id: squareLocation(venue),
        };
      case 'density':
        return { webhook_header_name: 'X-Density-Token', webhook_header_value: newSecret() };
      case 'verkada':
        return { webhook_secret: newSecret() };
      case 'unifi':
        return {
          controller_url: this.controller!.url,
          certificate_sha256: this.controller!.certificateSha256,
          username: `sim-readonly-${venue.key}`,
          password: newSecret(),
          site: `sim-${venue.key}`,
          polling: true,
        };
      default:
        return {};
    }
  }

  /** Meraki's own check before it posts: `GET` the receiver, expect the validator as the body. */
  private async checkValidator(venue: SimVenue, link: LinkConfig): Promise<void> {
    const res = await fetch(`${this.opts.url}/hooks/${link.integrationId}`, { signal: AbortSignal.timeout(10_000) });
    const body = (await res.text()).trim();
    if (res.status === 404)
      throw new ApiError(404, body, `GET /hooks/${link.integrationId} (no webhook receiver: is the service older than the native links?)`);
    if (res.status !== 200 || body !== link.config.validator) {
      this.opts.log.warn(
        { venue: venue.key, status: res.status },
        "Meraki's validator check failed: the receiver did not answer the validator",
      );
    }
  }
}

/**
 * Square posts only to https URLs and signs the URL it posts to, and the integration's
 * notification_url must be https. Behind a TLS-terminating proxy that is the https spelling of the
 * front door's address, which is what is registered (and signed) even when the simulator reaches
 * the receiver over plain http locally.
 */
export function notificationUrl(frontDoor: string, integrationId: string): string {
  const u = new URL(`${frontDoor.replace(/\/$/, '')}/hooks/${integrationId}`);
  if (u.protocol === 'http:') {
    u.protocol = 'https:';
  }
  return u.toString();
}

/** One stream's batches, delivered one after another in order. */
class Courier {
  queued = 0;
  private chain: Promise<void> = Promise.resolve();
  private failure: unknown;
  private stopped = false;
  private readonly waiters: Array<() => void> = [];

  async push(job: () => Promise<void>, maxQueued: number): Promise<void> {
    this.throwIfFailed();
    while (this.queued > maxQueued) await new Promise<void>((r) => this.waiters.push(r));
    this.throwIfFailed();
    if (this.stopped) return;
    this.queued++;
    this.chain = this.chain.then(async () => {
      try {
        if (!this.stopped && this.failure === undefined) await job();
      } catch (err) {
        if (err instanceof StoppedError) this.stopped = true;
        else this.failure ??= err;
      } finally {
        this.queued--;
        for (const w of this.waiters.splice(0)) w();
      }
    });
  }

  /** Once everything queued is done or dropped: a stop ends here (a later run starts afresh). */
  async drain(): Promise<void> {
    await this.chain;
    if (this.queued === 0) this.stopped = false;
    this.throwIfFailed();
  }

  private throwIfFailed(): void {
    if (this.failure !== undefined) throw this.failure;
  }
}

export { MAX_OBSERVATIONS };
