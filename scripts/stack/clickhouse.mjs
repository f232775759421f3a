// ClickHouse 18.16 (Debian's clickhouse-server), with the project's config from stack/clickhouse/
// rendered with absolute paths into .stack/clickhouse/.

import fs from 'node:fs';
import path from 'node:path';
import {
  CLICKHOUSE_DATABASE, HOST, PORTS, STACK_DIR, StackError, TEMPLATES, httpGet, killAndWait, mkdirp, pidIs, readPid,
  render, spawnDetached, which, writeIfChanged,
} from './common.mjs';

const DIR = path.join(STACK_DIR, 'clickhouse');
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
  missingPackages: () => [
    which('clickhouse-server') ? null : 'clickhouse-server', which('clickhouse-client') ? null : 'clickhouse-client',
  ].filter(Boolean),
  pid() { return readPid(PID); },
  prepare() {
    for (const d of ['data', 'tmp', 'user_files', 'format_schemas']) mkdirp(path.join(DIR, d));
    const vars = { CH_DIR: DIR, HTTP_PORT: PORTS.clickhouseHttp, TCP_PORT: PORTS.clickhouseTcp };
    writeIfChanged(CONFIG, render('clickhouse/config.xml', vars));
    writeIfChanged(path.join(DIR, 'users.xml'), fs.readFileSync(path.join(TEMPLATES, 'clickhouse/users.xml'), 'utf8'));
    // config.xml points include_from here so /etc/metrika.xml is never picked up; it must exist.
    writeIfChanged(path.join(DIR, 'metrika.xml'), '<?xml version="1.0"?>\n<yandex></yandex>\n');
  },
  async ready() {
    const r = await httpGet(`http://${HOST}:${PORTS.clickhouseHttp}/ping`, { timeoutMs: 1000 });
    return !!r && r.status === 200 && r.body.trim() === 'Ok.';
  },
  async start() {
    const pid = spawnDetached(which('clickhouse-server'), [`--config-file=${CONFIG}`], OUT, { cwd: DIR });
    fs.writeFileSync(PID, `${pid}\n`);
    return pid;
  },
  async afterReady() {
    const db = process.env.CLICKHOUSE_DATABASE || CLICKHOUSE_DATABASE;
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(db)) return;
    const r = await httpGet(`http://${HOST}:${PORTS.clickhouseHttp}/`, { method: 'POST', body: `CREATE DATABASE IF NOT EXISTS ${db}`, timeoutMs: 10_000 });
    if (!r || r.status !== 200) throw new StackError('clickhouse', `CREATE DATABASE ${db} failed: ${r ? r.body.trim().slice(0, 200) : 'no answer'}`, ERR_LOG);
  },
  async stop() {
    const pid = this.pid();
    if (!pid || !pidIs(pid, this.marker)) return 'not running';
    return killAndWait(pid, 30_000);
  },
};
