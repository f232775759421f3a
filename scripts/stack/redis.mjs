// Redis (Debian's redis-server), in memory only (no RDB, no AOF), daemonized by itself, from the
// config rendered from stack/redis/redis.conf. Clients need REDIS_PASSWORD.

import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  ENGINE_DIRS,
  HOST,
  PORTS,
  StackError,
  killAndWait,
  pidIs,
  privateDir,
  readPid,
  render,
  run,
  sleep,
  which,
  writeIfChanged,
} from './common.mjs';
import { localPassword } from './env.mjs';

const DIR = ENGINE_DIRS.redis;
const CONF = path.join(DIR, 'redis.conf');
const LOG = path.join(DIR, 'redis.log');
const PID = path.join(DIR, 'redis.pid');

/**
 * Sends `commands` (each an array of arguments, RESP-encoded so any password is safe) in one
 * round trip; resolves with the first line of each reply, or null when Redis does not answer.
 * Only for commands with one-line replies (PING, AUTH, CONFIG SET).
 */
function redisCommands(port, commands, timeoutMs = 1000) {
  const wire = commands.map((args) => `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`).join('');
  return new Promise((resolve) => {
    const s = net.connect({ port, host: HOST });
    let buf = '';
    const done = (v) => {
      s.destroy();
      resolve(v);
    };
    s.setTimeout(timeoutMs, () => done(null));
    s.once('connect', () => s.write(wire));
    s.on('data', (c) => {
      buf += c;
      const lines = buf.split('\r\n').slice(0, -1);
      if (lines.length >= commands.length) done(lines.slice(0, commands.length));
    });
    s.once('end', () => done(null));
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
  pid() {
    return readPid(PID);
  },
  prepare() {
    privateDir(DIR);
    this.password = localPassword('REDIS_PASSWORD');
    writeIfChanged(
      CONF,
      render('redis/redis.conf', {
        PORT: PORTS.redis,
        HOST,
        PASSWORD: this.password,
        DIR,
        LOG,
        PID,
      }),
      0o600,
    );
  },
  /**
   * A fresh server must take the password. A reused one only has to answer: NOAUTH is an answer
   * too (it may not have our password yet; onReuse sees to it).
   */
  async ready({ fresh } = {}) {
    if (fresh) {
      const replies = await redisCommands(PORTS.redis, [['AUTH', this.password], ['PING']]);
      return replies?.[0] === '+OK' && replies[1] === '+PONG';
    }
    const [reply] = (await redisCommands(PORTS.redis, [['PING']])) ?? [];
    return reply === '+PONG' || !!reply?.startsWith('-NOAUTH');
  },
  async start() {
    try {
      fs.unlinkSync(PID);
    } catch {
      /* none */
    }
    const r = await run(which('redis-server'), [CONF], { cwd: DIR, outFile: LOG });
    if (r.code !== 0) throw new StackError('redis', `redis-server exited with ${r.code}`, LOG);
    // The daemonized child writes the pid file shortly after the parent returns.
    for (let i = 0; i < 50 && !this.pid(); i++) await sleep(50);
    return this.pid();
  },
  /**
   * A server started before it had a password (an older stack) gets it set live, keeping its
   * data; one with a different password (REDIS_PASSWORD rotated) is restarted from the config.
   */
  async onReuse() {
    const [auth] = (await redisCommands(PORTS.redis, [['AUTH', this.password]])) ?? [];
    if (auth === '+OK') return null;
    if (auth?.includes('without any password configured') || auth?.includes('no password is set')) {
      const [set, check] =
        (await redisCommands(PORTS.redis, [
          ['CONFIG', 'SET', 'requirepass', this.password],
          ['AUTH', this.password],
        ])) ?? [];
      if (set === '+OK' && check === '+OK') return 'password set';
      throw new StackError('redis', `setting requirepass failed: ${set ?? 'no answer'}`, LOG);
    }
    await this.stop();
    const pid = await this.start();
    for (let i = 0; i < 100; i++) {
      const [ok] = (await redisCommands(PORTS.redis, [['AUTH', this.password]])) ?? [];
      if (ok === '+OK') return `restarted for a changed password (pid ${pid})`;
      await sleep(100);
    }
    throw new StackError('redis', 'restarted for a changed password, but AUTH still fails', LOG);
  },
  async stop() {
    const pid = this.pid();
    if (!pid || !pidIs(pid, this.marker)) return 'not running';
    // SIGTERM is Redis's own clean shutdown (nothing to save here) and needs no password.
    return killAndWait(pid, 10_000);
  },
};
