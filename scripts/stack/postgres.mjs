// PostgreSQL 15 (Debian's postgresql package), cluster in .stack/postgres/data. Postgres refuses to
// run as root, so when we are root the cluster belongs to the `postgres` user (runuser).

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  ENGINE_DIRS,
  HOST,
  PORTS,
  STACK_DIR,
  StackError,
  exists,
  isRoot,
  killAndWait,
  mkdirp,
  pidAlive,
  pidIs,
  portOpen,
  PRIVATE_DIR_MODE,
  privateDir,
  readPid,
  readText,
  rel,
  run,
  writeIfChanged,
} from './common.mjs';

const DIR = ENGINE_DIRS.postgres;
const DATA = path.join(DIR, 'data');
const LOG = path.join(DIR, 'postgres.log');

function binDir() {
  const base = '/usr/lib/postgresql';
  const ok = (v) => exists(path.join(base, v, 'bin', 'pg_ctl')) && exists(path.join(base, v, 'bin', 'postgres'));
  if (ok('15')) return path.join(base, '15', 'bin');
  let versions = [];
  try {
    versions = fs
      .readdirSync(base)
      .filter(ok)
      .sort((a, b) => Number(b) - Number(a));
  } catch {
    /* none */
  }
  return versions.length ? path.join(base, versions[0], 'bin') : null;
}

function postgresUid() {
  for (const line of (readText('/etc/passwd') || '').split('\n')) {
    const f = line.split(':');
    if (f[0] === 'postgres') return { uid: Number(f[2]), gid: Number(f[3]) };
  }
  return null;
}

function socketDir() {
  const dir = path.join(DIR, 'run');
  // Unix socket paths are limited to 107 bytes; fall back to /tmp for very deep checkouts.
  if (`${dir}/.s.PGSQL.${PORTS.postgres}`.length <= 100) return dir;
  return `/tmp/venue-stack-pg-${createHash('sha256').update(path.dirname(STACK_DIR)).digest('hex').slice(0, 12)}`;
}

const bin = (b) => path.join(binDir(), b);

async function init(log) {
  const versionFile = path.join(DATA, 'PG_VERSION');
  const binVersion = path.basename(path.dirname(binDir()));
  if (exists(versionFile)) {
    const v = readText(versionFile).trim();
    if (v !== binVersion) throw new StackError('postgres', `${rel(DATA)} was created by PostgreSQL ${v} but ${binVersion} is installed`);
    return false;
  }
  if (exists(DATA) && fs.readdirSync(DATA).length) {
    throw new StackError('postgres', `${rel(DATA)} exists but is not a PostgreSQL data directory — move it away`);
  }
  log(`postgres   initdb ${rel(DATA)}`);
  const tmp = `${DATA}.init`;
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.rmSync(DATA, { recursive: true, force: true });
  const r = await run(
    bin('initdb'),
    ['-D', tmp, '-U', 'postgres', '-E', 'UTF8', '--locale=C.UTF-8', '--auth-local=trust', '--auth-host=scram-sha-256'],
    { cwd: DIR, asPostgres: true, outFile: LOG },
  );
  if (r.code !== 0) throw new StackError('postgres', `initdb failed (exit ${r.code})`, LOG);
  fs.appendFileSync(path.join(tmp, 'postgresql.conf'), "\n# Local stack settings (scripts/stack.mjs)\ninclude_if_exists = 'stack.conf'\n");
  fs.renameSync(tmp, DATA);
  return true;
}

function writeConf() {
  const conf = [
    '# Managed by scripts/stack.mjs: rewritten on every `up`, applied on (re)start.',
    `listen_addresses = '${HOST}'`,
    `port = ${PORTS.postgres}`,
    `unix_socket_directories = '${socketDir()}'`,
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
  const file = path.join(DATA, 'stack.conf');
  if (writeIfChanged(file, conf, 0o600) && isRoot()) {
    const ids = postgresUid();
    fs.chownSync(file, ids.uid, ids.gid);
  }
}

/** Role `venue` and databases `venue` and `venue_test`, created once. */
async function bootstrap() {
  const sql = [
    "SELECT 'CREATE ROLE venue LOGIN CREATEDB PASSWORD ''venue''' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'venue')\\gexec",
    "SELECT 'CREATE DATABASE venue OWNER venue' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'venue')\\gexec",
    "SELECT 'CREATE DATABASE venue_test OWNER venue' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'venue_test')\\gexec",
    '',
  ].join('\n');
  const r = await run(
    bin('psql'),
    ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', socketDir(), '-p', String(PORTS.postgres), '-U', 'postgres', '-d', 'postgres', '-f', '-'],
    { input: sql, cwd: DIR, env: { ...process.env, PGCONNECT_TIMEOUT: '10' } },
  );
  if (r.code !== 0) throw new StackError('postgres', `creating role/databases failed: ${r.out.trim().split('\n').pop()}`, LOG);
}

export const postgres = {
  name: 'postgres',
  envKey: 'DATABASE_URL',
  ports: [PORTS.postgres],
  log: LOG,
  marker: ['postgres', DATA],
  timeoutMs: 60_000,
  missingPackages: () => (binDir() ? [] : ['postgresql']),
  pid() {
    return readPid(path.join(DATA, 'postmaster.pid'));
  },

  prepare(notes) {
    privateDir(DIR);
    // initdb makes it 0700; postgres would also accept 0750, the stack wants no group access.
    if (exists(DATA)) fs.chmodSync(DATA, PRIVATE_DIR_MODE);
    const sock = socketDir();
    mkdirp(sock, 0o700);
    if (!isRoot()) return;
    const ids = postgresUid();
    if (!ids) throw new StackError('postgres', 'system user "postgres" not found (is the postgresql package installed?)');
    // The server runs as `postgres`: every parent of .stack/postgres must be traversable by it.
    const dirs = [];
    for (let d = path.dirname(DIR); ; d = path.dirname(d)) {
      dirs.push(d);
      if (d === path.dirname(d)) break;
    }
    for (const d of dirs) {
      const st = fs.statSync(d);
      const canTraverse = st.uid === ids.uid ? st.mode & 0o100 : st.gid === ids.gid ? st.mode & 0o010 : st.mode & 0o001;
      if (!canTraverse) {
        fs.chmodSync(d, (st.mode & 0o7777) | 0o001);
        notes.push(`postgres   note: added o+x (traverse only) to ${d} so the postgres user can reach ${rel(DIR)}`);
      }
    }
    for (const d of [DIR, sock]) fs.chownSync(d, ids.uid, ids.gid);
    // pg_ctl -l appends to the log as postgres, so it must exist and be owned by it.
    fs.closeSync(fs.openSync(LOG, 'a', 0o600));
    fs.chownSync(LOG, ids.uid, ids.gid);
    if (exists(DATA)) {
      const st = fs.statSync(DATA);
      if (st.uid !== ids.uid)
        throw new StackError('postgres', `${rel(DATA)} is not owned by the postgres user — fix with: chown -R postgres:postgres ${DATA}`);
    }
  },

  async ready() {
    return portOpen(PORTS.postgres);
  },

  async start({ log }) {
    await init(log);
    writeConf();
    const r = await run(bin('pg_ctl'), ['-D', DATA, '-l', LOG, '-w', '-t', '60', '-s', 'start'], {
      cwd: DIR,
      asPostgres: true,
      outFile: LOG,
    });
    if (r.code !== 0) throw new StackError('postgres', `pg_ctl start failed (exit ${r.code})`, LOG);
    return this.pid();
  },

  async afterReady() {
    await bootstrap();
  },

  async stop() {
    const pid = this.pid();
    if (!pid || !pidIs(pid, this.marker)) return 'not running';
    const r = await run(bin('pg_ctl'), ['-D', DATA, '-m', 'fast', '-w', '-t', '60', '-s', 'stop'], {
      cwd: DIR,
      asPostgres: true,
      outFile: LOG,
    });
    if (r.code !== 0 && pidAlive(pid)) return killAndWait(pid, 30_000);
    return 'stopped';
  },
};
