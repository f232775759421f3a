import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { repoPath } from '../../lib/paths.js';
import { LOG_FILES, nginxArgs, runFrontDoor, WEB_ROOT, writeFrontDoor } from '../../scripts/stack/nginx.mjs';

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

/** A loopback port nothing listens on (bound, then released). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, HOST, resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'venue-frontdoor-'));
  // nginx workers run as `nobody` when the master is root: they must reach the temp directories.
  fs.chmodSync(dir, 0o755);
  return dir;
}

async function run(dir: string, args: string[], logFiles: () => string[]): Promise<FrontDoor> {
  const door = await runFrontDoor(dir, args).catch((err: unknown) => {
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  });
  return {
    url: door.url,
    port: door.port,
    dir,
    logFiles,
    output: door.output,
    stop: door.stop,
    async close() {
      await door.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The local stack's front door (same code and templates as `scripts/stack.mjs up`), on a free port. */
export async function startFrontDoor(upstreams: { apiPort: number | number[]; edgePort: number }): Promise<FrontDoor> {
  const dir = tempDir();
  writeFrontDoor(dir, { port: await freePort(), ...upstreams });
  return run(dir, nginxArgs(dir), () => LOG_FILES.map((f) => path.join(dir, f)));
}

/** The compose deployment's front door: deploy/nginx.conf with the container paths, hosts and port made local. */
export async function startDeployFrontDoor(upstreams: { apiPort: number; edgePort: number }): Promise<FrontDoor> {
  const dir = tempDir();
  for (const f of ['frontdoor-logging.conf', 'frontdoor-errors.conf', 'frontdoor-web.conf'])
    fs.copyFileSync(repoPath('stack', 'nginx', f), path.join(dir, f));
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
