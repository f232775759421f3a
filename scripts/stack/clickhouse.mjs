// ClickHouse 18.16 (Debian's clickhouse-server), with the project's config from stack/clickhouse/
// rendered with absolute paths into .stack/clickhouse/. The `default` user needs CLICKHOUSE_PASSWORD.

import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
  CLICKHOUSE_DATABASE,
  ENGINE_DIRS,
  HOST,
  PORTS,
  StackError,
  httpGet,
  killAndWait,
  mkdirp,
  pidIs,
  privateDir,
  readPid,
  render,
  sleep,
  spawnDetached,
  which,
  writeIfChanged,
} from './common.mjs';
import { localPassword } from './env.mjs';

const DIR = ENGINE_DIRS.clickhouse;
/** The user whose password stack/clickhouse/users.xml sets (CLICKHOUSE_USER's default). */
const USER = 'default';
const CONFIG = path.join(DIR, 'config.xml');
const LOG = path.join(DIR, 'clickhouse-server.log');
const ERR_LOG = path.join(DIR, 'clickhouse-server.err.log');
const OUT = path.join(DIR, 'stdout.log');
const PID = path.join(DIR, 'clickhouse-server.pid');

export const clickhouse = {
  name: 'clickhouse',
  envKey: 'CLICKHOUSE_URL',
  ports: [PORTS.clickhouseHttp, PORTS.clickhouseTcp],
  log: LOG,
  // ClickHouse reports config errors on stdout, before its logger exists.
  failLogs: [ERR_LOG, OUT, LOG],
  marker: ['clickhouse-server', CONFIG],
  timeoutMs: 60_000,
  missingPackages: () =>
    [which('clickhouse-server') ? null : 'clickhouse-server', which('clickhouse-client') ? null : 'clickhouse-client'].filter(Boolean),
  pid() {
    return readPid(PID);
  },
  prepare() {
    privateDir(DIR);
    privateDir(path.join(DIR, 'data'));
    spreadNewDirectories(path.join(DIR, 'data', 'data'));
    for (const d of ['tmp', 'user_files', 'format_schemas']) mkdirp(path.join(DIR, d));
    const vars = { CH_DIR: DIR, HTTP_PORT: PORTS.clickhouseHttp, TCP_PORT: PORTS.clickhouseTcp };
    writeIfChanged(CONFIG, render('clickhouse/config.xml', vars));
    this.password = localPassword('CLICKHOUSE_PASSWORD');
    const hash = createHash('sha256').update(this.password).digest('hex');
    // A running server picks up a changed users.xml by itself (afterReady waits for it).
    writeIfChanged(path.join(DIR, 'users.xml'), render('clickhouse/users.xml', { PASSWORD_SHA256: hash }), 0o600);
    // config.xml points include_from here so /etc/metrika.xml is never picked up; it must exist.
    writeIfChanged(path.join(DIR, 'metrika.xml'), '<?xml version="1.0"?>\n<yandex></yandex>\n');
  },
  async ready() {
    const r = await httpGet(`http://${HOST}:${PORTS.clickhouseHttp}/ping`, { timeoutMs: 1000 });
    return !!r && r.status === 200 && r.body.trim() === 'Ok.';
  },
  async start() {
    const pid = spawnDetached(which('clickhouse-server'), [`--config-file=${CONFIG}`], OUT, { cwd: DIR, env: clickhouseEnv() });
    fs.writeFileSync(PID, `${pid}\n`);
    return pid;
  },
  /** Runs `sql` as the stack's user; a 401 is retried for a while: a reused server may not have reloaded users.xml yet. */
  async query(sql) {
    const auth = `Basic ${Buffer.from(`${USER}:${this.password}`).toString('base64')}`;
    const deadline = Date.now() + 15_000;
    for (;;) {
      const r = await httpGet(`http://${HOST}:${PORTS.clickhouseHttp}/`, {
        method: 'POST',
        body: sql,
        headers: { authorization: auth },
        timeoutMs: 10_000,
      });
      if (r?.status !== 401 || Date.now() > deadline) return r;
      await sleep(250);
    }
  },
  async afterReady() {
    const db = process.env.CLICKHOUSE_DATABASE || CLICKHOUSE_DATABASE;
    const sql = /^[A-Za-z_][A-Za-z0-9_]*$/.test(db) ? `CREATE DATABASE IF NOT EXISTS ${db}` : 'SELECT 1';
    const r = await this.query(sql);
    if (!r || r.status !== 200)
      throw new StackError('clickhouse', `${sql} failed: ${r ? r.body.trim().slice(0, 200) : 'no answer'}`, ERR_LOG);
  },
  async stop() {
    const pid = this.pid();
    if (!pid || !pidIs(pid, this.marker)) return 'not running';
    return killAndWait(pid, 30_000);
  },
};

/**
 * Marks the directory holding the databases' directories `chattr +T` (ext4's "top of a directory
 * hierarchy"), so ext4 places each new database in a block group chosen from its name rather than
 * beside the others. On ext4 without a journal (this machine's disk) creating a file scans past
 * every inode of its group deleted in the last minutes; a bench's database named per run is then
 * not written among the inodes the last run's dropped one freed (benchmarks/README.md, "The
 * bench's own dropped database"). Elsewhere (another file system, no chattr) it changes nothing.
 */
function spreadNewDirectories(dir) {
  mkdirp(dir);
  const chattr = which('chattr');
  if (chattr) spawnSync(chattr, ['+T', dir], { stdio: 'ignore' });
}

/**
 * The environment a ClickHouse server starts with: Debian's 18.16 uses the system's jemalloc with
 * its defaults, under which every allocation of 8 MB or more comes from an arena that returns its
 * pages at once, so the next such allocation faults them in again (an insert's views build blocks
 * that large). `oversize_threshold:0` serves them from the usual arenas, as current ClickHouse builds
 * its own jemalloc: page faults fell from 15–18 % of ClickHouse's CPU in bench:ingest to 9–10 %
 * (benchmarks/README.md, "ClickHouse's allocator"). A MALLOC_CONF of the caller's own wins.
 */
export function clickhouseEnv() {
  return { ...process.env, MALLOC_CONF: process.env.MALLOC_CONF ?? 'oversize_threshold:0' };
}
