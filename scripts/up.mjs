#!/usr/bin/env node
// `npm run up`: provisions and starts the local stack, migrates, builds the dashboard page when
// missing or stale, then runs api, edge and pipeline in the foreground with interleaved, readable
// logs. Ctrl-C stops the three processes cleanly; the engines keep running until `npm run down`.
import { spawn, spawnSync } from 'node:child_process';
import { setPriority } from 'node:os';
import { createInterface } from 'node:readline';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureNodeModules, build } from './lib/deps.mjs';
import { ensureWebBuild } from './lib/web.mjs';

const USAGE = `npm run up [-- --access-log] [-- --clickhouse-cluster]

Provisions and starts the local stack (PostgreSQL, Redis, ClickHouse, Kafka, nginx), migrates,
builds, then runs the api, the edge and the pipeline in the foreground. Ctrl-C stops the three;
\`npm run down\` stops the engines.

  --access-log   log every HTTP request at info (default: at debug, so they stay out of the terminal)
  --clickhouse-cluster
                 also start ZooKeeper and the local ClickHouse cluster (2 shards x 2 replicas) and
                 run the service on it in cluster mode (docs/scaling.md#clickhouse)
  --help         this text`;
const flags = new Set(process.argv.slice(2));
if (flags.has('--help') || flags.has('-h')) {
  console.log(USAGE);
  process.exit(0);
}
for (const flag of flags) {
  if (flag !== '--access-log' && flag !== '--clickhouse-cluster') {
    console.error(`unknown option ${flag}\n\n${USAGE}`);
    process.exit(2);
  }
}
// One line per request buries the ready banner and the warnings: the dashboard makes dozens.
const ACCESS_LOG_LEVEL = flags.has('--access-log') ? 'info' : (process.env.ACCESS_LOG_LEVEL ?? 'debug');

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
ensureNodeModules(root);
const { up, clickhouseClusterEnv } = await import('./stack.mjs');
const clickhouseCluster = flags.has('--clickhouse-cluster');
const { env } = await up({ clickhouseCluster });
// The migration and the three processes read these from the environment (before .env's values).
if (clickhouseCluster) Object.assign(process.env, clickhouseClusterEnv());
build(root);
try {
  ensureWebBuild(root);
} catch (err) {
  console.error(err.message);
  process.exit(1);
}

const { prettyFactory } = (await import('pino-pretty')).default;
const pretty = prettyFactory({
  colorize: process.stdout.isTTY,
  singleLine: true,
  translateTime: 'HH:MM:ss.l',
  ignore: 'pid,hostname,service,name',
});
const colors = { api: 36, edge: 35, pipeline: 33, migrate: 32 };
const tagOf = (name) => (process.stdout.isTTY ? `\x1b[${colors[name]}m${name.padEnd(8)}\x1b[0m` : name.padEnd(8));
/** Every process's lines in one format: pino's JSON pretty-printed, anything else as it is. */
function printLine(tag, line) {
  let out = line;
  if (line.startsWith('{')) {
    try {
      out = pretty(line).trimEnd();
    } catch {
      /* not a log line: print as is */
    }
  }
  process.stdout.write(`${tag} ${out}\n`);
}

const migrate = spawnSync(process.execPath, [join(root, 'dist/scripts/migrate.js')], { cwd: root, encoding: 'utf8' });
for (const line of `${migrate.stdout ?? ''}${migrate.stderr ?? ''}`.split('\n')) if (line.trim()) printLine(tagOf('migrate'), line);
if (migrate.status !== 0) process.exit(migrate.status ?? 1);

const procs = new Map();

const { PROCESS_ENTRIES, PROCESS_ENV, NODE_FLAGS, NICE } = await import(join(root, 'dist/apps/processes.js'));
// Where `stack.mjs status` finds each process and asks after its health.
const { registerProcess, unregisterProcess, upstreamPorts } = await import('./stack.mjs');
const ports = upstreamPorts();
const ENDPOINTS = {
  api: { port: ports.api, health: '/health' },
  edge: { port: ports.edge, health: '/health' },
  pipeline: { port: ports.pipelineMetrics, health: '/metrics' },
};

function start(name) {
  const child = spawn(process.execPath, [...NODE_FLAGS[name], join(root, PROCESS_ENTRIES[name])], {
    cwd: root,
    env: { ...process.env, ...PROCESS_ENV, ACCESS_LOG_LEVEL },
    stdio: ['ignore', 'pipe', 'pipe'],
    // A group of its own: Ctrl-C reaches this launcher alone, which sends each process one SIGTERM.
    // In the terminal's group they got SIGINT too, read the SIGTERM as a second signal and exited
    // at once, skipping their ordered drain.
    detached: true,
  });
  if (NICE[name]) setPriority(child.pid, NICE[name]);
  const { port, health } = ENDPOINTS[name];
  registerProcess(name, { pid: child.pid, port, health: `http://127.0.0.1:${port}${health}` });
  const tag = tagOf(name);
  for (const stream of [child.stdout, child.stderr]) createInterface({ input: stream }).on('line', (line) => printLine(tag, line));
  child.on('exit', (code, signal) => {
    unregisterProcess(name, child.pid);
    procs.delete(name);
    process.stdout.write(`${tag} exited (${signal ?? code})\n`);
    if (!stopping) shutdown(code ?? 1);
    else if (procs.size === 0) process.exit(0);
  });
  procs.set(name, child);
}

let stopping = false;
function shutdown(code = 0) {
  if (stopping) return;
  stopping = true;
  for (const child of procs.values()) child.kill('SIGTERM');
  setTimeout(() => process.exit(code), 20_000).unref();
  if (procs.size === 0) process.exit(code);
}
process.on('SIGINT', () => shutdown(0));
process.on('SIGTERM', () => shutdown(0));
// Should the launcher end any other way, its processes end with it rather than linger detached.
process.on('exit', () => {
  for (const child of procs.values()) child.kill('SIGTERM');
});

start('api');
start('edge');
start('pipeline');

const base = env.PUBLIC_URL ?? 'http://127.0.0.1:8080';
for (let i = 0; i < 60 && !stopping; i++) {
  await new Promise((r) => setTimeout(r, 500));
  const health = await fetch(`${base}/health`)
    .then((r) => r.json())
    .catch(() => null);
  if (health?.status === 'healthy') {
    console.log(`\n  Service ready at ${base}   (WebSocket: ${base.replace(/^http/, 'ws')}/ws)`);
    console.log(`  Dashboard: ${base}/  (sign in with an operator's API key)`);
    console.log(`  Admin secret: ADMIN_SECRET in ${join(root, '.env')}`);
    console.log('  Ctrl-C stops api, edge and pipeline; `npm run down` stops the engines.\n');
    break;
  }
}
