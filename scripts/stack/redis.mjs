// Redis (Debian's redis-server), in memory only (no RDB, no AOF), daemonized by itself.

import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  HOST, PORTS, STACK_DIR, StackError, killAndWait, mkdirp, pidIs, readPid, run, sleep, waitExit, which,
} from './common.mjs';

const DIR = path.join(STACK_DIR, 'redis');
const LOG = path.join(DIR, 'redis.log');
const PID = path.join(DIR, 'redis.pid');

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

export const redis = {
  name: 'redis',
  envKey: 'REDIS_URL',
  ports: [PORTS.redis],
  log: LOG,
  marker: ['redis-server', `:${PORTS.redis}`],
  timeoutMs: 60_000,
  missingPackages: () => [which('redis-server') ? null : 'redis-server', which('redis-cli') ? null : 'redis-tools'].filter(Boolean),
  pid() { return readPid(PID); },
  prepare() { mkdirp(DIR); },
  async ready() { return (await redisCommand(PORTS.redis, 'PING')) === '+PONG'; },
  async start() {
    try { fs.unlinkSync(PID); } catch { /* none */ }
    const r = await run(which('redis-server'), [
      '--port', String(PORTS.redis), '--bind', HOST, '--protected-mode', 'yes',
      '--save', '', '--appendonly', 'no',
      '--daemonize', 'yes', '--dir', DIR, '--logfile', LOG, '--pidfile', PID,
    ], { cwd: DIR, outFile: LOG });
    if (r.code !== 0) throw new StackError('redis', `redis-server exited with ${r.code}`, LOG);
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
