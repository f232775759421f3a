import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, setPriority, totalmem } from 'node:os';
import { join } from 'node:path';
import { Kafka, logLevel, type Admin } from 'kafkajs';
import pg from 'pg';
import { launchOf } from '../../apps/processes.js';
import { chRows, chsql, createCh, type Ch } from '../../clickhouse/client.js';
import { deriveCaughtUp, serverNow } from '../../clickhouse/queries/derive.js';
import { migrateClickhouse, serverExecutor } from '../../clickhouse/migrate.js';
import { loadConfig, parseDotenv, type Config } from '../../lib/config.js';
import { topicOffsets } from '../../lib/kafka.js';
import { repoPath } from '../../lib/paths.js';
import { derivedTopicNames, topicNames } from '../../lib/topology.js';
import { createDb } from '../../postgres/client.js';
import { migratePostgres } from '../../postgres/migrate.js';

/** The local stack's configuration, with a benchmark's own databases and topics layered on top. */
export function benchConfig(overrides: Record<string, string>): { cfg: Config; env: Record<string, string> } {
  const fileEnv = parseDotenv(readFileSync(repoPath('.env'), 'utf8'));
  const env = { ...fileEnv, ...(process.env as Record<string, string>), ...overrides };
  return { cfg: loadConfig(env), env };
}

/**
 * Drops and recreates the run's own Postgres database `name` and ClickHouse database
 * `cfg.CLICKHOUSE_DATABASE` and migrates them; `adminUrl` is a Postgres URL of another database to
 * do it from. `earlierRuns` names the ClickHouse databases of earlier runs to drop: a bench that
 * names its database per run (`<prefix>_<run id>`) gives the prefix.
 */
export async function freshDatabases(adminUrl: string, cfg: Config, name: string, earlierRuns?: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const ch = createCh(cfg, null);
  const earlier = earlierRuns === undefined ? [] : await chDatabasesOf(ch, earlierRuns);
  for (const stale of [...earlier, cfg.CLICKHOUSE_DATABASE]) await dropChDatabase(ch, stale);
  const db = createDb(cfg, 2);
  await migratePostgres(db);
  await db.end();
  await migrateClickhouse(serverExecutor(ch), cfg.CLICKHOUSE_DATABASE);
  await ch.close();
}

/** The ClickHouse databases of a bench's runs (`<prefix>_<run id>`), oldest first (run ids grow with time). */
export async function chDatabasesOf(ch: ReturnType<typeof createCh>, prefix: string): Promise<string[]> {
  const rows = await (
    await ch.query({ query: 'SELECT name FROM system.databases ORDER BY name', format: 'JSONEachRow' })
  ).json<{ name: string }>();
  return rows.map((r) => r.name).filter((n) => n.startsWith(`${prefix}_`));
}

/**
 * Dropping the database a long run filled can outlast the client's 30 s timeout; ClickHouse goes on
 * with it, so a timed-out drop is waited for (up to five minutes) rather than failed.
 */
async function dropChDatabase(ch: ReturnType<typeof createCh>, name: string): Promise<void> {
  try {
    await ch.command({ query: `DROP DATABASE IF EXISTS ${name}` });
    return;
  } catch (err) {
    console.log(`dropping the ClickHouse database ${name} is taking long (${(err as Error).message}); waiting for it`);
  }
  const until = Date.now() + 300_000;
  while (Date.now() < until) {
    const rows = await (
      await ch.query({ query: `SELECT count() AS n FROM system.databases WHERE name = '${name}'`, format: 'JSONEachRow' })
    ).json<{ n: string }>();
    if (Number(rows[0]?.n) === 0) return;
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error(`ClickHouse database ${name} still exists five minutes after DROP DATABASE`);
}

/**
 * Deletes the topics earlier runs of a benchmark left behind (`<family>.<run id>.…`), except the
 * current run's and those under `keep`. Every run has topics of its own; left to pile up they fill
 * the disk and a broker restarted after an unclean stop recovers every partition before it answers
 * (1,700 partitions: over 90 s). The last run's topics stay until the next run, for inspection.
 */
export async function dropEarlierRunTopics(brokers: string[], family: string, current: string, keep: string[] = []): Promise<void> {
  const admin = new Kafka({ brokers, clientId: `${family}-cleanup`, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const mine = [current, ...keep].map((p) => `${p}.`);
    const stale = (await admin.listTopics()).filter((t) => t.startsWith(`${family}.`) && !mine.some((p) => t.startsWith(p)));
    if (stale.length > 0) {
      await admin.deleteTopics({ topics: stale, timeout: 120_000 });
      console.log(`deleted ${stale.length} topics of earlier ${family} runs`);
    }
  } finally {
    await admin.disconnect();
  }
}

/**
 * The stack's front door (nginx, from the same templates and code as `scripts/stack.mjs up`) on
 * `port`, balancing over the api instances on `apiPorts`; files under .stack/bench-frontdoor/.
 * Imported from the source tree at run time: the build does not copy the stack's .mjs files.
 */
export async function startFrontDoor(
  apiPorts: number[],
  port: number,
): ReturnType<typeof import('../../scripts/stack/nginx.mjs').runFrontDoor> {
  const { writeFrontDoor, runFrontDoor } = (await import(
    repoPath('scripts', 'stack', 'nginx.mjs')
  )) as typeof import('../../scripts/stack/nginx.mjs');
  const dir = repoPath('.stack', 'bench-frontdoor');
  mkdirSync(dir, { recursive: true });
  // nginx workers run as `nobody` when the master is root: they must reach the temp directories.
  chmodSync(dir, 0o755);
  writeFrontDoor(dir, { port, apiPort: apiPorts, edgePort: port + 1 });
  return runFrontDoor(dir);
}

/**
 * `count` pipeline processes (`pipeline`, or `pipeline-1`, `pipeline-2`, …), only the first serving
 * metrics: each takes a share of every consumer group's partitions, which is how the pipeline scales out.
 */
export function startPipelines(
  count: number,
  env: Record<string, string>,
  onStdoutLine?: (name: string, line: string) => void,
  /** Added to the environment of the i-th process. */
  envOf: (i: number) => Record<string, string> = () => ({}),
): Array<{ name: string } & ReturnType<typeof startProcess>> {
  return Array.from({ length: count }, (_, i) => {
    const name = count > 1 ? `pipeline-${i + 1}` : 'pipeline';
    const procEnv = { ...env, ...(i > 0 ? { PIPELINE_METRICS_PORT: '0' } : {}), ...envOf(i) };
    return { name, ...startProcess(name, 'dist/apps/pipeline/main.js', procEnv, onStdoutLine && ((line) => onStdoutLine(name, line))) };
  });
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;

/**
 * Runs a built entry point (dist/...) with the given environment, its service's Node flags and
 * CPU priority (apps/processes.ts) until `stop()`. With
 * BENCH_CPU_PROF=<dir> each process writes a V8 CPU profile there when it stops.
 * BENCH_NODE_FLAGS adds its space-separated Node flags to every process (`--log-deopt …`).
 */
export function startProcess(
  name: string,
  entry: string,
  env: Record<string, string>,
  /** Receives each stdout line (the process's JSON log) when given; stdout is discarded otherwise. */
  onStdoutLine?: (line: string) => void,
  /** The checkout whose build runs (another worktree's, to compare two builds); this one's by default. */
  root?: string,
): { child: ChildProcess; stop(): Promise<void> } {
  const profileDir = process.env.BENCH_CPU_PROF;
  const launch = launchOf(entry);
  const nodeArgs = [
    ...launch.flags,
    ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${name}.cpuprofile`] : []),
    ...(process.env.BENCH_NODE_FLAGS?.split(/\s+/).filter(Boolean) ?? []),
  ];
  const child = spawn(process.execPath, [...nodeArgs, root ? join(root, entry) : repoPath(entry)], {
    env: { ...env, ...launch.env },
    stdio: ['ignore', onStdoutLine ? 'pipe' : 'ignore', 'pipe'],
  });
  stopsWithBench(child);
  if (launch.nice && child.pid !== undefined) setPriority(child.pid, launch.nice);
  if (onStdoutLine) {
    let buffered = '';
    child.stdout?.on('data', (d: Buffer) => {
      const lines = (buffered + d.toString()).split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) onStdoutLine(line);
    });
  }
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  child.on('exit', (code) => {
    if (code && code !== 0) process.stderr.write(`${name} exited with ${code}\n${stderr}\n`);
  });
  // 'close', not 'exit', ends a process here: its last stdout lines (a processor's state at stop) may arrive after the exit.
  let closed = false;
  child.once('close', () => (closed = true));
  return {
    child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (closed) return resolve();
        child.once('close', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

const started = new Set<ChildProcess>();
let stopsOnSignal = false;

/**
 * A bench stopped with SIGTERM or SIGINT (`kill`, Ctrl-C) stops the processes it started with
 * SIGTERM, each shutting down in order, rather than leaving them running on the stack.
 */
function stopsWithBench(child: ChildProcess): void {
  if (!stopsOnSignal)
    for (const signal of ['SIGTERM', 'SIGINT'] as const)
      process.once(signal, () => {
        for (const c of started) c.kill('SIGTERM');
        process.exit(signal === 'SIGTERM' ? 143 : 130);
      });
  stopsOnSignal = true;
  started.add(child);
  child.once('exit', () => started.delete(child));
}

/**
 * Until the raw table holds `rows` rows, the occupancy and connector health groups of the topics
 * under `prefix` have read their inputs to the end, and a derive round that started after the last
 * row was stored has finished and carried nothing over.
 */
export async function settled(ch: Ch, admin: Admin, prefix: string, rows: number, pollMs = 500, timeoutMs = 300_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  const pause = async () => {
    if (Date.now() > until) throw new Error(`the load under ${prefix} did not settle within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, pollMs));
  };
  const stored = async () => Number((await chRows<{ n: string }>(ch, chsql`SELECT count() AS n FROM events`))[0]?.n ?? 0);
  while ((await stored()) < rows) await pause();
  const storedAt = await serverNow(ch);
  for (const [name, topic] of [
    ['occupancy', topicNames(prefix).events],
    ['health', derivedTopicNames(prefix).ingestReports],
  ] as const) {
    const ends = await topicOffsets(admin, topic);
    for (;;) {
      const [t] = await admin.fetchOffsets({ groupId: `${prefix}.proc.${name}`, topics: [topic] });
      const committed = new Map(t!.partitions.map((p) => [p.partition, Math.max(0, Number(p.offset))]));
      if (ends.every((e) => (committed.get(e.partition) ?? 0) >= Number(e.high))) break;
      await pause();
    }
  }
  while (!(await deriveCaughtUp(ch, 'derive', storedAt + 1))) await pause();
}

export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what} not ready within ${timeoutMs} ms`);
}

export function machine() {
  return { cores: cpus().length, cpu: cpus()[0]?.model ?? 'unknown', memGiB: round(totalmem() / 2 ** 30), node: process.version };
}

/** Writes `benchmarks/results/<name>.json` (latest run) and returns the path. */
export function writeResult(name: string, data: unknown): string {
  mkdirSync(repoPath('benchmarks', 'results'), { recursive: true });
  const path = repoPath('benchmarks', 'results', `${name}.json`);
  writeFileSync(path, JSON.stringify(data, null, 2) + '\n');
  return path;
}

const CLOCK_TICKS = 100;

/**
 * CPU seconds (user + system) used so far by each named process together with its direct children
 * (Postgres' backends), from one pass over /proc; NaN for a process not running.
 */
export function cpuSecondsOf(pids: Record<string, number | undefined>): Record<string, number> {
  const byPid = new Map<number, { ppid: number; cpu: number; reaped: number }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime and stime, and cutime and cstime: what its children that ended used. The latter
      // count for the named process alone (a Postgres backend that exits moves its time into the
      // postmaster's), so a sum over a process and its live children never goes down.
      byPid.set(Number(entry), { ppid: Number(f[1]), cpu: Number(f[11]) + Number(f[12]), reaped: Number(f[13]) + Number(f[14]) });
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return Object.fromEntries(
    Object.entries(pids).map(([name, pid]) => {
      if (!pid || !byPid.has(pid)) return [name, NaN];
      let ticks = 0;
      for (const [id, s] of byPid) if (id === pid || s.ppid === pid) ticks += s.cpu + (id === pid ? s.reaped : 0);
      return [name, ticks / CLOCK_TICKS];
    }),
  );
}

/** Resident memory of a process in MB; NaN when it is not running. */
export function rssMbOf(pid: number | undefined): number {
  try {
    return round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024, 0);
  } catch {
    return NaN;
  }
}

/** The local stack's engine processes (from the pid files `scripts/stack.mjs` writes). */
export function enginePids(): Record<string, number | undefined> {
  const first = (file: string) => {
    try {
      return Number(readFileSync(repoPath('.stack', file), 'utf8').split('\n')[0]) || undefined;
    } catch {
      return undefined;
    }
  };
  return {
    kafka: first('kafka/kafka.pid'),
    clickhouse: first('clickhouse/clickhouse-server.pid'),
    postgres: first('postgres/data/postmaster.pid'),
    redis: first('redis/redis.pid'),
  };
}

/**
 * CPU time of all cores since boot, in core-seconds: busy, of which `steal` is time the hypervisor
 * gave to other guests (this box is a shared VM: at 30 % steal everything runs 1.4× slower), and
 * total. Differences of two reads give shares of the interval.
 */
export function machineCpu(): { busy: number; steal: number; total: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const idle = f[3]! + f[4]!;
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: (total - idle) / CLOCK_TICKS, steal: f[7]! / CLOCK_TICKS, total: total / CLOCK_TICKS };
}

/** The share of the interval between two `machineCpu` reads spent busy, or stolen. */
export function cpuShare(a: ReturnType<typeof machineCpu>, b: ReturnType<typeof machineCpu>, of: 'busy' | 'steal'): number {
  return (b[of] - a[of]) / (b.total - a.total);
}
