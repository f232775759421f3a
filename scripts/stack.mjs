#!/usr/bin/env node
// Local engine stack for development, tests and benchmarks — no Docker.
//
// Commands and options: USAGE below (`node scripts/stack.mjs --help`).
//
// Library use:  import { up, down, status, resolveEnv } from './stack.mjs'
//               const { env, services } = await up({ quiet: true })
//               await up({ brokers: 3 }); await down({ cluster: true })
//               await up({ clickhouseCluster: true }); await down({ clickhouseCluster: true })
//
// Plain Node ESM with built-ins only: it has to work before any `npm install`.
// Everything binds to 127.0.0.1; data, logs and pid files live under <repo>/.stack (git-ignored).
// An engine whose URL is set in process.env (DATABASE_URL, CLICKHOUSE_URL, KAFKA_BROKERS,
// REDIS_URL) to something other than the local default is "external": used as given,
// never installed, started or stopped.
//
// One module per engine under scripts/stack/, each a service object of one shape; the map of those
// modules and the shape: docs/local-stack.md.

import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  FILES,
  HOST,
  LOCAL_URLS,
  PUBLIC_URL,
  STACK_DIR,
  StackError,
  exists,
  mkdirp,
  pidAlive,
  pidIs,
  portOpen,
  portBusyError,
  portsInUse,
  rel,
  tail,
  waitFor,
} from './stack/common.mjs';
import { processStatus, readState, withLock, writeState } from './stack/state.mjs';
import { engineEnv, ensureDotEnv, resolveEnv } from './stack/env.mjs';
import { chromium, ensurePackages, openssl } from './stack/packages.mjs';
import { postgres } from './stack/postgres.mjs';
import { redis } from './stack/redis.mjs';
import { clickhouse } from './stack/clickhouse.mjs';
import { kafka } from './stack/kafka.mjs';
import { CLUSTER_BROKERS, CLUSTER_SIZE, kafkaCluster } from './stack/kafka-cluster.mjs';
import { nginx } from './stack/nginx.mjs';
import { clickhouseCluster, clickhouseClusterEnv, clickhouseNodes, zookeeper } from './stack/clickhouse-cluster.mjs';

export { LOCAL_URLS, PORTS, ROOT, STACK_DIR } from './stack/common.mjs';
export { processStatus, registerProcess, unregisterProcess } from './stack/state.mjs';
export { ensureDotEnv, resolveEnv, upstreamPorts } from './stack/env.mjs';
export { CLUSTER_BROKERS, CLUSTER_SIZE, kafkaCluster, quorumLeader } from './stack/kafka-cluster.mjs';
export {
  CH_CLUSTER_NAME,
  CH_CLUSTER_NODES,
  clickhouseCluster,
  clickhouseClusterEnv,
  clickhouseNodes,
  zookeeper,
} from './stack/clickhouse-cluster.mjs';

const SCRIPT = fileURLToPath(import.meta.url);
const SERVICES = [postgres, redis, clickhouse, kafka, nginx];
// Each step's services are stopped together (the cluster's three nodes at once).
const STOP_ORDER = [[nginx], kafkaCluster, [kafka], clickhouseNodes, [zookeeper], [clickhouse], [redis], [postgres]];
/** The on-demand clusters (stopped by a plain `down` too, listed only while running). */
const ON_DEMAND = [...kafkaCluster, ...clickhouseCluster];

function checkBrokers(brokers) {
  if (brokers !== 1 && brokers !== CLUSTER_SIZE) {
    throw new Error(`stack: brokers is 1 (the single broker) or ${CLUSTER_SIZE} (the cluster), not ${brokers}`);
  }
  return brokers;
}

const servicesFor = (brokers, chCluster = false) => [
  ...(checkBrokers(brokers) === 1 ? SERVICES : [...SERVICES, ...kafkaCluster]),
  ...(chCluster ? clickhouseCluster : []),
];

/**
 * The resolved engine URLs; with the Kafka cluster, KAFKA_BROKERS names its nodes; with the
 * ClickHouse cluster, CLICKHOUSE_URL is its first node and CLICKHOUSE_CLUSTER(_NODES) name it.
 */
const envFor = (brokers, chCluster = false) => ({
  ...resolveEnv(),
  ...(checkBrokers(brokers) === 1 ? {} : { KAFKA_BROKERS: CLUSTER_BROKERS }),
  ...(chCluster ? clickhouseClusterEnv() : {}),
});

function endpoint(svc) {
  return `${HOST}:${svc.ports[0]}`;
}

function line(name, status, where, log) {
  return `${name.padEnd(10)} ${status.padEnd(8)} ${where}${log ? `  (${log})` : ''}`;
}

const isExternal = (svc, engines) => !!svc.envKey && engines[svc.envKey].external;

// ---------------------------------------------------------------- up / down / status

async function upOne(svc, { log, notes }) {
  const engines = engineEnv();
  if (isExternal(svc, engines)) {
    return { name: svc.name, status: 'external', url: engines[svc.envKey].value };
  }
  svc.prepare(notes);

  const pid = svc.pid();
  if (pid && pidIs(pid, svc.marker)) {
    // Ours and alive: reuse it once it answers (it may still be starting).
    const res = await waitFor(() => svc.ready({ fresh: false }), {
      timeoutMs: svc.timeoutMs,
      alive: () => pidAlive(pid),
      busy: svc.busy?.bind(svc),
    });
    if (res !== 'ok') throw new StackError(svc.name, `running as pid ${pid} but not answering on ${endpoint(svc)}`, svc.log);
    if (svc.afterReady) await svc.afterReady();
    const extra = svc.onReuse ? await svc.onReuse() : null;
    return { name: svc.name, status: 'reused', pid, note: extra };
  }

  const busy = await portsInUse(svc.ports);
  if (busy.length) throw portBusyError(svc.name, busy[0], svc.envKey);

  const started = await svc.start({ log });
  const res = await waitFor(() => svc.ready({ fresh: true }), {
    timeoutMs: svc.timeoutMs,
    alive: () => {
      const p = svc.pid() ?? started;
      return !!p && pidAlive(p);
    },
    busy: svc.busy?.bind(svc),
  });
  if (res !== 'ok') {
    const why = res === 'died' ? 'exited during start-up' : `did not answer on ${endpoint(svc)} within ${svc.timeoutMs / 1000}s`;
    // Name the log that actually says something: the most recently written of the candidates.
    const logs = (svc.failLogs || [svc.log]).filter(exists);
    logs.sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
    const logFile = logs[0] || svc.log;
    const err = new StackError(svc.name, why, logFile);
    err.tail = tail(logFile);
    throw err;
  }
  if (svc.afterReady) await svc.afterReady();
  return { name: svc.name, status: 'started', pid: svc.pid() ?? started };
}

/**
 * Starts (or reuses) every engine, and with `brokers: 3` the Kafka cluster too. Resolves
 * { env, services }; throws if any service fails (the ones that did start keep running and are
 * recorded, so `down` stops them).
 */
export async function up({ quiet = false, brokers = 1, clickhouseCluster: chCluster = false } = {}) {
  const services = servicesFor(brokers, chCluster);
  const t0 = Date.now();
  const log = (s) => {
    if (!quiet) process.stdout.write(`${s}\n`);
  };
  return withLock(async () => {
    mkdirp(STACK_DIR, 0o755);
    const hadDotEnv = exists(FILES.dotenv);
    const added = ensureDotEnv();
    if (added.length) log(`.env       ${hadDotEnv ? `added ${added.join(', ')}` : 'created'}  (${rel(FILES.dotenv)})`);

    const engines = engineEnv();
    await ensurePackages([...services.filter((s) => !isExternal(s, engines)), chromium, openssl], log, quiet);

    const state = readState();
    state.services ||= {};
    const notes = [];
    // Concurrently: a cluster node is ready only once the others have started too (a quorum).
    const results = await Promise.allSettled(
      services.map(async (svc) => {
        const r = await upOne(svc, { log, notes });
        const url = svc.envKey ? r.url || LOCAL_URLS[svc.envKey] : (svc.url ?? PUBLIC_URL);
        const where = r.status === 'external' ? url : endpoint(svc);
        log(line(svc.name, r.status, where, r.status === 'external' ? null : rel(svc.log)) + (r.note ? `  [${r.note}]` : ''));
        if (r.status === 'external') state.services[svc.name] = { external: true, url };
        else
          state.services[svc.name] = {
            ours: true,
            pid: r.pid ?? null,
            port: svc.ports[0],
            log: rel(svc.log),
            startedAt: r.status === 'started' ? new Date().toISOString() : (state.services[svc.name]?.startedAt ?? null),
          };
        return {
          name: svc.name,
          status: r.status,
          url,
          port: svc.ports[0],
          pid: r.pid ?? null,
          log: r.status === 'external' ? null : rel(svc.log),
        };
      }),
    );
    for (const n of notes) log(n);
    state.updatedAt = new Date().toISOString();
    writeState(state);

    const failed = results.filter((r) => r.status === 'rejected').map((r) => r.reason);
    if (failed.length) {
      const msg = failed.map((e) => `stack: ${e.message}${e.tail ? `\n${e.tail}` : ''}`).join('\n');
      const err = new Error(msg);
      err.failures = failed;
      throw err;
    }
    log(`stack up in ${((Date.now() - t0) / 1000).toFixed(1)}s — env: node scripts/stack.mjs env`);
    return { env: envFor(brokers, chCluster), services: results.map((r) => r.value) };
  });
}

/**
 * Stops what this stack started (pid files under .stack/), in reverse dependency order; with
 * `cluster: true` only the Kafka cluster's nodes.
 */
export async function down({ quiet = false, cluster = false, clickhouseCluster: chCluster = false } = {}) {
  const log = (s) => {
    if (!quiet) process.stdout.write(`${s}\n`);
  };
  if (!exists(STACK_DIR)) {
    log('stack      nothing to stop (no .stack/)');
    return [];
  }
  return withLock(async () => {
    const state = readState();
    state.services ||= {};
    const out = [];
    const steps =
      cluster || chCluster ? [...(cluster ? [kafkaCluster] : []), ...(chCluster ? [clickhouseNodes, [zookeeper]] : [])] : STOP_ORDER;
    for (const step of steps) {
      const results = await Promise.all(
        step.map(async (svc) => {
          const st = state.services[svc.name];
          const pid = svc.pid();
          let result;
          if (pid && pidIs(pid, svc.marker)) {
            result = await svc.stop();
            if (result === 'not running') result = 'stopped';
          } else if (st?.external) {
            result = 'external';
          } else {
            result = 'not running';
          }
          return { svc, st, result };
        }),
      );
      for (const { svc, st, result } of results) {
        if (result !== 'external') delete state.services[svc.name];
        // A cluster that was never started is not worth a line of a plain `down`.
        if (steps === STOP_ORDER && ON_DEMAND.includes(svc) && result === 'not running' && !st) continue;
        log(line(svc.name, result, result === 'external' ? `${st.url} (left alone)` : endpoint(svc)));
        out.push({ name: svc.name, status: result });
      }
    }
    state.updatedAt = new Date().toISOString();
    writeState(state);
    return out;
  });
}

/**
 * One entry per service: running | stopped | starting | busy | external; the Kafka cluster's
 * nodes only while one of them is not stopped.
 */
export async function status() {
  const engines = engineEnv();
  const all = await Promise.all(
    [...SERVICES, ...ON_DEMAND].map(async (svc) => {
      if (isExternal(svc, engines)) {
        return { name: svc.name, status: 'external', url: engines[svc.envKey].value, port: null, log: null };
      }
      const pid = svc.pid();
      const ours = !!pid && pidIs(pid, svc.marker);
      const answering = await portOpen(svc.ports[0]);
      let s;
      if (ours) s = answering ? 'running' : 'starting';
      else s = answering ? 'busy' : 'stopped';
      return { name: svc.name, status: s, pid: ours ? pid : null, port: svc.ports[0], log: rel(svc.log) };
    }),
  );
  const hidden = new Set();
  for (const group of [kafkaCluster, clickhouseCluster]) {
    const names = new Set(group.map((n) => n.name));
    const members = all.filter((s) => names.has(s.name));
    if (members.every((s) => s.status === 'stopped')) for (const s of members) hidden.add(s.name);
  }
  return all.filter((s) => !hidden.has(s.name));
}

// ---------------------------------------------------------------- CLI

const USAGE = `usage: node scripts/stack.mjs <command> [options]

Commands:
  up       start (or reuse) PostgreSQL, Redis, ClickHouse, Kafka and nginx on 127.0.0.1,
           installing what is missing (Debian packages, the Kafka jars from Maven Central)
  down     stop what this script started
  status   one line per engine, then the service processes \`npm run up\` and the simulator started
  env      the engines' URLs as KEY=value lines (with a cluster option, its URLs)

Options:
  -q, --quiet     no progress lines (up, down)
  --brokers 1|3   up, env: also a three-node KRaft Kafka cluster on 29092/29192/29292, next to
                  the single broker; env's KAFKA_BROKERS then names the cluster
  --cluster       down: stop only that cluster (plain \`down\` stops it too)
  --clickhouse-cluster
                  up, env: also ZooKeeper and a ClickHouse cluster of 2 shards x 2 replicas
                  (HTTP 28123/28223/28323/28423), next to the single server; env then names it
                  (CLICKHOUSE_URL, CLICKHOUSE_CLUSTER, CLICKHOUSE_CLUSTER_NODES);
                  down: stop only that cluster (plain \`down\` stops it too)
  -h, --help      this text

Data, logs and pid files live under .stack/ (docs/local-stack.md).`;

async function main(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        quiet: { type: 'boolean', short: 'q' },
        brokers: { type: 'string', default: '1' },
        cluster: { type: 'boolean' },
        'clickhouse-cluster': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: true,
    });
  } catch (err) {
    console.error(`${err.message.split('. ')[0]}\n\n${USAGE}`);
    return 2;
  }
  const { values: opts, positionals } = parsed;
  if (opts.help || positionals[0] === 'help') {
    console.log(USAGE);
    return 0;
  }
  const quiet = !!opts.quiet;
  const brokers = Number(opts.brokers);
  const chCluster = !!opts['clickhouse-cluster'];
  const cmd = positionals[0];
  switch (cmd) {
    case 'up':
      await up({ quiet, brokers, clickhouseCluster: chCluster });
      return 0;
    case 'down':
      await down({ quiet, cluster: !!opts.cluster, clickhouseCluster: chCluster });
      return 0;
    case 'status': {
      for (const s of await status()) {
        if (s.status === 'external') console.log(line(s.name, 'external', s.url));
        else {
          const note = s.status === 'busy' ? '  [port used by a process this stack did not start]' : '';
          console.log(line(s.name, s.status, `${HOST}:${s.port}`, s.log) + note);
        }
      }
      for (const p of await processStatus()) {
        const since = p.startedAt ? `  since ${p.startedAt.slice(11, 19)} UTC` : '';
        console.log(
          line(p.name, 'running', `${p.port ? `${HOST}:${p.port}` : '-'}  pid ${p.pid}${p.health ? `  health: ${p.health}` : ''}${since}`),
        );
      }
      return 0;
    }
    case 'env':
      for (const [k, v] of Object.entries(envFor(brokers, chCluster))) console.log(`${k}=${v}`);
      return 0;
    default:
      console.error(`${cmd ? `unknown command '${cmd}'` : 'a command is required'}\n\n${USAGE}`);
      return 2;
  }
}

function invokedDirectly() {
  if (!process.argv[1]) return false;
  try {
    return fs.realpathSync(process.argv[1]) === fs.realpathSync(SCRIPT);
  } catch {
    return false;
  }
}

if (invokedDirectly()) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      console.error(err?.message || String(err));
      process.exitCode = 1;
    },
  );
}
