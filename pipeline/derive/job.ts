import type pg from 'pg';
import { withSettings, type Ch } from '../../clickhouse/client.js';
import {
  allEventsAsMarks,
  dropOldMarks,
  insertCarriedMarks,
  marksSince,
  progressCursor,
  saveProgress,
  serverNow,
} from '../../clickhouse/queries/derive.js';
import { BACKGROUND_SETTINGS } from '../../domain/limits/query-limits.js';
import type { Logger } from '../../lib/logger.js';
import { every } from '../../lib/timers.js';
import type { Db } from '../../postgres/client.js';
import { byVenue, carriedMarks, deriveContexts, markedSpan, type VenueMarks } from './marks.js';
import { periodsBetween, type Period } from './periods.js';
import type { VenueDeriveContext } from './context.js';
import { recomputePeriod } from './recompute.js';
import { runFairly } from './schedule.js';
import { RoundWrites } from './writes.js';

/**
 * The derive job (docs/processors.md#derived-from-the-raw-table): every `intervalMs` it reads the
 * marks that inserts into the raw table left since its last round, and recomputes the visits and
 * the occupancy history of every venue period they touched from the raw events. A late event, a
 * backfill of last week or a re-delivery is reflected the same way as an event on time: the answer
 * is a function of the stored events alone. One pipeline process at a time runs it (a Postgres
 * advisory lock); the others stand by and take over when it goes.
 */

export interface DeriveStats {
  rounds: number;
  failures: number;
  periods: number;
  rowsWritten: number;
  /** Venue periods whose visits (new sightings) and whose occupancy history (new door flows) were recomputed. */
  visitPeriods: number;
  occupancyPeriods: number;
  /** Venue periods rounds left for the next one (their round ran out of time), in all and in the last round. */
  carriedPeriods: number;
  backlogPeriods: number;
  /** How long the last successful round took. */
  lastRoundMs: number;
  /** How far behind the last successful round left the history, seconds: the cursor's age, or while rounds carry periods over, the time since the first of them began. */
  lagSeconds: number;
  leading: boolean;
}

/** The counts of a job that has run no round. */
export const noDeriveStats = (): DeriveStats => ({
  rounds: 0,
  failures: 0,
  periods: 0,
  rowsWritten: 0,
  visitPeriods: 0,
  occupancyPeriods: 0,
  carriedPeriods: 0,
  backlogPeriods: 0,
  lastRoundMs: 0,
  lagSeconds: 0,
  leading: false,
});

export interface DeriveJobOptions {
  ch: Ch;
  db: Db;
  log: Logger;
  intervalMs: number;
  /** A round starts no more periods after this long, but each operator's first (schedule.ts); the rest carry over. Unbounded when absent. */
  roundBudgetMs?: number;
  /** The progress row's name (tests run several jobs on one database). */
  name?: string;
}

export interface RunningDerive {
  readonly stats: DeriveStats;
  /** One round now (tests); resolves when it is done. */
  runOnce(): Promise<void>;
  stop(): Promise<void>;
}

/** Marks are read again for this long after the cursor: an insert's marks become visible when the insert commits, a little after their time. */
export const MARK_OVERLAP_S = 30;
/** Marks older than this behind the cursor are dropped (by day partition). */
const MARK_KEEP_S = 2 * 86_400;
const LOCK_KEY = 0x64657276; // 'derv'
/** The pause after a round that carried periods over. */
const CARRIED_PAUSE_MS = 1_000;

interface Work {
  marks: VenueMarks;
  venue: VenueDeriveContext;
  period: Period;
}

export function startDeriveJob(opts: DeriveJobOptions): RunningDerive {
  const name = opts.name ?? 'derive';
  const ch = withSettings(opts.ch, BACKGROUND_SETTINGS);
  const log = opts.log.child({ component: 'derive' });
  const stats = noDeriveStats();
  let lock: pg.PoolClient | undefined;
  let running: Promise<void> = Promise.resolve();
  let stopping = false;
  /** Marks of the overlap already recomputed (id → insert time): each is handled once while this process leads. */
  const seen = new Map<string, number>();
  /** The start of the first round in a row that carried periods over. */
  let behindSince: number | undefined;

  const lead = async (): Promise<boolean> => {
    if (lock) return true;
    const client = await opts.db.connect();
    try {
      const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [LOCK_KEY]);
      if (!rows[0]?.ok) {
        client.release();
        return false;
      }
    } catch (err) {
      client.release(err as Error);
      throw err;
    }
    // A broken connection loses the lock: give it up and try again next round.
    client.on('error', (err) => {
      log.warn({ err }, 'derive: lost the leader connection; another process may take over');
      if (lock === client) lock = undefined;
    });
    lock = client;
    log.info('derive: leading (recomputes visits and occupancy history from the raw table)');
    return true;
  };

  const round = async () => {
    stats.leading = await lead();
    if (!stats.leading) return;
    const started = Date.now();
    const cursor = await progressCursor(ch, name);
    const now = await serverNow(ch);
    // The first run rebuilds from the events. Marks visible before it reads them stand for events it
    // reads (a view's rows are written after the raw table's part), so the next round, which reads
    // the marks of the overlap, leaves them: it recomputed every period of a fresh deployment twice.
    const covered = cursor === undefined ? await marksSince(ch, now - MARK_OVERLAP_S) : [];
    const fresh = (cursor === undefined ? await allEventsAsMarks(ch) : await marksSince(ch, cursor - MARK_OVERLAP_S)).filter(
      (m) => !seen.has(m.mark_id),
    );
    const marks = byVenue(fresh);
    const venues = await deriveContexts(opts.db, marks);
    const queues = new Map<string, Work[]>();
    for (const m of marks) {
      const v = venues.get(m.venue_id);
      // A deleted venue keeps its history as it was; events of another operator's venue never count.
      if (!v || v.operatorId !== m.operator_id) continue;
      let q = queues.get(m.operator_id);
      if (!q) queues.set(m.operator_id, (q = []));
      for (const period of periodsBetween(...markedSpan(m.ranges), v.resetHour, v.timezone)) q.push({ marks: m, venue: v, period });
    }
    // Newest periods first: today's figures before a backfill's.
    for (const q of queues.values()) q.sort((a, b) => b.period.start - a.period.start);
    const done = { periods: 0, rows: 0, visits: 0, occupancy: 0 };
    const writes = new RoundWrites(ch);
    const left = await runFairly(
      queues,
      opts.roundBudgetMs ?? Infinity,
      async ({ marks: m, venue: v, period: p }) => {
        const { visits, occupancy } = await recomputePeriod(ch, v, p, m.ranges, writes);
        await writes.flushIfFull();
        if (visits === undefined && occupancy === undefined) return;
        done.periods++;
        done.rows += (visits ?? 0) + (occupancy ?? 0);
        if (visits !== undefined) done.visits++;
        if (occupancy !== undefined) done.occupancy++;
      },
      // Stopping: the period in hand finishes, the rest is carried over, so a round under load does not outlast the shutdown budget.
      { stopped: () => stopping },
    );
    // Written before the cursor moves past the marks they stand for: a crash between the two
    // recomputes those periods twice (idempotent), never not at all.
    await writes.flush();
    await insertCarriedMarks(ch, carriedMarks(left), now);
    await saveProgress(ch, name, now, Date.now());
    for (const m of [...fresh, ...covered]) seen.set(m.mark_id, m.inserted_at);
    for (const [id, at] of seen) if (at < now - 2 * MARK_OVERLAP_S) seen.delete(id);
    if (cursor === undefined || Math.floor(cursor / 3600) !== Math.floor(now / 3600)) await dropOldMarks(ch, now - MARK_KEEP_S);
    stats.rounds++;
    stats.periods += done.periods;
    stats.rowsWritten += done.rows;
    stats.visitPeriods += done.visits;
    stats.occupancyPeriods += done.occupancy;
    stats.carriedPeriods += left.length;
    stats.backlogPeriods = left.length;
    behindSince = left.length > 0 ? (behindSince ?? now) : undefined;
    stats.lastRoundMs = Date.now() - started;
    stats.lagSeconds = Math.max(0, Math.round(Date.now() / 1000) - (behindSince ?? now));
    if (left.length > 0)
      log.info(
        { carried: left.length, operators: new Set(left.map((w) => w.venue.operatorId)).size, ms: stats.lastRoundMs },
        stopping
          ? 'derive: stopping; periods carried over to the next round'
          : 'derive: round budget spent; periods carried over to the next round, which starts a second later',
      );
    if (cursor === undefined)
      log.info({ venues: marks.length, periods: done.periods, rows: done.rows }, 'derive: first run rebuilt every stored venue period');
  };

  const runOnce = () => {
    running = running.then(round).catch((err: unknown) => {
      stats.failures++;
      log.warn({ err }, 'derive: round failed; its marks are read again next round');
    });
    return running;
  };

  // runOnce reports its own failures; `every` starts the next round an interval after one ends.
  const rounds = every(opts.intervalMs, runOnce, {
    onError: () => undefined,
    // A second, not none: the next round's cursor must be a later second than the marks it carried, or deriveCaughtUp could not tell them handled.
    pause: () => (stats.backlogPeriods > 0 ? CARRIED_PAUSE_MS : opts.intervalMs),
  });

  return {
    stats,
    runOnce,
    async stop() {
      stopping = true;
      await rounds.stop();
      await running;
      if (lock) {
        const client = lock;
        lock = undefined;
        // Unlocked first: Postgres frees a closed connection's lock only once its backend notices,
        // and the next leader may try before that (it would then sit a round out).
        await client
          .query('SELECT pg_advisory_unlock($1)', [LOCK_KEY])
          .catch((err: Error) => log.warn({ err }, 'derive: could not unlock; the lock goes with the connection'));
        // Destroyed, not pooled: a connection that held the lock is not reused.
        client.release(true);
      }
    },
  };
}
