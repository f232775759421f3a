// Shared by every engine module of the local stack: paths, ports, file and process helpers,
// the lock that serialises concurrent `up`/`down` runs, and the state file.
// Plain Node ESM with built-ins only: it has to work before any `npm install`.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/**
 * <repo>/.stack, resolved through a symlink: a git worktree whose .stack links to the main
 * checkout's then names the engines' files exactly as the processes started from there do, so
 * it recognises (and reuses) them instead of calling their ports busy.
 */
export const STACK_DIR = (() => {
  const dir = path.join(ROOT, '.stack');
  try {
    return fs.realpathSync(dir);
  } catch {
    return dir;
  }
})();
export const TEMPLATES = path.join(ROOT, 'stack');
export const HOST = '127.0.0.1';

export const PORTS = Object.freeze({
  postgres: 15432,
  redis: 16379,
  clickhouseHttp: 18123,
  clickhouseTcp: 19000,
  kafka: 19092,
  kafkaController: 19093,
  // The three-node cluster (`up --brokers 3`): node n at 29092 + 100 (n − 1), its controller on the next port.
  kafkaCluster: 29092,
  nginx: 8080,
});

export const LOCAL_URLS = Object.freeze({
  DATABASE_URL: `postgres://venue:venue@${HOST}:${PORTS.postgres}/venue`,
  CLICKHOUSE_URL: `http://${HOST}:${PORTS.clickhouseHttp}`,
  KAFKA_BROKERS: `${HOST}:${PORTS.kafka}`,
  REDIS_URL: `redis://${HOST}:${PORTS.redis}`,
});
export const PUBLIC_URL = `http://${HOST}:${PORTS.nginx}`;
export const CLICKHOUSE_DATABASE = 'venue';

/** Files of the stack as a whole; each engine module names its own under STACK_DIR/<engine>/. */
export const FILES = Object.freeze({
  state: path.join(STACK_DIR, 'state.json'),
  lock: path.join(STACK_DIR, '.lock'),
  apt: path.join(STACK_DIR, 'apt.log'),
  dotenv: path.join(ROOT, '.env'),
});

/**
 * Each engine's folder under .stack (data, config with its password, logs): mode 0700, set on
 * every `up`, so folders made before that rule are tightened too. nginx's is not one: it holds no
 * engine data, its logs are 0600, and its workers (not root) write temp files there.
 */
export const ENGINE_DIRS = Object.freeze({
  postgres: path.join(STACK_DIR, 'postgres'),
  redis: path.join(STACK_DIR, 'redis'),
  clickhouse: path.join(STACK_DIR, 'clickhouse'),
  kafka: path.join(STACK_DIR, 'kafka'),
  kafkaCluster: path.join(STACK_DIR, 'kafka-cluster'),
});
export const PRIVATE_DIR_MODE = 0o700;

/** A path for messages: `.stack/...` for the stack's files (wherever the symlink points), else relative to the repo. */
export const rel = (p) =>
  p === STACK_DIR || p.startsWith(`${STACK_DIR}${path.sep}`)
    ? path.join('.stack', path.relative(STACK_DIR, p))
    : path.relative(ROOT, p) || '.';
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0;

export class StackError extends Error {
  constructor(service, message, logFile) {
    super(`${service}: ${message}${logFile ? ` (log: ${rel(logFile)})` : ''}`);
    this.service = service;
    this.logFile = logFile;
  }
}

// ---------------------------------------------------------------- files

export function exists(p) {
  try {
    fs.accessSync(p);
    return true;
  } catch {
    return false;
  }
}

export function readText(p) {
  try {
    return fs.readFileSync(p, 'utf8');
  } catch {
    return null;
  }
}

export function mkdirp(p, mode) {
  fs.mkdirSync(p, { recursive: true, ...(mode ? { mode } : {}) });
  return p;
}

/** Creates `p` if missing and sets it to 0700 either way (mkdir's mode applies only to a new folder). */
export function privateDir(p) {
  mkdirp(p, PRIVATE_DIR_MODE);
  fs.chmodSync(p, PRIVATE_DIR_MODE);
  return p;
}

/** Writes `file` unless it already holds `content`; a given mode is applied to an existing file too. */
export function writeIfChanged(file, content, mode) {
  const same = readText(file) === content;
  if (!same) fs.writeFileSync(file, content, mode ? { mode } : undefined);
  if (mode) fs.chmodSync(file, mode);
  return !same;
}

/** Reads stack/<template> and replaces every {{NAME}}; an unknown placeholder left over is an error. */
export function render(template, vars) {
  let out = fs.readFileSync(path.join(TEMPLATES, template), 'utf8');
  for (const [k, v] of Object.entries(vars)) out = out.split(`{{${k}}}`).join(String(v));
  const left = out.match(/\{\{[A-Z_]+\}\}/);
  if (left) throw new Error(`stack/${template}: unknown placeholder ${left[0]}`);
  return out;
}

/** The last lines of a log, indented for an error message. */
export function tail(file, lines = 6) {
  const t = readText(file);
  if (!t) return '';
  return t
    .trimEnd()
    .split('\n')
    .slice(-lines)
    .map((l) => `    | ${l}`)
    .join('\n');
}

export function which(bin) {
  const dirs = (process.env.PATH || '').split(':').concat(['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin']);
  for (const d of dirs) {
    if (!d) continue;
    const p = path.join(d, bin);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      if (fs.statSync(p).isFile()) return p;
    } catch {
      /* next */
    }
  }
  return null;
}

// ---------------------------------------------------------------- processes

export function pidAlive(pid) {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    if (e.code !== 'EPERM') return false;
  }
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
export function pidIs(pid, marker) {
  if (!pidAlive(pid)) return false;
  const cl = cmdline(pid);
  return [].concat(marker).every((m) => cl.includes(m));
}

export function readPid(file) {
  const t = readText(file);
  if (!t) return null;
  const n = Number.parseInt(t.trim().split('\n')[0], 10);
  return Number.isInteger(n) && n > 0 ? n : null;
}

/**
 * Runs a command to completion. Output goes to `outFile` (appended) when given — required for
 * commands that daemonize, so no pipe is held open by the daemon — otherwise it is collected.
 */
export function run(cmd, args, { cwd = ROOT, env, input, outFile, asPostgres = false, inherit = false } = {}) {
  if (asPostgres && isRoot()) {
    args = ['-u', 'postgres', '--', cmd, ...args];
    cmd = 'runuser';
  }
  return new Promise((resolve) => {
    let fd = null;
    let stdio;
    if (inherit) stdio = ['ignore', 'inherit', 'inherit'];
    else if (outFile) {
      fd = fs.openSync(outFile, 'a');
      stdio = [input != null ? 'pipe' : 'ignore', fd, fd];
    } else stdio = [input != null ? 'pipe' : 'ignore', 'pipe', 'pipe'];
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
    child.stdout?.on('data', (c) => {
      out += c;
    });
    child.stderr?.on('data', (c) => {
      out += c;
    });
    if (input != null) child.stdin.end(input);
    child.once('error', (e) => resolve({ code: -1, out: out + String(e.message) }));
    child.once(outFile || inherit ? 'exit' : 'close', (code, signal) => resolve({ code: code ?? (signal ? 128 : -1), out }));
  });
}

/** Starts a long-running process detached from us, output appended to outFile. Returns its pid. */
export function spawnDetached(cmd, args, outFile, { cwd = ROOT, env } = {}) {
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

/**
 * Polls check() until truthy. alive() returning false aborts early (the process died). Past the
 * timeout the wait goes on while busy() says the process is still working (e.g. recovering its
 * data after an unclean stop), up to five times the timeout.
 */
export async function waitFor(check, { timeoutMs, alive, busy, intervalMs = 200 }) {
  const deadline = Date.now() + timeoutMs;
  const limit = Date.now() + 5 * timeoutMs;
  for (;;) {
    if (await check()) return 'ok';
    if (alive && !(await alive())) {
      // One last look: the process may have exited just after becoming ready (daemonizing).
      return (await check()) ? 'ok' : 'died';
    }
    if (Date.now() > deadline && (Date.now() > limit || !busy || !busy())) return 'timeout';
    await sleep(intervalMs);
  }
}

/** True when `file` was written to within the last `ms` milliseconds. */
export function writtenWithin(file, ms) {
  try {
    return Date.now() - fs.statSync(file).mtimeMs < ms;
  } catch {
    return false;
  }
}

export async function waitExit(pid, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (pidAlive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
  return true;
}

export async function killAndWait(pid, termTimeoutMs) {
  if (!pidAlive(pid)) return 'not running';
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    /* gone */
  }
  if (await waitExit(pid, termTimeoutMs)) return 'stopped';
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    /* gone */
  }
  await waitExit(pid, 5000);
  return 'killed';
}

// ---------------------------------------------------------------- network probes

export function portOpen(port, host = HOST, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const s = net.connect({ port, host });
    const done = (v) => {
      s.destroy();
      resolve(v);
    };
    s.setTimeout(timeoutMs, () => done(false));
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

export async function portsInUse(ports) {
  const res = await Promise.all(ports.map((p) => portOpen(p)));
  return ports.filter((_, i) => res[i]);
}

export function portBusyError(name, port, envKey) {
  const who = `ss -ltnp 'sport = :${port}' shows who`;
  const hint = envKey ? `stop it (${who}), or set ${envKey} to use that server as an external engine` : `stop it (${who})`;
  return new StackError(name, `port ${HOST}:${port} is already in use by a process this stack did not start — ${hint}`);
}

export function httpGet(url, { method = 'GET', body, headers, timeoutMs = 2000 } = {}) {
  return new Promise((resolve) => {
    const req = http.request(url, { method, headers, timeout: timeoutMs }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c) => {
        data += c;
      });
      res.on('end', () => resolve({ status: res.statusCode, body: data }));
      res.on('error', () => resolve(null));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(null));
    req.end(body);
  });
}
