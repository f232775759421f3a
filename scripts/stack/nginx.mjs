// nginx (Debian's nginx-light), the front door on 8080: the dashboard page at / (static, from
// apps/web/dist), /ws to the edge, everything else to the api.
// The config is rendered from stack/nginx/; writeFrontDoor() and nginxArgs() are exported so the
// front-door tests run an nginx of their own from exactly the same files.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
  HOST,
  PORTS,
  ROOT,
  STACK_DIR,
  StackError,
  TEMPLATES,
  killAndWait,
  mkdirp,
  pidIs,
  portOpen,
  readPid,
  readText,
  render,
  run,
  sleep,
  which,
  writeIfChanged,
} from './common.mjs';
import { upstreamPorts } from './env.mjs';

const DIR = path.join(STACK_DIR, 'nginx');
const CONF = path.join(DIR, 'nginx.conf');
const PID = path.join(DIR, 'nginx.pid');
const ERR_LOG = path.join(DIR, 'error.log');
const OUT = path.join(DIR, 'nginx.out');

function hardNofile() {
  const m = (readText('/proc/self/limits') || '').match(/^Max open files\s+\S+\s+(\S+)/m);
  if (!m) return 4096;
  return m[1] === 'unlimited' ? 1 << 20 : Number(m[1]) || 4096;
}

/** The nginx binary the stack runs (null when nginx is not installed). */
export const nginxBinary = () => which('nginx');

/** Files nginx.conf includes, copied from stack/nginx/ next to it (deploy/nginx.conf uses them too). */
const INCLUDES = ['frontdoor-logging.conf', 'frontdoor-errors.conf', 'frontdoor-web.conf'];
/** The dashboard page's build (`npm run build:web`), served at `/`. */
export const WEB_ROOT = path.join(ROOT, 'apps', 'web', 'dist');
/** Created by us, not by nginx: nginx would make them 0644, and they must not be world-readable. */
export const LOG_FILES = ['access.log', 'error.log', 'nginx.out'];
export const LOG_MODE = 0o600;

/**
 * nginx.conf for a front door whose files live under `prefix`, listening on 127.0.0.1:`port`;
 * `apiPort` is one port or several (api instances the front door balances over).
 */
export function renderConfig({ prefix, port, apiPort, edgePort, webRoot = WEB_ROOT }) {
  // Each proxied connection needs two descriptors; stay within the hard open-files limit.
  const nofile = Math.min(hardNofile(), 65536);
  const workerConnections = Math.max(512, Math.min(16384, Math.floor(nofile / 2) - 32));
  return render('nginx/nginx.conf', {
    PREFIX: prefix,
    PORT: port,
    EDGE_PORT: edgePort,
    API_SERVERS: [apiPort]
      .flat()
      .map((p) => `server ${HOST}:${p};`)
      .join('\n        '),
    WEB_ROOT: webRoot,
    NOFILE: nofile,
    WORKER_CONNECTIONS: workerConnections,
  });
}

/**
 * Writes everything a front door under `prefix` runs from: nginx.conf and its includes, the temp
 * directory, and the log files (0600; an existing one is brought back to 0600, nginx keeps the
 * mode of a file it finds). Logs written under a config without the masking format hold API keys
 * in clear, so they are emptied when that config is replaced. Returns whether any config file
 * changed (a running nginx must reload) and which logs were emptied.
 */
export function writeFrontDoor(prefix, { port, apiPort, edgePort, webRoot = WEB_ROOT }) {
  mkdirp(path.join(prefix, 'tmp'));
  const previous = readText(path.join(prefix, 'nginx.conf'));
  const unmasked = previous != null && !previous.includes(INCLUDES[0]);
  let changed = false;
  for (const file of INCLUDES) {
    changed = writeIfChanged(path.join(prefix, file), fs.readFileSync(path.join(TEMPLATES, 'nginx', file), 'utf8')) || changed;
  }
  changed = writeIfChanged(path.join(prefix, 'nginx.conf'), renderConfig({ prefix, port, apiPort, edgePort, webRoot })) || changed;
  const emptied = [];
  for (const file of LOG_FILES) {
    const p = path.join(prefix, file);
    fs.closeSync(fs.openSync(p, 'a', LOG_MODE));
    fs.chmodSync(p, LOG_MODE);
    if (unmasked && file !== 'nginx.out' && fs.statSync(p).size > 0) {
      fs.truncateSync(p, 0);
      emptied.push(file);
    }
  }
  return { changed, emptied };
}

/** Command-line arguments for an nginx run from `prefix`/nginx.conf. */
export const nginxArgs = (prefix, extra = []) => [
  '-e',
  path.join(prefix, 'error.log'),
  '-p',
  `${prefix}/`,
  '-c',
  path.join(prefix, 'nginx.conf'),
  ...extra,
];

/**
 * Runs nginx in the foreground from `dir` (with `args`, by default those of `dir`/nginx.conf) and
 * resolves once it listens; stop() is graceful (nginx flushes its buffered access log). Its
 * output goes to `dir`/stdio.out: a file, as nginx opens /dev/stdout by name, which fails on the
 * socket Node gives a child.
 */
export async function runFrontDoor(dir, args = nginxArgs(dir)) {
  const bin = which('nginx');
  if (!bin) throw new Error('nginx is not installed: run `npm run stack:up`');
  const port = Number(/listen 127\.0\.0\.1:(\d+)/.exec(fs.readFileSync(path.join(dir, 'nginx.conf'), 'utf8'))?.[1]);
  const stdio = path.join(dir, 'stdio.out');
  const fd = fs.openSync(stdio, 'a', 0o600);
  const child = spawn(bin, [...args, '-g', 'daemon off;'], { cwd: dir, stdio: ['ignore', fd, fd] });
  fs.closeSync(fd);
  const output = () => fs.readFileSync(stdio, 'utf8');
  let running = true;
  const exited = new Promise((resolve) =>
    child.once('exit', () => {
      running = false;
      resolve();
    }),
  );
  const deadline = Date.now() + 10_000;
  while (!(await portOpen(port))) {
    if (!running || Date.now() > deadline) {
      child.kill('SIGKILL');
      await exited;
      throw new Error(`nginx did not start on ${port}:\n${output()}`);
    }
    await sleep(50);
  }
  const stop = async () => {
    if (!running) return;
    child.kill('SIGQUIT');
    const killed = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(killed);
  };
  return { port, url: `http://${HOST}:${port}`, pid: child.pid, output, stop };
}

export const nginx = {
  name: 'nginx',
  envKey: null,
  ports: [PORTS.nginx],
  log: ERR_LOG,
  marker: ['nginx', CONF],
  timeoutMs: 60_000,
  missingPackages: () => (which('nginx') ? [] : ['nginx-light']),
  pid() {
    return readPid(PID);
  },
  prepare(notes) {
    const { api, edge } = upstreamPorts();
    const { changed, emptied } = writeFrontDoor(DIR, { port: PORTS.nginx, apiPort: api, edgePort: edge });
    this.confChanged = changed;
    if (emptied.length) notes.push(`nginx      note: emptied ${emptied.join(', ')}: written by an older config that logged API keys`);
  },
  async ready() {
    return portOpen(PORTS.nginx);
  },
  async start() {
    const t = await run(which('nginx'), nginxArgs(DIR, ['-t', '-q']), { cwd: DIR });
    if (t.code !== 0) throw new StackError('nginx', `config test failed: ${t.out.trim().split('\n')[0]}`, ERR_LOG);
    const r = await run(which('nginx'), nginxArgs(DIR), { cwd: DIR, outFile: OUT });
    if (r.code !== 0) throw new StackError('nginx', `nginx exited with ${r.code}`, ERR_LOG);
    for (let i = 0; i < 50 && !this.pid(); i++) await sleep(50);
    return this.pid();
  },
  async onReuse() {
    if (!this.confChanged) return null;
    const r = await run(which('nginx'), nginxArgs(DIR, ['-s', 'reload']), { cwd: DIR });
    return r.code === 0 ? 'config reloaded' : `reload failed: ${r.out.trim()}`;
  },
  async stop() {
    const pid = this.pid();
    if (!pid || !pidIs(pid, this.marker)) return 'not running';
    return killAndWait(pid, 10_000); // SIGTERM = fast shutdown (SIGQUIT would wait for open websockets)
  },
};
