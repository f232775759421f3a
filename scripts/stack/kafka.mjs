// Kafka 3.9 in KRaft combined mode (broker + controller, node 1) on Java 17. The jars come from
// Maven (stack/kafka/pom.xml) into .stack/kafka/libs, fetched again only when the pom changes.
// The three-node cluster (kafka-cluster.mjs) runs from the same jars with the helpers exported here.

import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  ENGINE_DIRS,
  PORTS,
  StackError,
  TEMPLATES,
  exists,
  killAndWait,
  pidIs,
  portOpen,
  privateDir,
  readPid,
  readText,
  rel,
  render,
  run,
  spawnDetached,
  which,
  writeIfChanged,
  writtenWithin,
} from './common.mjs';
import { timed } from './state.mjs';

const DIR = ENGINE_DIRS.kafka;
const F = {
  libs: path.join(DIR, 'libs'),
  libsHash: path.join(DIR, 'libs.pom.sha256'),
  data: path.join(DIR, 'data'),
  props: path.join(DIR, 'server.properties'),
  log4j: path.join(DIR, 'log4j.properties'),
  out: path.join(DIR, 'kafka.out'),
  pid: path.join(DIR, 'kafka.pid'),
  clusterId: path.join(DIR, 'cluster-id'),
  mvnLog: path.join(DIR, 'mvn.log'),
};

export function javaArgs(extra, { heap = ['-Xms256m', '-Xmx768m'], log4j = F.log4j } = {}) {
  return [
    ...heap,
    '-XX:+UseG1GC',
    '-XX:MaxGCPauseMillis=20',
    '-XX:+ExitOnOutOfMemoryError',
    '-Djava.awt.headless=true',
    '-Djava.net.preferIPv4Stack=true',
    `-Dlog4j.configuration=file:${log4j}`,
    '-cp',
    `${F.libs}/*`,
    ...extra,
  ];
}

let fetching = null;

/**
 * Fetches the jars with mvn unless .stack/kafka/libs already holds those of the current pom. The
 * single broker and the cluster's nodes start concurrently: they share one fetch.
 */
export function ensureLibs(log) {
  fetching ??= fetchLibs(log).finally(() => {
    fetching = null;
  });
  return fetching;
}

async function fetchLibs(log) {
  const pom = path.join(TEMPLATES, 'kafka', 'pom.xml');
  const hash = createHash('sha256').update(fs.readFileSync(pom)).digest('hex');
  const jars = exists(F.libs) ? fs.readdirSync(F.libs).filter((f) => f.endsWith('.jar')) : [];
  if (jars.some((j) => j.startsWith('kafka_2.13-')) && readText(F.libsHash)?.trim() === hash) return;
  log(`kafka      fetching jars with mvn (${rel(F.mvnLog)})`);
  const tmp = `${F.libs}.tmp`;
  fs.rmSync(tmp, { recursive: true, force: true });
  const r = await timed('kafka      mvn', log, () =>
    run('mvn', ['-q', '-B', '-f', pom, 'dependency:copy-dependencies', `-DoutputDirectory=${tmp}`], {
      outFile: F.mvnLog,
    }),
  );
  const got = exists(tmp) ? fs.readdirSync(tmp) : [];
  if (r.code !== 0 || !got.some((j) => j.startsWith('kafka_2.13-'))) {
    throw new StackError('kafka', `mvn dependency:copy-dependencies failed (exit ${r.code})`, F.mvnLog);
  }
  fs.rmSync(F.libs, { recursive: true, force: true });
  fs.renameSync(tmp, F.libs);
  fs.writeFileSync(F.libsHash, `${hash}\n`);
}

/** The cluster id kept in `file`, created on first use. */
export function clusterIdIn(file) {
  let id = readText(file)?.trim();
  if (!id) {
    // Same shape as `kafka-storage random-uuid`: a random (v4) UUID, base64url without padding,
    // never starting with '-'. Saves one JVM start (~1-2 s) on a cold boot.
    do {
      id = Buffer.from(randomUUID().replace(/-/g, ''), 'hex').toString('base64url');
    } while (id.startsWith('-'));
    fs.writeFileSync(file, `${id}\n`);
  }
  return id;
}

/** Formats a node's storage once (a data dir with meta.properties is left alone). */
export async function formatStorage({ name, data, props, out, id, log, javaOpts }) {
  if (exists(path.join(data, 'meta.properties'))) return false;
  log(`${name.padEnd(10)} formatting ${rel(data)} (cluster id ${id})`);
  const r = await run('java', javaArgs(['kafka.tools.StorageTool', 'format', '-t', id, '-c', props], javaOpts), { outFile: out });
  if (r.code !== 0) throw new StackError(name, `kafka-storage format failed (exit ${r.code})`, out);
  return true;
}

/** Renames a log over 50 MB to <log>.1; returns the size left, where this start's output begins. */
export function rotateLog(file) {
  try {
    if (fs.statSync(file).size > 50 * 1024 * 1024) fs.renameSync(file, `${file}.1`);
  } catch {
    /* no log yet */
  }
  return exists(file) ? fs.statSync(file).size : 0;
}

/** The broker's own "started" line, written to `file` after `offset` (the port opens before it can serve). */
export function startedLogged(file, offset) {
  let fd;
  try {
    fd = fs.openSync(file, 'r');
    const size = fs.fstatSync(fd).size;
    const from = Math.min(offset ?? 0, size);
    const buf = Buffer.alloc(size - from);
    fs.readSync(fd, buf, 0, buf.length, from);
    return buf.toString('utf8').includes('Kafka Server started');
  } catch {
    return false;
  } finally {
    if (fd != null) fs.closeSync(fd);
  }
}

export const missingPackages = () => [which('java') ? null : 'openjdk-17-jre-headless', which('mvn') ? null : 'maven'].filter(Boolean);

export const kafka = {
  name: 'kafka',
  envKey: 'KAFKA_BROKERS',
  ports: [PORTS.kafka, PORTS.kafkaController],
  log: F.out,
  marker: ['kafka.Kafka', F.props],
  timeoutMs: 90_000,
  missingPackages,
  pid() {
    return readPid(F.pid);
  },
  prepare() {
    privateDir(DIR);
    privateDir(F.data);
    writeIfChanged(
      F.props,
      render('kafka/server.properties', {
        KAFKA_DATA_DIR: F.data,
        BROKER_PORT: PORTS.kafka,
        CONTROLLER_PORT: PORTS.kafkaController,
      }),
    );
    writeIfChanged(F.log4j, fs.readFileSync(path.join(TEMPLATES, 'kafka/log4j.properties'), 'utf8'));
  },

  async start({ log }) {
    await ensureLibs(log);
    await formatStorage({ name: 'kafka', data: F.data, props: F.props, out: F.out, id: clusterIdIn(F.clusterId), log });
    this.logOffset = rotateLog(F.out);
    const pid = spawnDetached('java', javaArgs(['kafka.Kafka', F.props]), F.out, { cwd: DIR });
    fs.writeFileSync(F.pid, `${pid}\n`);
    return pid;
  },

  /** Still logging: after an unclean stop the broker recovers every partition's log before it answers. */
  busy() {
    return writtenWithin(F.out, 10_000);
  },

  async ready({ fresh } = {}) {
    if (!(await portOpen(PORTS.kafka))) return false;
    return fresh ? startedLogged(F.out, this.logOffset) : true;
  },

  async stop() {
    const pid = this.pid();
    if (!pid || !pidIs(pid, this.marker)) return 'not running';
    return killAndWait(pid, 30_000);
  },
};
