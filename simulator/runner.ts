import type { Logger } from 'pino';
import type { ConnectorType } from '../lib/events/vocabulary.js';
import { StoppedError, type ApiClient, type IngestAnswer } from './client.js';
import type { TrafficState } from './model.js';
import { HOUR } from './time.js';
import { generate, type GeneratedEvent } from './traffic/index.js';
import type { SimVenue } from './venues.js';
import type { NativeLinks, NativeOutcome, NativeStats } from './native/index.js';

/**
 * Drives the traffic: history first (one venue and connector per request, batches of up to 1,000
 * events, as the API requires), then live until stopped. Each stream (venue × connector) keeps how
 * far it has been sent, so a stopped run resumes without sending anything twice.
 */

export const MAX_BATCH = 1000;

export interface SentBatch {
  venue: SimVenue;
  connector: ConnectorType;
  events: GeneratedEvent[];
  answer: IngestAnswer;
  /** Native mode: the part of the batch delivered through the vendor link (`answer` then covers the rest, sent to /ingest). */
  native?: NativeOutcome['native'];
}

export interface StreamStats {
  sent: number;
  accepted: number;
  rejected: number;
  /** Rejections of events made malformed on purpose (faults). */
  deliberate: number;
}

export interface RunStats {
  batches: number;
  byConnector: Partial<Record<ConnectorType, StreamStats>>;
  /** Rejections of events that were meant to be good, with the first few reasons. */
  unexpected: Array<{ connector: ConnectorType; venue: string; reason: string }>;
  /** Native mode: deliveries through the vendor links per connector. */
  native?: Partial<Record<ConnectorType, NativeStats>>;
}

export interface RunOptions {
  client: ApiClient;
  venues: SimVenue[];
  traffic: TrafficState;
  log: Logger;
  /** "Now" when the run starts: history ends and live traffic begins here. */
  start: number;
  /** First instant of history to write (omit for no backfill). */
  backfillFrom?: number;
  /** Per stream (`venueKey/connector`): sent up to here already (a previous run). */
  sentUntil?: Record<string, number>;
  /** Go on live after the backfill, until stopped or for `liveDurationMs` (counted from when live traffic begins). */
  live: boolean;
  liveDurationMs?: number;
  stopping: () => boolean;
  now?: () => number;
  tickMs?: number;
  /** Live: how long a stream gathers events before sending; default keeps all streams under the 100/min ingest limit. */
  flushMs?: number;
  progressEveryMs?: number;
  onBatch?: (batch: SentBatch) => void;
  /** Called after each batch with the streams' progress (to save the state file). */
  onProgress?: (sentUntil: Record<string, number>) => void;
  /** `--native`: connectors with a vendor link send through it (docs/simulator.md, "Native mode"). */
  native?: NativeLinks;
}

interface Stream {
  id: string;
  venue: SimVenue;
  connector: ConnectorType;
  /** Events generated up to here (exclusive). */
  generated: number;
  buffer: GeneratedEvent[];
  lastFlush: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function runSimulation(opts: RunOptions): Promise<RunStats> {
  const { client, log, traffic } = opts;
  const clock = opts.now ?? Date.now;
  const stats: RunStats = { batches: 0, byConnector: {}, unexpected: [], ...(opts.native ? { native: opts.native.stats } : {}) };
  const native = opts.native;
  const sentUntil: Record<string, number> = { ...opts.sentUntil };
  const streams: Stream[] = opts.venues.flatMap((venue) =>
    venue.connectors.map((connector) => {
      const id = `${venue.key}/${connector}`;
      const from = Math.max(opts.backfillFrom ?? opts.start, sentUntil[id] ?? -Infinity);
      return { id, venue, connector, generated: from, buffer: [], lastFlush: 0 };
    }),
  );
  const progress = new Progress(log, stats, opts.progressEveryMs ?? 10_000, clock, native);

  /** Sends the first `n` buffered events of a stream; false once the run stops. */
  const send = async (s: Stream, n: number): Promise<boolean> => {
    if (native?.routes(s.connector)) return sendNative(s, n);
    const events = s.buffer.slice(0, n);
    let answer: IngestAnswer;
    try {
      answer = await client.ingest(
        s.venue.id,
        s.connector,
        events.map((e) => e.event),
      );
    } catch (err) {
      if (err instanceof StoppedError) {
        log.warn({ stream: s.id, events: events.length }, 'stopped before this batch was accepted; the next run with --backfill sends it');
        return false;
      }
      throw err;
    }
    s.buffer.splice(0, n);
    s.lastFlush = clock();
    record(stats, s, events, answer);
    sentUntil[s.id] = s.buffer[0]?.ts ?? s.generated;
    opts.onBatch?.({ venue: s.venue, connector: s.connector, events, answer });
    opts.onProgress?.({ ...sentUntil });
    return true;
  };

  /**
   * Native mode: the batch is queued for the stream's courier (vendor deliveries, then the rest on
   * /ingest) and the stream goes on; its progress is recorded once the courier has delivered it.
   */
  const sendNative = async (s: Stream, n: number): Promise<boolean> => {
    const events = s.buffer.splice(0, n);
    const resumeAt = s.buffer[0]?.ts ?? s.generated;
    s.lastFlush = clock();
    await native!.enqueue(s.id, s.venue, s.connector, events, opts.start, (o) => {
      if (o.ingestAnswer) record(stats, s, o.ingestEvents, o.ingestAnswer);
      else stats.batches++;
      sentUntil[s.id] = Math.max(sentUntil[s.id] ?? -Infinity, resumeAt);
      const answer = o.ingestAnswer ?? { accepted: 0, rejected: 0, errors: [] };
      opts.onBatch?.({ venue: s.venue, connector: s.connector, events, answer, native: o.native });
      opts.onProgress?.({ ...sentUntil });
    });
    return !opts.stopping();
  };
  /** Live: how many buffered events may go now (a Meraki minute under way waits for its end). */
  const ready = (s: Stream): number =>
    native?.routes(s.connector) ? native.ready(s.venue, s.connector, s.buffer, s.generated) : s.buffer.length;
  /** Nothing of the stream is waiting: its position may move to what was generated (a native batch dropped by a stop must not be skipped). */
  const idle = (s: Stream): boolean => s.buffer.length === 0 && (!native?.routes(s.connector) || (!native.busy(s.id) && !opts.stopping()));

  // History, in hour-long windows, each stream cut into full batches as it goes.
  if (opts.backfillFrom !== undefined) {
    const total = opts.start - opts.backfillFrom;
    log.info(
      { from: new Date(opts.backfillFrom).toISOString(), to: new Date(opts.start).toISOString(), streams: streams.length },
      'backfill starting',
    );
    for (let t = opts.backfillFrom; t < opts.start && !opts.stopping(); t += HOUR) {
      const end = Math.min(opts.start, t + HOUR);
      for (const s of streams) {
        if (s.generated >= end) continue;
        s.buffer.push(...generate(s.connector, { from: s.generated, to: end }, s.venue, traffic));
        s.generated = end;
        while (s.buffer.length >= MAX_BATCH && !opts.stopping()) if (!(await send(s, MAX_BATCH))) return await finish();
      }
      traffic.prune(t - 2 * 24 * HOUR);
      progress.maybe(`backfill ${Math.round(((end - opts.backfillFrom) / total) * 100)}%`);
    }
    for (const s of streams) {
      while (s.buffer.length > 0 && !opts.stopping()) if (!(await send(s, Math.min(MAX_BATCH, s.buffer.length)))) return await finish();
    }
    if (native) {
      // The couriers may still be delivering (within the receivers' rate limits): keep reporting.
      const drained = native.drain().then(() => true);
      while (!(await Promise.race([drained, sleep(1000).then(() => false)]))) progress.maybe('backfill delivering');
    }
    if (!opts.stopping()) progress.line('backfill done');
  }
  if (!opts.live || opts.stopping()) return await finish();

  // Live: generate up to now every tick; each stream sends when its batch is full or old enough.
  const flushMs = opts.flushMs ?? Math.max(10_000, Math.ceil((streams.length * 60_000) / 80));
  const tickMs = opts.tickMs ?? 5_000;
  const until = opts.liveDurationMs === undefined ? undefined : clock() + opts.liveDurationMs;
  streams.forEach((s, i) => {
    s.generated = Math.max(s.generated, opts.start);
    s.lastFlush = clock() - flushMs + Math.round(((i + 1) * flushMs) / streams.length);
  });
  log.info(
    { streams: streams.length, flushEverySeconds: flushMs / 1000, until: until ? new Date(until).toISOString() : 'Ctrl-C' },
    'live traffic',
  );
  for (;;) {
    const now = clock();
    const ending = until !== undefined && now >= until;
    const to = ending ? until : now;
    for (const s of streams) {
      if (opts.stopping()) break;
      if (to > s.generated) {
        s.buffer.push(...generate(s.connector, { from: s.generated, to }, s.venue, traffic));
        s.generated = to;
      }
      while (s.buffer.length > 0 && !opts.stopping() && (ending || s.buffer.length >= MAX_BATCH || clock() - s.lastFlush >= flushMs)) {
        const n = Math.min(MAX_BATCH, ending ? s.buffer.length : ready(s));
        if (n === 0) break;
        if (!(await send(s, n))) return await finish();
        if (!ending && s.buffer.length < MAX_BATCH) break;
      }
      if (idle(s)) sentUntil[s.id] = s.generated;
    }
    if (ending || opts.stopping()) break;
    traffic.prune(now - 2 * 24 * HOUR);
    progress.maybe('live');
    await sleepUnless(tickMs, opts.stopping);
  }
  return await finish();

  async function finish(): Promise<RunStats> {
    // Native: what the couriers hold is delivered (or dropped at once if the run is stopping).
    await native?.drain();
    const unsent = streams.reduce((n, s) => n + s.buffer.length, 0);
    if (unsent > 0) log.info({ events: unsent }, 'events generated but not sent before the stop (a later --backfill run sends them)');
    opts.onProgress?.({ ...sentUntil });
    progress.line(opts.stopping() ? 'stopped' : 'finished');
    return stats;
  }
}

async function sleepUnless(ms: number, stopping: () => boolean): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end && !stopping()) await sleep(Math.min(200, end - Date.now()));
}

function record(stats: RunStats, s: Stream, events: GeneratedEvent[], answer: IngestAnswer): void {
  stats.batches++;
  const c = (stats.byConnector[s.connector] ??= { sent: 0, accepted: 0, rejected: 0, deliberate: 0 });
  c.sent += events.length;
  c.accepted += answer.accepted;
  c.rejected += answer.rejected;
  for (const e of answer.errors) {
    if (events[e.index]?.malformed) c.deliberate++;
    else if (stats.unexpected.length < 20) stats.unexpected.push({ connector: s.connector, venue: s.venue.key, reason: e.reason });
  }
}

/** A short progress line now and then: events accepted and rejected per connector. */
class Progress {
  private last = 0;

  constructor(
    private readonly log: Logger,
    private readonly stats: RunStats,
    private readonly everyMs: number,
    private readonly clock: () => number,
    private readonly native?: NativeLinks,
  ) {}

  maybe(phase: string): void {
    if (this.clock() - this.last >= this.everyMs) this.line(phase);
  }

  line(phase: string): void {
    this.last = this.clock();
    const n = (x: number) => x.toLocaleString('en-US');
    const parts = Object.entries(this.stats.byConnector).map(([c, s]) => `${c} ${n(s.accepted)}/${n(s.rejected)}`);
    const total = Object.values(this.stats.byConnector).reduce(
      (a, s) => ({ acc: a.acc + s.accepted, rej: a.rej + s.rejected, del: a.del + s.deliberate }),
      { acc: 0, rej: 0, del: 0 },
    );
    this.log.info(
      `${phase} · ${n(total.acc)} accepted, ${n(total.rej)} rejected (${n(total.del)} on purpose) in ${n(this.stats.batches)} batches · accepted/rejected ${parts.join(' ') || '-'}` +
        (this.native ? ` · ${this.native.describe()}` : ''),
    );
  }
}
