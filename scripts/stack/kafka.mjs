// Kafka 3.9 in KRaft combined mode (broker + controller, node 1) on Java 17. The jars come from
// Maven (stack/kafka/pom.xml) into .stack/kafka/libs, fetched again only when the pom changes.

import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  PORTS, STACK_DIR, StackError, TEMPLATES, exists, killAndWait, mkdirp, pidIs, portOpen, readPid, readText, rel,
  render, run, spawnDetached, which, writeIfChanged,
} from './common.mjs';

const DIR = path.join(STACK_DIR, 'kafka');
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

function javaArgs(extra) {
  return [
    '-Xms256m', '-Xmx768m', '-XX:+UseG1GC', '-XX:MaxGCPauseMillis=20', '-XX:+ExitOnOutOfMemoryError',
    '-Djava.awt.headless=true', '-Djava.net.preferIPv4Stack=true', `-Dlog4j.configuration=file:${F.log4j}`,
    '-cp', `${F.libs}/*`, ...extra,
  ];
}

/** Fetches the jars with mvn unless .stack/kafka/libs already holds those of the current pom. */
async function ensureLibs(log) {
  const pom = path.join(TEMPLATES, 'kafka', 'pom.xml');
  const hash = createHash('sha256').update(fs.readFileSync(pom)).digest('hex');
  const jars = exists(F.libs) ? fs.readdirSync(F.libs).filter((f) => f.endsWith('.jar')) : [];
  if (jars.some((j) => j.startsWith('kafka_2.13-')) && readText(F.libsHash)?.trim() === hash) return;
  log(`kafka      fetching jars with mvn (${rel(F.mvnLog)})`);
  const tmp = `${F.libs}.tmp`;
  fs.rmSync(tmp, { recursive: true, force: true });
  const r = await run('mvn', ['-q', '-B', '-f', pom, 'dependency:copy-dependencies', `-DoutputDirectory=${tmp}`], {
    outFile: F.mvnLog,
  });
  const got = exists(tmp) ? fs.readdirSync(tmp) : [];
  if (r.code !== 0 || !got.some((j) => j.startsWith('kafka_2.13-'))) {
    throw new StackError('kafka', `mvn dependency:copy-dependencies failed (exit ${r.code})`, F.mvnLog);
  }
  fs.rmSync(F.libs, { recursive: true, force: true });
  fs.renameSync(tmp, F.libs);
  fs.writeFileSync(F.libsHash, `${hash}\n`);
}

/** Formats the storage once; the cluster id is kept in .stack/kafka/cluster-id. */
async function format(log) {
  if (exists(path.join(F.data, 'meta.properties'))) return false;
  let id = readText(F.clusterId)?.trim();
  if (!id) {
    // Same shape as `kafka-storage random-uuid`: a random (v4) UUID, base64url without padding,
    // never starting with '-'. Saves one JVM start (~1-2 s) on a cold boot.
    do { id = Buffer.from(randomUUID().replace(/-/g, ''), 'hex').toString('base64url'); } while (id.startsWith('-'));
    fs.writeFileSync(F.clusterId, `${id}\n`);
  }
  log(`kafka      formatting ${rel(F.data)} (cluster id ${id})`);
  const r = await run('java', javaArgs(['kafka.tools.StorageTool', 'format', '-t', id, '-c', F.props]), {
    outFile: F.out,
  });
  if (r.code !== 0) throw new StackError('kafka', `kafka-storage format failed (exit ${r.code})`, F.out);
  return true;
}

export const kafka = {
  name: 'kafka',
  envKey: 'KAFKA_BROKERS',
  ports: [PORTS.kafka, PORTS.kafkaController],
  log: F.out,
  marker: ['kafka.Kafka', F.props],
  timeoutMs: 90_000,
  missingPackages: () => [which('java') ? null : 'openjdk-17-jre-headless', which('mvn') ? null : 'maven'].filter(Boolean),
  pid() { return readPid(F.pid); },
  prepare() {
    mkdirp(F.data);
    writeIfChanged(F.props, render('kafka/server.properties', {
      KAFKA_DATA_DIR: F.data, BROKER_PORT: PORTS.kafka, CONTROLLER_PORT: PORTS.kafkaController,
    }));
    writeIfChanged(F.log4j, fs.readFileSync(path.join(TEMPLATES, 'kafka/log4j.properties'), 'utf8'));
  },

  async start({ log }) {
    await ensureLibs(log);
    await format(log);
    try {
      if (fs.statSync(F.out).size > 50 * 1024 * 1024) fs.renameSync(F.out, `${F.out}.1`);
    } catch { /* no log yet */ }
    this.logOffset = exists(F.out) ? fs.statSync(F.out).size : 0;
    const pid = spawnDetached('java', javaArgs(['kafka.Kafka', F.props]), F.out, { cwd: DIR });
    fs.writeFileSync(F.pid, `${pid}\n`);
    return pid;
  },

  /** The broker's own "started" line, written after this start (the port opens before it can serve). */
  startedLogged() {
    let fd;
    try {
      fd = fs.openSync(F.out, 'r');
      const size = fs.fstatSync(fd).size;
      const from = Math.min(this.logOffset ?? 0, size);
      const buf = Buffer.alloc(size - from);
      fs.readSync(fd, buf, 0, buf.length, from);
      return buf.toString('utf8').includes('Kafka Server started');
    } catch { return false; } finally { if (fd != null) fs.closeSync(fd); }
  },

  async ready({ fresh } = {}) {
    if (!(await portOpen(PORTS.kafka))) return false;
    return fresh ? this.startedLogged() : true;
  },

  async stop() {
    const pid = this.pid();
    if (!pid || !pidIs(pid, this.marker)) return 'not running';
    return killAndWait(pid, 30_000);
  },
};
