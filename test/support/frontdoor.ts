import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { repoPath } from '../../lib/paths.js';
import { LOG_FILES, nginxArgs, nginxBinary, WEB_ROOT, writeFrontDoor } from '../../scripts/stack/nginx.mjs';

/**
 * A real nginx (the stack's binary) on a free loopback port, run from files written by the stack's
 * own code (scripts/stack/nginx.mjs) or from deploy/nginx.conf, in a directory of its own.
 */
export interface FrontDoor {
  url: string;
  port: number;
  dir: string;
  /** Every log file this nginx writes to. */
  logFiles(): string[];
  /** What nginx wrote on stdout and stderr (the compose config logs there), kept in <dir>/stdio.out. */
  output(): string;
  /** Graceful stop (nginx flushes its buffered access log), then the directory stays for inspection. */
  stop(): Promise<void>;
  /** stop() and remove the directory. */
  close(): Promise<void>;
}

const HOST = '127.0.0.1';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A loopback port nothing listens on (bound, then released). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, HOST, resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: HOST });
    const done = (v: boolean) => {
      s.destroy();
      resolve(v);
    };
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'venue-frontdoor-'));
  // nginx workers run as `nobody` when the master is root: they must reach the temp directories.
  fs.chmodSync(dir, 0o755);
  return dir;
}

async function run(dir: string, args: string[], logFiles: () => string[]): Promise<FrontDoor> {
  const bin = nginxBinary();
  if (!bin) throw new Error('nginx is not installed: run `npm run stack:up` (global setup normally does)');
  const port = Number(/listen 127\.0\.0\.1:(\d+)/.exec(fs.readFileSync(path.join(dir, 'nginx.conf'), 'utf8'))?.[1]);
  // A file, not a pipe: nginx opens /dev/stdout by name, which fails on the socket Node gives a child.
  const stdio = path.join(dir, 'stdio.out');
  const fd = fs.openSync(stdio, 'a', 0o600);
  const child = spawn(bin, [...args, '-g', 'daemon off;'], { cwd: dir, stdio: ['ignore', fd, fd] });
  fs.closeSync(fd);
  const out = () => fs.readFileSync(stdio, 'utf8');
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let running = true;
  void exited.then(() => (running = false));
  const deadline = Date.now() + 10_000;
  while (!(await portOpen(port))) {
    if (!running || Date.now() > deadline) {
      const why = out();
      child.kill('SIGKILL');
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
      throw new Error(`nginx did not start on ${port}:\n${why}`);
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
  return {
    url: `http://${HOST}:${port}`,
    port,
    dir,
    logFiles,
    output: out,
    stop,
    async close() {
      await stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The local stack's front door (same code and templates as `scripts/stack.mjs up`), on a free port. */
export async function startFrontDoor(upstreams: { apiPort: number; edgePort: number }): Promise<FrontDoor> {
  const dir = tempDir();
  writeFrontDoor(dir, { port: await freePort(), ...upstreams });
  return run(dir, nginxArgs(dir), () => LOG_FILES.map((f) => path.join(dir, f)));
}

/** The compose deployment's front door: deploy/nginx.conf with the container paths, hosts and port made local. */
export async function startDeployFrontDoor(upstreams: { apiPort: number; edgePort: number }): Promise<FrontDoor> {
  const dir = tempDir();
  for (const f of ['frontdoor-logging.conf', 'frontdoor-errors.conf', 'frontdoor-web.conf']) fs.copyFileSync(repoPath('stack', 'nginx', f), path.join(dir, f));
  fs.mkdirSync(path.join(dir, 'logs'));
  const port = await freePort();
  let conf = fs.readFileSync(repoPath('deploy', 'nginx.conf'), 'utf8');
  for (const [from, to] of [
    ['/etc/nginx/', `${dir}/`],
    ['root /usr/share/nginx/dashboard;', `root ${WEB_ROOT};`],
    ['server api:3000', `server ${HOST}:${upstreams.apiPort}`],
    ['server edge:3001', `server ${HOST}:${upstreams.edgePort}`],
    ['listen 8080;', `listen ${HOST}:${port};`],
  ] as const) {
    if (!conf.includes(from)) throw new Error(`deploy/nginx.conf no longer contains "${from}": update this helper`);
    conf = conf.split(from).join(to);
  }
  fs.writeFileSync(path.join(dir, 'nginx.conf'), conf);
  // It logs to stdout/stderr only; the files nginx could still create under its prefix are listed too.
  const logFiles = () => fs.readdirSync(path.join(dir, 'logs')).map((f) => path.join(dir, 'logs', f));
  return run(dir, ['-e', 'stderr', '-p', `${dir}/`, '-c', path.join(dir, 'nginx.conf')], logFiles);
}
