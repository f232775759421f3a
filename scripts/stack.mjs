#!/usr/bin/env node
// Local engine stack for development, tests and benchmarks — no Docker.
//
//   node scripts/stack.mjs up       start (or reuse) PostgreSQL, Redis, ClickHouse, Kafka, nginx
//   node scripts/stack.mjs down     stop what this script started
//   node scripts/stack.mjs status   one line per service
//   node scripts/stack.mjs env      resolved engine URLs as KEY=value lines
//
// Library use:  import { up, down, status, resolveEnv } from './stack.mjs'
//               const { env, services } = await up({ quiet: true })
//
// Plain Node ESM with built-ins only: it has to work before any `npm install`.
// Everything binds to 127.0.0.1; data, logs and pid files live under <repo>/.stack (git-ignored).
// An engine whose URL is set in process.env (DATABASE_URL, CLICKHOUSE_URL, KAFKA_BROKERS,
// REDIS_URL) to something other than the local default is "external": used as given,
// never installed, started or stopped.

import { spawn } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(import.meta.url);
export const ROOT = path.resolve(path.dirname(SCRIPT), '..');
export const STACK_DIR = path.join(ROOT, '.stack');
const TEMPLATES = path.join(ROOT, 'stack');
const HOST = '127.0.0.1';

export const PORTS = Object.freeze({
  postgres: 15432,
  redis: 16379,
  clickhouseHttp: 18123,
  clickhouseTcp: 19000,
  kafka: 19092,
  kafkaController: 19093,
  nginx: 8080,
});

export const LOCAL_URLS = Object.freeze({
  DATABASE_URL: `postgres://venue:venue@${HOST}:${PORTS.postgres}/venue`,
  CLICKHOUSE_URL: `http://${HOST}:${PORTS.clickhouseHttp}`,
  KAFKA_BROKERS: `${HOST}:${PORTS.kafka}`,
  REDIS_URL: `redis://${HOST}:${PORTS.redis}`,
});
const PUBLIC_URL = `http://${HOST}:${PORTS.nginx}`;
const CLICKHOUSE_DATABASE = 'venue';

const D = {
  pg: path.join(STACK_DIR, 'postgres'),
  redis: path.join(STACK_DIR, 'redis'),
  ch: path.join(STACK_DIR, 'clickhouse'),
  kafka: path.join(STACK_DIR, 'kafka'),
  nginx: path.join(STACK_DIR, 'nginx'),
};
const F = {
  state: path.join(STACK_DIR, 'state.json'),
  lock: path.join(STACK_DIR, '.lock'),
  apt: path.join(STACK_DIR, 'apt.log'),
  dotenv: path.join(ROOT, '.env'),
  pgData: path.join(D.pg, 'data'),
  pgLog: path.join(D.pg, 'postgres.log'),
  redisLog: path.join(D.redis, 'redis.log'),
  redisPid: path.join(D.redis, 'redis.pid'),
  chConfig: path.join(D.ch, 'config.xml'),
  chLog: path.join(D.ch, 'clickhouse-server.log'),
  chErrLog: path.join(D.ch, 'clickhouse-server.err.log'),
  chOut: path.join(D.ch, 'stdout.log'),
  chPid: path.join(D.ch, 'clickhouse-server.pid'),
  kafkaLibs: path.join(D.kafka, 'libs'),
  kafkaLibsHash: path.join(D.kafka, 'libs.pom.sha256'),
  kafkaData: path.join(D.kafka, 'data'),
  kafkaProps: path.join(D.kafka, 'server.properties'),
  kafkaLog4j: path.join(D.kafka, 'log4j.properties'),
  kafkaOut: path.join(D.kafka, 'kafka.out'),
  kafkaPid: path.join(D.kafka, 'kafka.pid'),
  kafkaClusterId: path.join(D.kafka, 'cluster-id'),
  kafkaMvnLog: path.join(D.kafka, 'mvn.log'),
  nginxConf: path.join(D.nginx, 'nginx.conf'),
  nginxPid: path.join(D.nginx, 'nginx.pid'),
  nginxErr: path.join(D.nginx, 'error.log'),
  nginxOut: path.join(D.nginx, 'nginx.out'),
};

const rel = (p) => path.relative(ROOT, p) || '.';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0;

class StackError extends Error {
  constructor(service, message, logFile) {
    super(`${service}: ${message}${logFile ? ` (log: ${rel(logFile)})` : ''}`);
    this.service = service;
    this.logFile = logFile;
  }
}

// ---------------------------------------------------------------- small helpers

function exists(p) {
  try { fs.accessSync(p); return true; } catch { return false; }
}

function readText(p) {
  try { return fs.readFileSync(p, 'utf8'); } catch { return null; }
}

function mkdirp(p, mode) {
  fs.mkdirSync(p, { recursive: true, ...(mode ? { mode } : {}) });
  return p;
}

function writeIfChanged(file, content, mode) {
  if (readText(file) === content) return false;
  fs.writeFileSync(file, content, mode ? { mode } : undefined);
  return true;
}

function render(template, vars) {
  let out = fs.readFileSync(path.join(TEMPLATES, template), 'utf8');
  for (const [k, v] of Object.entries(vars)) out = out.split(`{{${k}}}`).join(String(v));
  const left = out.match(/\{\{[A-Z_]+\}\}/);
  if (left) throw new Error(`stack/${template}: unknown placeholder ${left[0]}`);
  return out;
}

function tail(file, lines = 6) {
  const t = readText(file);
  if (!t) return '';
  return t.trimEnd().split('\n').slice(-lines).map((l) => `    | ${l}`).join('\n');
}

function which(bin) {
  const dirs = (process.env.PATH || '').split(':').concat(['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin']);
  for (const d of dirs) {
    if (!d) continue;
    const p = path.join(d, bin);
    try { fs.accessSync(p, fs.constants.X_OK); if (fs.statSync(p).isFile()) return p; } catch { /* next */ }
  }
  return null;
}

function pgBinDir() {
  const base = '/usr/lib/postgresql';
  const ok = (v) => exists(path.join(base, v, 'bin', 'pg_ctl')) && exists(path.join(base, v, 'bin', 'postgres'));
  if (ok('15')) return path.join(base, '15', 'bin');
  let versions = [];
  try { versions = fs.readdirSync(base).filter(ok).sort((a, b) => Number(b) - Number(a)); } catch { /* none */ }
  return versions.length ? path.join(base, versions[0], 'bin') : null;
}

function pidAlive(pid) {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try { process.kill(pid, 0); } catch (e) { if (e.code !== 'EPERM') return false; }
  const stat = readText(`/proc/${pid}/stat`);
  if (stat) {
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (state === 'Z' || state === 'X') return false;
  }
  return true;
}

function cmdline(pid) {
  const t = readText(`/proc/${pid}/cmdline`);
  return t ? t.split('\0').join(' ') : '';
}

/** pid is alive and its command line contains every marker (guards against pid reuse). */
function pidIs(pid, marker) {
  if (!pidAlive(pid)) return false;
  const cl = cmdline(pid);
  return [].concat(marker).every((m) => cl.includes(m));
}

function readPid(file) {
  const t = readText(file);
  if (!t) return null;
  const n = Number.parseInt(t.trim().split('\n')[0], 10);
  return Number.isInteger(n) && n > 0 ? n : null;
}

function portOpen(port, host = HOST, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const s = net.connect({ port, host });
    const done = (v) => { s.destroy(); resolve(v); };
    s.setTimeout(timeoutMs, () => done(false));
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

function httpGet(url, { method = 'GET', body, timeoutMs = 2000 } = {}) {
  return new Promise((resolve) => {
    const req = http.request(url, { method, timeout: timeoutMs }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { data += c; });
      res.on('end', () => resolve({ status: res.statusCode, body: data }));
      res.on('error', () => resolve(null));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(null));
    req.end(body);
  });
}

/** Minimal RESP round trip: sends `command` (inline), resolves with the first reply line or null. */
function redisCommand(port, command, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: HOST });
    let buf = '';
    const done = (v) => { s.destroy(); resolve(v); };
    s.setTimeout(timeoutMs, () => done(null));
    s.once('connect', () => s.write(`${command}\r\n`));
    s.on('data', (c) => { buf += c; const i = buf.indexOf('\r\n'); if (i >= 0) done(buf.slice(0, i)); });
    s.once('end', () => done(buf || null));
    s.once('error', () => done(null));
  });
}

/**
 * Runs a command to completion. Output goes to `outFile` (appended) when given — required for
 * commands that daemonize, so no pipe is held open by the daemon — otherwise it is collected.
 */
function run(cmd, args, { cwd = ROOT, env, input, outFile, asPostgres = false, inherit = false } = {}) {
  if (asPostgres && isRoot()) { args = ['-u', 'postgres', '--', cmd, ...args]; cmd = 'runuser'; }
  return new Promise((resolve) => {
    let fd = null;
    let stdio;
    if (inherit) stdio = ['ignore', 'inherit', 'inherit'];
    else if (outFile) { fd = fs.openSync(outFile, 'a'); stdio = [input != null ? 'pipe' : 'ignore', fd, fd]; }
    else stdio = [input != null ? 'pipe' : 'ignore', 'pipe', 'pipe'];
    let out = '';
    let child;
    try {
      child = spawn(cmd, args, { cwd, env: env || process.env, stdio });
    } catch (e) {
      if (fd != null) fs.closeSync(fd);
      resolve({ code: -1, out: String(e.message) });
      return;
    }
    if (fd != null) fs.closeSync(fd);
    child.stdout?.on('data', (c) => { out += c; });
    child.stderr?.on('data', (c) => { out += c; });
    if (input != null) child.stdin.end(input);
    child.once('error', (e) => resolve({ code: -1, out: out + String(e.message) }));
    child.once(outFile || inherit ? 'exit' : 'close', (code, signal) => resolve({ code: code ?? (signal ? 128 : -1), out }));
  });
}

/** Starts a long-running process detached from us, output appended to outFile. Returns its pid. */
function spawnDetached(cmd, args, outFile, { cwd = ROOT, env } = {}) {
  const fd = fs.openSync(outFile, 'a');
  try {
    const child = spawn(cmd, args, { cwd, env: env || process.env, detached: true, stdio: ['ignore', fd, fd] });
    child.on('error', () => {});
    child.unref();
    return child.pid;
  } finally {
    fs.closeSync(fd);
  }
}

/** Polls check() until truthy. alive() returning false aborts early (the process died). */
async function waitFor(check, { timeoutMs, alive, intervalMs = 200 }) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return 'ok';
    if (alive && !(await alive())) {
      // One last look: the process may have exited just after becoming ready (daemonizing).
      return (await check()) ? 'ok' : 'died';
    }
    if (Date.now() > deadline) return 'timeout';
    await sleep(intervalMs);
  }
}

async function waitExit(pid, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (pidAlive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
  return true;
}

async function killAndWait(pid, termTimeoutMs) {
  if (!pidAlive(pid)) return 'not running';
  try { process.kill(pid, 'SIGTERM'); } catch { /* gone */ }
  if (await waitExit(pid, termTimeoutMs)) return 'stopped';
  try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
  await waitExit(pid, 5000);
  return 'killed';
}

async function portsInUse(ports) {
  const res = await Promise.all(ports.map((p) => portOpen(p)));
  return ports.filter((_, i) => res[i]);
}

function portBusyError(name, port, envKey) {
  const who = `ss -ltnp 'sport = :${port}' shows who`;
  const hint = envKey
    ? `stop it (${who}), or set ${envKey} to use that server as an external engine`
    : `stop it (${who})`;
  return new StackError(name, `port ${HOST}:${port} is already in use by a process this stack did not start — ${hint}`);
}

// ---------------------------------------------------------------- lock, state, .env

async function withLock(fn) {
  mkdirp(STACK_DIR);
  const deadline = Date.now() + 180_000;
  for (;;) {
    try {
      fs.writeFileSync(F.lock, String(process.pid), { flag: 'wx' });
      break;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
      const holder = readPid(F.lock);
      if (!holder || holder === process.pid || !pidAlive(holder)) { try { fs.unlinkSync(F.lock); } catch { /* raced */ } continue; }
      if (Date.now() > deadline) throw new Error(`stack: another stack.mjs (pid ${holder}) holds ${rel(F.lock)}`);
      await sleep(250);
    }
  }
  try { return await fn(); } finally { try { if (readPid(F.lock) === process.pid) fs.unlinkSync(F.lock); } catch { /* ignore */ } }
}

function readState() {
  try { return JSON.parse(fs.readFileSync(F.state, 'utf8')); } catch { return { services: {} }; }
}

function writeState(state) {
  mkdirp(STACK_DIR);
  fs.writeFileSync(F.state, `${JSON.stringify(state, null, 2)}\n`);
}

function parseDotEnv(text) {
  const out = {};
  for (const line of (text || '').split('\n')) {
    const m = line.match(/^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/);
    if (!m) continue;
    let v = m[2].trim();
    if ((v.startsWith('"') && v.endsWith('"')) || (v.startsWith("'") && v.endsWith("'"))) v = v.slice(1, -1);
    out[m[1]] = v;
  }
  return out;
}

/**
 * Creates <root>/.env (0600) on first start; afterwards only appends keys that are missing.
 * Engine URLs written here are always the LOCAL ones (an external URL comes from process.env).
 */
export function ensureDotEnv() {
  const existingText = readText(F.dotenv);
  const existing = parseDotEnv(existingText);
  const wanted = [
    ['PUBLIC_URL', PUBLIC_URL],
    ['API_PORT', '3000'],
    ['EDGE_PORT', '3001'],
    ['DATABASE_URL', LOCAL_URLS.DATABASE_URL],
    ['CLICKHOUSE_URL', LOCAL_URLS.CLICKHOUSE_URL],
    ['CLICKHOUSE_DATABASE', CLICKHOUSE_DATABASE],
    ['KAFKA_BROKERS', LOCAL_URLS.KAFKA_BROKERS],
    ['REDIS_URL', LOCAL_URLS.REDIS_URL],
    ['ADMIN_SECRET', () => randomBytes(32).toString('base64url')],
    ['SECRETS_KEY', () => randomBytes(32).toString('base64')],
    ['SECRETS_KEY_ID', 'k1'],
    ['PSEUDONYM_KEY', () => randomBytes(32).toString('base64url')],
  ];
  const missing = wanted.filter(([k]) => !(k in existing));
  if (!missing.length) return [];
  const lines = missing.map(([k, v]) => `${k}=${typeof v === 'function' ? v() : v}`);
  if (existingText == null) {
    const header = [
      '# Generated by scripts/stack.mjs for the local stack. .env.example documents the variables.',
      '# Existing values are never overwritten; missing keys are appended on `stack up`.',
      '# Keep this file private (mode 0600): it holds generated secrets.',
    ];
    fs.writeFileSync(F.dotenv, `${header.concat(lines).join('\n')}\n`, { mode: 0o600 });
    fs.chmodSync(F.dotenv, 0o600);
  } else {
    const sep = existingText.length && !existingText.endsWith('\n') ? '\n' : '';
    fs.appendFileSync(F.dotenv, `${sep}${lines.join('\n')}\n`);
  }
  return missing.map(([k]) => k);
}

const LOCAL_PORT_OF = { DATABASE_URL: PORTS.postgres, CLICKHOUSE_URL: PORTS.clickhouseHttp, KAFKA_BROKERS: PORTS.kafka, REDIS_URL: PORTS.redis };

/** host:port endpoints named by an engine URL (KAFKA_BROKERS is a comma-separated host:port list). */
function endpointsOf(key, value) {
  const norm = (host, port) => {
    const h = host.toLowerCase().replace(/^\[|\]$/g, '');
    return `${['localhost', '127.0.0.1', '::1'].includes(h) ? 'loopback' : h}:${port}`;
  };
  if (key === 'KAFKA_BROKERS') {
    return value.split(',').map((b) => b.trim().replace(/^[a-z]+:\/\//i, '')).filter(Boolean).map((b) => {
      const i = b.lastIndexOf(':');
      return i > 0 ? norm(b.slice(0, i), b.slice(i + 1)) : norm(b, '9092');
    });
  }
  try {
    const u = new URL(value);
    const def = { 'postgres:': '5432', 'postgresql:': '5432', 'redis:': '6379', 'http:': '80', 'https:': '443' }[u.protocol] || '';
    return [norm(u.hostname, u.port || def)];
  } catch {
    return [value];
  }
}

/**
 * KEY -> { value, external } for the four engines. Only process.env can make an engine external,
 * and only when it names a different server: a URL that points at the local stack's own
 * host:port (e.g. another database on 127.0.0.1:15432, or the .env values loaded into
 * process.env by another script) keeps the engine local and managed here.
 */
function engineEnv() {
  const out = {};
  for (const [key, local] of Object.entries(LOCAL_URLS)) {
    const given = (process.env[key] || '').trim();
    const ownServer = `loopback:${LOCAL_PORT_OF[key]}`;
    const external = !!given && !endpointsOf(key, given).every((e) => e === ownServer);
    out[key] = { value: given || local, external };
  }
  return out;
}

/** Resolved engine URLs (what `env` prints and what up() returns). */
export function resolveEnv() {
  const e = engineEnv();
  return {
    PUBLIC_URL,
    DATABASE_URL: e.DATABASE_URL.value,
    CLICKHOUSE_URL: e.CLICKHOUSE_URL.value,
    CLICKHOUSE_DATABASE: process.env.CLICKHOUSE_DATABASE || CLICKHOUSE_DATABASE,
    KAFKA_BROKERS: e.KAFKA_BROKERS.value,
    REDIS_URL: e.REDIS_URL.value,
  };
}

function upstreamPorts() {
  const file = parseDotEnv(readText(F.dotenv));
  const pick = (k, d) => {
    const v = Number.parseInt(process.env[k] || file[k] || d, 10);
    return Number.isInteger(v) && v > 0 && v < 65536 ? v : Number(d);
  };
  return { api: pick('API_PORT', '3000'), edge: pick('EDGE_PORT', '3001') };
}

// ---------------------------------------------------------------- packages

function requirements(names) {
  const req = [];
  const add = (svc, ok, pkg) => { if (!ok) req.push({ svc, pkg }); };
  for (const n of names) {
    if (n === 'postgres') add(n, !!pgBinDir(), 'postgresql');
    if (n === 'redis') { add(n, !!which('redis-server'), 'redis-server'); add(n, !!which('redis-cli'), 'redis-tools'); }
    if (n === 'clickhouse') { add(n, !!which('clickhouse-server'), 'clickhouse-server'); add(n, !!which('clickhouse-client'), 'clickhouse-client'); }
    if (n === 'kafka') { add(n, !!which('java'), 'openjdk-17-jre-headless'); add(n, !!which('mvn'), 'maven'); }
    if (n === 'nginx') add(n, !!which('nginx'), 'nginx-light');
  }
  return req;
}

async function ensurePackages(names, log, quiet) {
  const missing = requirements(names);
  if (!missing.length) return;
  const pkgs = [...new Set(missing.map((m) => m.pkg))];
  if (!isRoot()) {
    throw new Error(`stack: missing packages ${pkgs.join(' ')} — install them first: sudo apt-get install -y ${pkgs.join(' ')}`);
  }
  log(`packages   installing ${pkgs.join(' ')} (apt-get; output in ${rel(F.apt)})`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const opts = quiet ? { env, outFile: F.apt } : { env, inherit: true };
  const upd = await run('apt-get', ['update'], opts);
  if (upd.code !== 0) throw new Error(`stack: apt-get update failed (exit ${upd.code}${quiet ? `, see ${rel(F.apt)}` : ''})`);
  const inst = await run('apt-get', ['install', '-y', '--no-install-recommends', ...pkgs], opts);
  if (inst.code !== 0) throw new Error(`stack: apt-get install ${pkgs.join(' ')} failed (exit ${inst.code}${quiet ? `, see ${rel(F.apt)}` : ''})`);
  const still = requirements(names);
  if (still.length) throw new Error(`stack: still missing after apt-get install: ${[...new Set(still.map((m) => m.pkg))].join(' ')}`);
}

// ---------------------------------------------------------------- services

function postgresUid() {
  for (const line of (readText('/etc/passwd') || '').split('\n')) {
    const f = line.split(':');
    if (f[0] === 'postgres') return { uid: Number(f[2]), gid: Number(f[3]) };
  }
  return null;
}

function pgSocketDir() {
  const dir = path.join(D.pg, 'run');
  // Unix socket paths are limited to 107 bytes; fall back to /tmp for very deep checkouts.
  if (`${dir}/.s.PGSQL.${PORTS.postgres}`.length <= 100) return dir;
  return `/tmp/venue-stack-pg-${createHash('sha256').update(ROOT).digest('hex').slice(0, 12)}`;
}

const postgres = {
  name: 'postgres',
  envKey: 'DATABASE_URL',
  ports: [PORTS.postgres],
  log: F.pgLog,
  marker: ['postgres', F.pgData],
  timeoutMs: 60_000,
  pid() { return readPid(path.join(F.pgData, 'postmaster.pid')); },
  bin(b) { return path.join(pgBinDir(), b); },

  prepare(notes) {
    mkdirp(D.pg, 0o700);
    const sock = pgSocketDir();
    mkdirp(sock, 0o700);
    if (!isRoot()) return;
    const ids = postgresUid();
    if (!ids) throw new StackError('postgres', 'system user "postgres" not found (is the postgresql package installed?)');
    // The server runs as `postgres`: every parent of .stack/postgres must be traversable by it.
    const dirs = [];
    for (let d = path.dirname(D.pg); ; d = path.dirname(d)) { dirs.push(d); if (d === path.dirname(d)) break; }
    for (const d of dirs) {
      const st = fs.statSync(d);
      const canTraverse = st.uid === ids.uid ? (st.mode & 0o100) : st.gid === ids.gid ? (st.mode & 0o010) : (st.mode & 0o001);
      if (!canTraverse) {
        fs.chmodSync(d, (st.mode & 0o7777) | 0o001);
        notes.push(`postgres   note: added o+x (traverse only) to ${d} so the postgres user can reach ${rel(D.pg)}`);
      }
    }
    for (const d of [D.pg, sock]) fs.chownSync(d, ids.uid, ids.gid);
    // pg_ctl -l appends to the log as postgres, so it must exist and be owned by it.
    fs.closeSync(fs.openSync(F.pgLog, 'a', 0o600));
    fs.chownSync(F.pgLog, ids.uid, ids.gid);
    if (exists(F.pgData)) {
      const st = fs.statSync(F.pgData);
      if (st.uid !== ids.uid) throw new StackError('postgres', `${rel(F.pgData)} is not owned by the postgres user — fix with: chown -R postgres:postgres ${F.pgData}`);
    }
  },

  async init(log) {
    const versionFile = path.join(F.pgData, 'PG_VERSION');
    const binVersion = path.basename(path.dirname(pgBinDir()));
    if (exists(versionFile)) {
      const v = readText(versionFile).trim();
      if (v !== binVersion) throw new StackError('postgres', `${rel(F.pgData)} was created by PostgreSQL ${v} but ${binVersion} is installed`);
      return false;
    }
    if (exists(F.pgData) && fs.readdirSync(F.pgData).length) {
      throw new StackError('postgres', `${rel(F.pgData)} exists but is not a PostgreSQL data directory — move it away`);
    }
    log(`postgres   initdb ${rel(F.pgData)}`);
    const tmp = `${F.pgData}.init`;
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.rmSync(F.pgData, { recursive: true, force: true });
    const r = await run(this.bin('initdb'), [
      '-D', tmp, '-U', 'postgres', '-E', 'UTF8', '--locale=C.UTF-8',
      '--auth-local=trust', '--auth-host=scram-sha-256',
    ], { cwd: D.pg, asPostgres: true, outFile: F.pgLog });
    if (r.code !== 0) throw new StackError('postgres', `initdb failed (exit ${r.code})`, F.pgLog);
    fs.appendFileSync(path.join(tmp, 'postgresql.conf'), "\n# Local stack settings (scripts/stack.mjs)\ninclude_if_exists = 'stack.conf'\n");
    fs.renameSync(tmp, F.pgData);
    return true;
  },

  writeConf() {
    const conf = [
      '# Managed by scripts/stack.mjs: rewritten on every `up`, applied on (re)start.',
      `listen_addresses = '${HOST}'`,
      `port = ${PORTS.postgres}`,
      `unix_socket_directories = '${pgSocketDir()}'`,
      'max_connections = 200',
      'shared_buffers = 256MB',
      '# Durable on crash (fsync stays on); only the last few ms of commits may be lost.',
      'synchronous_commit = off',
      "timezone = 'UTC'",
      "log_timezone = 'UTC'",
      'logging_collector = off',
      "log_line_prefix = '%m [%p] %q%u@%d '",
      '',
    ].join('\n');
    const file = path.join(F.pgData, 'stack.conf');
    if (writeIfChanged(file, conf, 0o600) && isRoot()) {
      const ids = postgresUid();
      fs.chownSync(file, ids.uid, ids.gid);
    }
  },

  async bootstrap() {
    const sql = [
      "SELECT 'CREATE ROLE venue LOGIN CREATEDB PASSWORD ''venue''' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'venue')\\gexec",
      "SELECT 'CREATE DATABASE venue OWNER venue' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'venue')\\gexec",
      "SELECT 'CREATE DATABASE venue_test OWNER venue' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'venue_test')\\gexec",
      '',
    ].join('\n');
    const r = await run(this.bin('psql'), [
      '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', pgSocketDir(), '-p', String(PORTS.postgres), '-U', 'postgres', '-d', 'postgres', '-f', '-',
    ], { input: sql, cwd: D.pg, env: { ...process.env, PGCONNECT_TIMEOUT: '10' } });
    if (r.code !== 0) throw new StackError('postgres', `creating role/databases failed: ${r.out.trim().split('\n').pop()}`, F.pgLog);
  },

  async ready() { return portOpen(PORTS.postgres); },

  async start({ log }) {
    await this.init(log);
    this.writeConf();
    const r = await run(this.bin('pg_ctl'), ['-D', F.pgData, '-l', F.pgLog, '-w', '-t', '60', '-s', 'start'], {
      cwd: D.pg, asPostgres: true, outFile: F.pgLog,
    });
    if (r.code !== 0) throw new StackError('postgres', `pg_ctl start failed (exit ${r.code})`, F.pgLog);
    return this.pid();
  },

  async afterReady() { await this.bootstrap(); },

  async stop() {
    const pid = this.pid();
    if (!pid || !pidIs(pid, this.marker)) return 'not running';
    const r = await run(this.bin('pg_ctl'), ['-D', F.pgData, '-m', 'fast', '-w', '-t', '60', '-s', 'stop'], {
      cwd: D.pg, asPostgres: true, outFile: F.pgLog,
    });
    if (r.code !== 0 && pidAlive(pid)) return killAndWait(pid, 30_000);
    return 'stopped';
  },
};

const redis = {
  name: 'redis',
  envKey: 'REDIS_URL',
  ports: [PORTS.redis],
  log: F.redisLog,
  marker: ['redis-server', `:${PORTS.redis}`],
  timeoutMs: 60_000,
  pid() { return readPid(F.redisPid); },
  prepare() { mkdirp(D.redis); },
  async ready() { return (await redisCommand(PORTS.redis, 'PING')) === '+PONG'; },
  async start() {
    try { fs.unlinkSync(F.redisPid); } catch { /* none */ }
    const r = await run(which('redis-server'), [
      '--port', String(PORTS.redis), '--bind', HOST, '--protected-mode', 'yes',
      '--save', '', '--appendonly', 'no',
      '--daemonize', 'yes', '--dir', D.redis, '--logfile', F.redisLog, '--pidfile', F.redisPid,
    ], { cwd: D.redis, outFile: F.redisLog });
    if (r.code !== 0) throw new StackError('redis', `redis-server exited with ${r.code}`, F.redisLog);
    // The daemonized child writes the pid file shortly after the parent returns.
    for (let i = 0; i < 50 && !this.pid(); i++) await sleep(50);
    return this.pid();
  },
  async stop() {
    const pid = this.pid();
    if (!pid || !pidIs(pid, this.marker)) return 'not running';
    await redisCommand(PORTS.redis, 'SHUTDOWN NOSAVE');
    if (await waitExit(pid, 10_000)) return 'stopped';
    return killAndWait(pid, 10_000);
  },
};

const clickhouse = {
  name: 'clickhouse',
  envKey: 'CLICKHOUSE_URL',
  ports: [PORTS.clickhouseHttp, PORTS.clickhouseTcp],
  log: F.chLog,
  failLogs: [F.chErrLog, F.chOut, F.chLog],
  marker: ['clickhouse-server', F.chConfig],
  timeoutMs: 60_000,
  pid() { return readPid(F.chPid); },
  prepare() {
    for (const d of ['data', 'tmp', 'user_files', 'format_schemas']) mkdirp(path.join(D.ch, d));
    const vars = { CH_DIR: D.ch, HTTP_PORT: PORTS.clickhouseHttp, TCP_PORT: PORTS.clickhouseTcp };
    writeIfChanged(F.chConfig, render('clickhouse/config.xml', vars));
    writeIfChanged(path.join(D.ch, 'users.xml'), fs.readFileSync(path.join(TEMPLATES, 'clickhouse/users.xml'), 'utf8'));
    // config.xml points include_from here so /etc/metrika.xml is never picked up; it must exist.
    writeIfChanged(path.join(D.ch, 'metrika.xml'), '<?xml version="1.0"?>\n<yandex></yandex>\n');
  },
  async ready() {
    const r = await httpGet(`http://${HOST}:${PORTS.clickhouseHttp}/ping`, { timeoutMs: 1000 });
    return !!r && r.status === 200 && r.body.trim() === 'Ok.';
  },
  async start() {
    const pid = spawnDetached(which('clickhouse-server'), [`--config-file=${F.chConfig}`], F.chOut, { cwd: D.ch });
    fs.writeFileSync(F.chPid, `${pid}\n`);
    return pid;
  },
  async afterReady() {
    const db = process.env.CLICKHOUSE_DATABASE || CLICKHOUSE_DATABASE;
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(db)) return;
    const r = await httpGet(`http://${HOST}:${PORTS.clickhouseHttp}/`, { method: 'POST', body: `CREATE DATABASE IF NOT EXISTS ${db}`, timeoutMs: 10_000 });
    if (!r || r.status !== 200) throw new StackError('clickhouse', `CREATE DATABASE ${db} failed: ${r ? r.body.trim().slice(0, 200) : 'no answer'}`, F.chErrLog);
  },
  async stop() {
    const pid = this.pid();
    if (!pid || !pidIs(pid, this.marker)) return 'not running';
    return killAndWait(pid, 30_000);
  },
};

function kafkaJavaArgs(extra) {
  return [
    '-Xms256m', '-Xmx768m', '-XX:+UseG1GC', '-XX:MaxGCPauseMillis=20', '-XX:+ExitOnOutOfMemoryError',
    '-Djava.awt.headless=true', '-Djava.net.preferIPv4Stack=true', `-Dlog4j.configuration=file:${F.kafkaLog4j}`,
    '-cp', `${F.kafkaLibs}/*`, ...extra,
  ];
}

const kafka = {
  name: 'kafka',
  envKey: 'KAFKA_BROKERS',
  ports: [PORTS.kafka, PORTS.kafkaController],
  log: F.kafkaOut,
  marker: ['kafka.Kafka', F.kafkaProps],
  timeoutMs: 90_000,
  pid() { return readPid(F.kafkaPid); },
  prepare() {
    mkdirp(F.kafkaData);
    writeIfChanged(F.kafkaProps, render('kafka/server.properties', {
      KAFKA_DATA_DIR: F.kafkaData, BROKER_PORT: PORTS.kafka, CONTROLLER_PORT: PORTS.kafkaController,
    }));
    writeIfChanged(F.kafkaLog4j, fs.readFileSync(path.join(TEMPLATES, 'kafka/log4j.properties'), 'utf8'));
  },

  async ensureLibs(log) {
    const pom = path.join(TEMPLATES, 'kafka', 'pom.xml');
    const hash = createHash('sha256').update(fs.readFileSync(pom)).digest('hex');
    const jars = exists(F.kafkaLibs) ? fs.readdirSync(F.kafkaLibs).filter((f) => f.endsWith('.jar')) : [];
    if (jars.some((j) => j.startsWith('kafka_2.13-')) && readText(F.kafkaLibsHash)?.trim() === hash) return;
    log(`kafka      fetching jars with mvn (${rel(F.kafkaMvnLog)})`);
    const tmp = `${F.kafkaLibs}.tmp`;
    fs.rmSync(tmp, { recursive: true, force: true });
    const r = await run('mvn', ['-q', '-B', '-f', pom, 'dependency:copy-dependencies', `-DoutputDirectory=${tmp}`], {
      outFile: F.kafkaMvnLog,
    });
    const got = exists(tmp) ? fs.readdirSync(tmp) : [];
    if (r.code !== 0 || !got.some((j) => j.startsWith('kafka_2.13-'))) {
      throw new StackError('kafka', `mvn dependency:copy-dependencies failed (exit ${r.code})`, F.kafkaMvnLog);
    }
    fs.rmSync(F.kafkaLibs, { recursive: true, force: true });
    fs.renameSync(tmp, F.kafkaLibs);
    fs.writeFileSync(F.kafkaLibsHash, `${hash}\n`);
  },

  async format(log) {
    if (exists(path.join(F.kafkaData, 'meta.properties'))) return false;
    let id = readText(F.kafkaClusterId)?.trim();
    if (!id) {
      // Same shape as `kafka-storage random-uuid`: a random (v4) UUID, base64url without padding,
      // never starting with '-'. Saves one JVM start (~1-2 s) on a cold boot.
      do { id = Buffer.from(randomUUID().replace(/-/g, ''), 'hex').toString('base64url'); } while (id.startsWith('-'));
      fs.writeFileSync(F.kafkaClusterId, `${id}\n`);
    }
    log(`kafka      formatting ${rel(F.kafkaData)} (cluster id ${id})`);
    const r = await run('java', kafkaJavaArgs(['kafka.tools.StorageTool', 'format', '-t', id, '-c', F.kafkaProps]), {
      outFile: F.kafkaOut,
    });
    if (r.code !== 0) throw new StackError('kafka', `kafka-storage format failed (exit ${r.code})`, F.kafkaOut);
    return true;
  },

  async start({ log }) {
    await this.ensureLibs(log);
    await this.format(log);
    try {
      if (fs.statSync(F.kafkaOut).size > 50 * 1024 * 1024) fs.renameSync(F.kafkaOut, `${F.kafkaOut}.1`);
    } catch { /* no log yet */ }
    this.logOffset = exists(F.kafkaOut) ? fs.statSync(F.kafkaOut).size : 0;
    const pid = spawnDetached('java', kafkaJavaArgs(['kafka.Kafka', F.kafkaProps]), F.kafkaOut, { cwd: D.kafka });
    fs.writeFileSync(F.kafkaPid, `${pid}\n`);
    return pid;
  },

  startedLogged() {
    let fd;
    try {
      fd = fs.openSync(F.kafkaOut, 'r');
      const size = fs.fstatSync(fd).size;
      const from = Math.min(this.logOffset ?? 0, size);
      const buf = Buffer.alloc(size - from);
      fs.readSync(fd, buf, 0, buf.length, from);
      return buf.toString('utf8').includes('Kafka Server started');
    } catch { return false; } finally { if (fd != null) fs.closeSync(fd); }
  },

  async ready({ fresh } = {}) {
    if (!(await portOpen(PORTS.kafka))) return false;
    return fresh ? this.startedLogged() : true;
  },

  async stop() {
    const pid = this.pid();
    if (!pid || !pidIs(pid, this.marker)) return 'not running';
    return killAndWait(pid, 30_000);
  },
};

function hardNofile() {
  const m = (readText('/proc/self/limits') || '').match(/^Max open files\s+\S+\s+(\S+)/m);
  if (!m) return 4096;
  return m[1] === 'unlimited' ? 1 << 20 : Number(m[1]) || 4096;
}

const nginx = {
  name: 'nginx',
  envKey: null,
  ports: [PORTS.nginx],
  log: F.nginxErr,
  marker: ['nginx', F.nginxConf],
  timeoutMs: 60_000,
  pid() { return readPid(F.nginxPid); },
  prepare() {
    mkdirp(path.join(D.nginx, 'tmp'));
    const { api, edge } = upstreamPorts();
    // Each proxied connection needs two descriptors; stay within the hard open-files limit.
    const nofile = Math.min(hardNofile(), 65536);
    const workerConnections = Math.max(512, Math.min(16384, Math.floor(nofile / 2) - 32));
    const conf = render('nginx/nginx.conf', {
      PREFIX: D.nginx, PORT: PORTS.nginx, API_PORT: api, EDGE_PORT: edge, NOFILE: nofile, WORKER_CONNECTIONS: workerConnections,
    });
    this.confChanged = writeIfChanged(F.nginxConf, conf);
  },
  args(extra = []) { return ['-e', F.nginxErr, '-p', `${D.nginx}/`, '-c', F.nginxConf, ...extra]; },
  async ready() { return portOpen(PORTS.nginx); },
  async start() {
    const t = await run(which('nginx'), this.args(['-t', '-q']), { cwd: D.nginx });
    if (t.code !== 0) throw new StackError('nginx', `config test failed: ${t.out.trim().split('\n')[0]}`, F.nginxErr);
    const r = await run(which('nginx'), this.args(), { cwd: D.nginx, outFile: F.nginxOut });
    if (r.code !== 0) throw new StackError('nginx', `nginx exited with ${r.code}`, F.nginxErr);
    for (let i = 0; i < 50 && !this.pid(); i++) await sleep(50);
    return this.pid();
  },
  async onReuse() {
    if (!this.confChanged) return null;
    const r = await run(which('nginx'), this.args(['-s', 'reload']), { cwd: D.nginx });
    return r.code === 0 ? 'config reloaded' : `reload failed: ${r.out.trim()}`;
  },
  async stop() {
    const pid = this.pid();
    if (!pid || !pidIs(pid, this.marker)) return 'not running';
    return killAndWait(pid, 10_000); // SIGTERM = fast shutdown (SIGQUIT would wait for open websockets)
  },
};

const SERVICES = [postgres, redis, clickhouse, kafka, nginx];
const STOP_ORDER = [nginx, kafka, clickhouse, redis, postgres];

function endpoint(svc) {
  return `${HOST}:${svc.ports[0]}`;
}

function line(name, status, where, log) {
  return `${name.padEnd(10)} ${status.padEnd(8)} ${where}${log ? `  (${log})` : ''}`;
}

// ---------------------------------------------------------------- up / down / status

async function upOne(svc, { log, notes }) {
  const engines = engineEnv();
  if (svc.envKey && engines[svc.envKey].external) {
    return { name: svc.name, status: 'external', url: engines[svc.envKey].value };
  }
  svc.prepare(notes);

  const pid = svc.pid();
  if (pid && pidIs(pid, svc.marker)) {
    // Ours and alive: reuse it once it answers (it may still be starting).
    const res = await waitFor(() => svc.ready({ fresh: false }), { timeoutMs: svc.timeoutMs, alive: () => pidAlive(pid) });
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
    alive: () => { const p = svc.pid() ?? started; return !!p && pidAlive(p); },
  });
  if (res !== 'ok') {
    const why = res === 'died' ? 'exited during start-up' : `did not answer on ${endpoint(svc)} within ${svc.timeoutMs / 1000}s`;
    // Name the log that actually says something (ClickHouse reports config errors on stdout,
    // before its logger exists): the most recently written of the candidates.
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
 * Starts (or reuses) every engine. Resolves { env, services }; throws if any service fails
 * (the ones that did start keep running and are recorded, so `down` stops them).
 */
export async function up({ quiet = false } = {}) {
  const t0 = Date.now();
  const log = (s) => { if (!quiet) process.stdout.write(`${s}\n`); };
  return withLock(async () => {
    mkdirp(STACK_DIR, 0o755);
    const hadDotEnv = exists(F.dotenv);
    const added = ensureDotEnv();
    if (added.length) log(`.env       ${hadDotEnv ? `added ${added.join(', ')}` : 'created'}  (${rel(F.dotenv)})`);

    const engines = engineEnv();
    const local = SERVICES.filter((s) => !s.envKey || !engines[s.envKey].external).map((s) => s.name);
    await ensurePackages(local, log, quiet);

    const state = readState();
    state.services ||= {};
    const notes = [];
    const results = await Promise.allSettled(SERVICES.map(async (svc) => {
      const r = await upOne(svc, { log, notes });
      const url = svc.envKey ? (r.url || LOCAL_URLS[svc.envKey]) : PUBLIC_URL;
      const where = r.status === 'external' ? url : endpoint(svc);
      log(line(svc.name, r.status, where, r.status === 'external' ? null : rel(svc.log)) + (r.note ? `  [${r.note}]` : ''));
      if (r.status === 'external') state.services[svc.name] = { external: true, url };
      else state.services[svc.name] = {
        ours: true,
        pid: r.pid ?? null,
        port: svc.ports[0],
        log: rel(svc.log),
        startedAt: r.status === 'started' ? new Date().toISOString() : state.services[svc.name]?.startedAt ?? null,
      };
      return { name: svc.name, status: r.status, url, port: svc.ports[0], pid: r.pid ?? null, log: r.status === 'external' ? null : rel(svc.log) };
    }));
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
    return { env: resolveEnv(), services: results.map((r) => r.value) };
  });
}

/** Stops what this stack started (pid files under .stack/), in reverse dependency order. */
export async function down({ quiet = false } = {}) {
  const log = (s) => { if (!quiet) process.stdout.write(`${s}\n`); };
  if (!exists(STACK_DIR)) { log('stack      nothing to stop (no .stack/)'); return []; }
  return withLock(async () => {
    const state = readState();
    state.services ||= {};
    const out = [];
    for (const svc of STOP_ORDER) {
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
      if (result !== 'external') delete state.services[svc.name];
      log(line(svc.name, result, result === 'external' ? `${st.url} (left alone)` : endpoint(svc)));
      out.push({ name: svc.name, status: result });
    }
    state.updatedAt = new Date().toISOString();
    writeState(state);
    return out;
  });
}

/** One entry per service: running | stopped | starting | busy | external. */
export async function status() {
  const engines = engineEnv();
  return Promise.all(SERVICES.map(async (svc) => {
    if (svc.envKey && engines[svc.envKey].external) {
      return { name: svc.name, status: 'external', url: engines[svc.envKey].value, port: null, log: null };
    }
    const pid = svc.pid();
    const ours = !!pid && pidIs(pid, svc.marker);
    const answering = await portOpen(svc.ports[0]);
    let s;
    if (ours) s = answering ? 'running' : 'starting';
    else s = answering ? 'busy' : 'stopped';
    return { name: svc.name, status: s, pid: ours ? pid : null, port: svc.ports[0], log: rel(svc.log) };
  }));
}

// ---------------------------------------------------------------- CLI

async function main(argv) {
  const quiet = argv.includes('-q') || argv.includes('--quiet');
  const cmd = argv.find((a) => !a.startsWith('-'));
  switch (cmd) {
    case 'up':
      await up({ quiet });
      return 0;
    case 'down':
      await down({ quiet });
      return 0;
    case 'status': {
      for (const s of await status()) {
        if (s.status === 'external') console.log(line(s.name, 'external', s.url));
        else {
          const st = s.status === 'busy' ? 'busy' : s.status;
          const note = s.status === 'busy' ? '  [port used by a process this stack did not start]' : '';
          console.log(line(s.name, st, `${HOST}:${s.port}`, s.log) + note);
        }
      }
      return 0;
    }
    case 'env':
      for (const [k, v] of Object.entries(resolveEnv())) console.log(`${k}=${v}`);
      return 0;
    default:
      console.error('usage: node scripts/stack.mjs up|down|status|env [--quiet]');
      return 2;
  }
}

function invokedDirectly() {
  if (!process.argv[1]) return false;
  try { return fs.realpathSync(process.argv[1]) === fs.realpathSync(SCRIPT); } catch { return false; }
}

if (invokedDirectly()) {
  main(process.argv.slice(2)).then(
    (code) => { process.exitCode = code; },
    (err) => { console.error(err?.message || String(err)); process.exitCode = 1; },
  );
}
