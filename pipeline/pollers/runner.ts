import { createHash, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Db } from '../../postgres/client.js';
import { activeIntegrationIdsOfTypes } from '../../postgres/queries/integrations.js';
import { plainConfigs, recordPollFailure, releaseLeases, saveCursor, takeLeases } from '../../postgres/queries/pollers.js';
import type { ConnectorType } from '../../lib/events/vocabulary.js';
import type { Logger } from '../../lib/logger.js';
import type { Keyring } from '../../lib/secret-box.js';
import { backoffMs, every, jittered, sleep } from '../../lib/timers.js';
import { ingestBatch, MAX_EVENTS_PER_REQUEST, type IngestDeps } from '../../domain/ingest/ingest.js';
import { pseudonym } from '../../domain/ingest/pseudonyms.js';
import { reportSourceOutcome, sourceIntegration, type SourceIntegration } from '../../domain/integrations/sources.js';
import { httpsRequest, normalisePin, VendorError } from './http.js';
import type { PollContext, VendorPoller } from './vendor.js';
import { unifiPoller } from './unifi.js';
import { verkadaPoller } from './verkada.js';
import { arubaAlePoller } from './aruba-ale.js';

/** Every vendor poller, by connector type (one poller per type). */
export const VENDOR_POLLERS: Partial<Record<ConnectorType, VendorPoller>> = {
  unifi: unifiPoller as VendorPoller,
  verkada: verkadaPoller as VendorPoller,
  aruba: arubaAlePoller as VendorPoller,
};

export interface PollerRunnerOptions {
  db: Db;
  keyring: Keyring;
  /** Ingest's dependencies: every polled event goes through ingestBatch (validation, pseudonyms, quota, one publish path). */
  ingest: IngestDeps & { reportsTopic: string };
  log: Logger;
  /** This instance's name in poller_state.owner; unique per runner. */
  owner?: string;
  /** How often the active integrations are listed (default 30 s). */
  listIntervalMs?: number;
  /** Lease length (default 30 s) and how often leases are renewed and free ones taken (default 10 s). */
  leaseMs?: number;
  renewMs?: number;
  /** Per HTTP request (default 10 s). */
  requestTimeoutMs?: number;
  /** First backoff after a failure (default: the poll interval, at least 5 s … capped by maxBackoffMs) and its cap (default 5 min). */
  backoffBaseMs?: number;
  maxBackoffMs?: number;
  /** How long stop() lets polls in hand finish before aborting them (default 5 s). */
  stopGraceMs?: number;
  /** Poll interval per connector type, replacing the vendor's default (tests). */
  intervals?: Partial<Record<ConnectorType, number>>;
  /** The vendor pollers to run (default VENDOR_POLLERS). */
  vendors?: Partial<Record<ConnectorType, VendorPoller>>;
  /** CA certificates trusted instead of the system's for servers without a pinned certificate (tests). */
  ca?: string | Buffer | Array<string | Buffer>;
  /** Base URL overrides per connector type (Verkada: VERKADA_API_BASE_URL). */
  baseUrls?: Partial<Record<ConnectorType, string>>;
  now?: () => number;
}

export interface PollerRunnerStats {
  polls: number;
  failures: number;
  events: number;
}

export interface RunningPollers {
  owner: string;
  /** Integration ids this runner holds the lease of now. */
  owned(): string[];
  stats: PollerRunnerStats;
  /** Stops accepting work, lets polls in hand finish (aborting them after the grace), releases the leases. */
  stop(): Promise<void>;
}

interface Owned {
  id: string;
  connector: ConnectorType;
  vendor: VendorPoller;
  cursor: unknown;
  failures: number;
  timer?: NodeJS.Timeout;
  /** The poll in hand. */
  running?: Promise<void>;
  abort: AbortController;
  session?: { fingerprint: string; state: unknown };
  log: Logger;
  released: boolean;
}

const configFingerprint = (config: Record<string, unknown>): string =>
  createHash('sha256')
    .update(JSON.stringify(config, Object.keys(config).sort()))
    .digest('hex');

/**
 * Runs the vendor pollers of this pipeline instance: lists the active poll-type integrations,
 * takes the lease of those nobody holds (one owner per integration across instances), polls each
 * owned integration on its interval with jitter, backs off exponentially on failures, publishes
 * what it brings in through ingestBatch and only then advances the integration's cursor.
 */
export function startPollers(opts: PollerRunnerOptions): RunningPollers {
  const owner = opts.owner ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const vendors = opts.vendors ?? VENDOR_POLLERS;
  const types = Object.keys(vendors) as ConnectorType[];
  const listIntervalMs = opts.listIntervalMs ?? 30_000;
  const leaseMs = opts.leaseMs ?? 30_000;
  const renewMs = opts.renewMs ?? 10_000;
  const requestTimeoutMs = opts.requestTimeoutMs ?? 10_000;
  const maxBackoffMs = opts.maxBackoffMs ?? 300_000;
  const stopGraceMs = opts.stopGraceMs ?? 5_000;
  const now = opts.now ?? Date.now;
  const log = opts.log.child({ component: 'pollers', owner });
  const owned = new Map<string, Owned>();
  const stats: PollerRunnerStats = { polls: 0, failures: 0, events: 0 };
  const stopping = new AbortController();
  let candidates: Array<{ id: string; connector: ConnectorType }> = [];
  let listedAt = -Infinity;
  /** Set first thing in stop(): no lease round starts or takes anything after it. */
  let closing = false;

  const intervalOf = (o: Pick<Owned, 'connector' | 'vendor'>) => opts.intervals?.[o.connector] ?? o.vendor.intervalMs;

  /** The pause after `failures` failed polls in a row: from the poll interval (5 s to 60 s) doubling up to maxBackoffMs, jittered. */
  const backoffOf = (o: Owned, failures: number) =>
    jittered(backoffMs(failures, opts.backoffBaseMs ?? Math.max(5_000, Math.min(intervalOf(o), 60_000)), maxBackoffMs));

  const schedule = (o: Owned, delayMs: number) => {
    if (stopping.signal.aborted || o.released) return;
    clearTimeout(o.timer);
    o.timer = setTimeout(() => {
      o.timer = undefined;
      if (o.running || o.released || stopping.signal.aborted) return;
      o.running = pollOnce(o).finally(() => {
        o.running = undefined;
      });
    }, delayMs);
  };

  /** Stops polling an integration here (lease lost, integration gone or no longer polled). */
  const disown = (o: Owned, why: string) => {
    o.released = true;
    clearTimeout(o.timer);
    o.abort.abort();
    owned.delete(o.id);
    o.log.info({ why }, 'poller stopped for this integration');
  };

  /** Stops polling these here at once, then gives their leases up (fenced by owner: another instance's lease stays). */
  const drop = async (os: Owned[], why: string) => {
    for (const o of os) disown(o, why);
    if (os.length)
      await releaseLeases(
        opts.db,
        os.map((o) => o.id),
        owner,
      );
  };

  const failed = async (o: Owned, integration: SourceIntegration | undefined, err: unknown) => {
    const vendorError = err instanceof VendorError;
    const message = vendorError ? err.message : `poll failed here: ${(err as Error).message}`;
    stats.failures++;
    const failures = await recordPollFailure(opts.db, o.id, owner, message).catch((e: unknown) => {
      o.log.warn({ err: e }, 'could not record the poll failure');
      return o.failures + 1;
    });
    if (failures === undefined) return disown(o, 'lease lost');
    o.failures = failures;
    const delay = backoffOf(o, failures);
    o.log.warn({ err, failures, retryInMs: delay }, 'poll failed');
    // Only the vendor link's failures tell connector health something (ours, e.g. Kafka down, do not).
    if (vendorError && integration) {
      await reportSourceOutcome({ publisher: opts.ingest.publisher, reportsTopic: opts.ingest.reportsTopic, log: o.log }, integration, {
        link: 'poll',
        ok: false,
        error: message,
      });
    }
    schedule(o, delay);
  };

  async function pollOnce(o: Owned): Promise<void> {
    if (o.released || stopping.signal.aborted) return;
    stats.polls++;
    let integration: SourceIntegration | undefined;
    try {
      integration = await sourceIntegration(opts.db, opts.keyring, o.id);
      if (!integration || !o.vendor.polls(integration.config)) {
        return await drop([o], integration ? 'no longer polled' : 'integration gone or inactive').catch((err: unknown) =>
          o.log.warn({ err }, 'could not give the lease up; it lapses on its own'),
        );
      }
      const { config } = integration;
      const fingerprint = configFingerprint(config);
      if (o.session?.fingerprint !== fingerprint) o.session = { fingerprint, state: o.vendor.newSession() };
      const pin = typeof config.certificate_sha256 === 'string' ? normalisePin(config.certificate_sha256) : undefined;
      const key = opts.ingest.pseudonyms.keyFor(integration.operator.id);
      const ctx: PollContext = {
        integration,
        request: (req) => httpsRequest({ ...req, pin, ca: opts.ca, timeoutMs: requestTimeoutMs, signal: o.abort.signal }),
        idOf: (identifier) => pseudonym(key, identifier),
        baseUrl: opts.baseUrls?.[o.connector],
        now,
        log: o.log,
      };
      const result = await o.vendor.poll(ctx, o.session.state, o.cursor ?? undefined);
      if (o.released) return;
      // Publish first, then move the cursor: a crash in between repeats the publish, and the
      // events' deterministic ids make the repeat stored once.
      let accepted = 0;
      let rejected = 0;
      const chunks = Math.max(1, Math.ceil(result.events.length / MAX_EVENTS_PER_REQUEST));
      for (let i = 0; i < chunks; i++) {
        const events = result.events.slice(i * MAX_EVENTS_PER_REQUEST, (i + 1) * MAX_EVENTS_PER_REQUEST);
        const { result: r } = await ingestBatch(
          { ...opts.ingest, log: o.log },
          {
            operator: integration.operator,
            venueId: integration.venueId,
            connectorType: o.connector,
            events,
            source: { integrationId: o.id, link: 'poll' },
          },
          new Date(now()),
        );
        accepted += r.accepted;
        rejected += r.rejected;
        if (r.rejected > 0)
          o.log.warn(
            { rejected: r.rejected, reasons: [...new Set(r.errors.map((e) => e.reason))].slice(0, 5) },
            'polled events rejected by ingest',
          );
      }
      stats.events += accepted;
      if (!(await saveCursor(opts.db, o.id, owner, result.cursor))) return disown(o, 'lease lost before the cursor was written');
      o.cursor = result.cursor;
      o.failures = 0;
      o.log.debug({ accepted, rejected }, 'poll done');
      schedule(o, jittered(intervalOf(o)));
    } catch (err) {
      if (o.released) return;
      if (stopping.signal.aborted) return;
      await failed(o, integration, err);
    }
  }

  const own = (row: { integration_id: string; cursor: unknown; failures: number }, connector: ConnectorType) => {
    const vendor = vendors[connector]!;
    const o: Owned = {
      id: row.integration_id,
      connector,
      vendor,
      cursor: row.cursor ?? undefined,
      failures: row.failures,
      abort: new AbortController(),
      log: opts.log.child({ integrationId: row.integration_id, connector, poller: vendor.name }),
      released: false,
    };
    owned.set(o.id, o);
    o.log.info({ failures: o.failures }, 'poller took the integration');
    // Spread first polls over a few seconds; an integration still failing keeps its backoff.
    const first = o.failures > 0 ? backoffOf(o, o.failures) : Math.round(Math.random() * Math.min(2_000, intervalOf(o) / 2));
    schedule(o, first);
  };

  /** Which listed integrations this runner serves, from their plain config (one query a listing, no secret opened). */
  const list = async () => {
    const listed = await activeIntegrationIdsOfTypes(opts.db, types);
    const configs = await plainConfigs(
      opts.db,
      listed.map((l) => l.id),
    );
    candidates = listed
      .filter(({ id, connector_type }) => {
        const config = configs.get(id);
        return config !== undefined && vendors[connector_type]!.polls(config);
      })
      .map(({ id, connector_type }) => ({ id, connector: connector_type }));
    listedAt = now();
  };

  /** Ids leased by a round that finished after stop() began, not owned: released by stop(). */
  const strays = new Set<string>();

  const tick = async () => {
    if (closing) return;
    if (now() - listedAt >= listIntervalMs) await list();
    const wanted = new Map(candidates.map((c) => [c.id, c.connector]));
    await drop(
      [...owned.values()].filter((o) => !wanted.has(o.id)),
      'no longer an active polled integration',
    );
    if (closing) return;
    const held = await takeLeases(opts.db, [...wanted.keys()], owner, leaseMs);
    // Leases taken by a round that overlapped stop() are released with the others by stop().
    if (closing) {
      for (const h of held) if (!owned.has(h.integration_id)) strays.add(h.integration_id);
      return;
    }
    const heldIds = new Set(held.map((h) => h.integration_id));
    // Not renewed: another instance holds it, or it was deactivated since the list was read.
    const lost = [...owned.values()].filter((o) => !heldIds.has(o.id));
    // Owned before the release's await, so a stop() that begins during it finds them.
    for (const row of held) if (!owned.has(row.integration_id)) own(row, wanted.get(row.integration_id)!);
    await drop(lost, 'lease taken by another instance, or the integration deactivated');
  };

  const leaseRounds = every(renewMs, tick, {
    immediate: true,
    onError: (err) => log.warn({ err }, 'poller lease round failed; retried next round'),
  });
  log.info({ vendors: types }, 'pollers running');

  return {
    owner,
    owned: () => [...owned.keys()],
    stats,
    async stop() {
      if (closing) return;
      closing = true;
      // Polls in hand may finish within the grace (their cursor gets written); the rest is aborted.
      const inHand = () => [...owned.values()].map((o) => o.running).filter((p): p is Promise<void> => p !== undefined);
      await leaseRounds.stop();
      stopping.abort();
      for (const o of owned.values()) clearTimeout(o.timer);
      const grace = new AbortController();
      await Promise.race([Promise.allSettled(inHand()), sleep(stopGraceMs, grace.signal)]);
      grace.abort();
      for (const o of owned.values()) o.abort.abort();
      await Promise.allSettled(inHand());
      const ids = [...owned.keys(), ...strays];
      for (const o of owned.values()) o.released = true;
      owned.clear();
      await releaseLeases(opts.db, ids, owner).catch((err: unknown) =>
        log.warn({ err }, 'could not release the poller leases; they lapse by themselves'),
      );
      log.info({ released: ids.length }, 'pollers stopped');
    },
  };
}
