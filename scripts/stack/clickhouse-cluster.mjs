// ClickHouse as a cluster of 2 shards x 2 replicas on loopback (`stack.mjs up --clickhouse-cluster`),
// coordinated by one ZooKeeper 3.8 server run from the Kafka jars (.stack/kafka/libs holds
// zookeeper-3.8.4.jar and its dependencies). Each node is the same Debian clickhouse-server 18.16
// binary as the single server, with its own config, data and ports under
// .stack/clickhouse-cluster/<node>/; the single server (18123) keeps running beside it untouched.
// One service object per process, the same shape as every other engine module.
//
// Node sNrM (shard N, replica M; k = 2 (N − 1) + M − 1 = 0..3) listens on
//   HTTP 28123 + 100 k, native TCP 28124 + 100 k, interserver HTTP 28125 + 100 k.
// ZooKeeper listens on 22181.

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  HOST,
  STACK_DIR,
  StackError,
  TEMPLATES,
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
import { clickhouseEnv } from './clickhouse.mjs';
import { localPassword } from './env.mjs';
import { ensureLibs, javaArgs, missingPackages as javaPackages, rotateLog } from './kafka.mjs';

/** The cluster's name in <remote_servers>: CLICKHOUSE_CLUSTER of the processes that use it. */
export const CH_CLUSTER_NAME = 'venue_cluster';
export const CH_SHARDS = 2;
export const CH_REPLICAS = 2;
export const ZK_PORT = 22181;
const DIR = path.join(STACK_DIR, 'clickhouse-cluster');
const USER = 'default';

const nodeSpecs = [];
for (let s = 1; s <= CH_SHARDS; s++) {
  for (let r = 1; r <= CH_REPLICAS; r++) {
    const k = nodeSpecs.length;
    nodeSpecs.push({
      shard: s,
      replica: r,
      name: `ch-s${s}r${r}`,
      http: 28123 + 100 * k,
      tcp: 28124 + 100 * k,
      interserver: 28125 + 100 * k,
    });
  }
}

/** Every node's HTTP URL, shard 1 replica 1 first (CLICKHOUSE_CLUSTER_NODES). */
export const CH_CLUSTER_NODES = nodeSpecs.map((n) => `http://${HOST}:${n.http}`);

/** The engine variables that point the processes at the cluster: queries go to node s1r1. */
export function clickhouseClusterEnv() {
  return { CLICKHOUSE_URL: CH_CLUSTER_NODES[0], CLICKHOUSE_CLUSTER: CH_CLUSTER_NAME, CLICKHOUSE_CLUSTER_NODES: CH_CLUSTER_NODES.join(',') };
}

// ---------------------------------------------------------------- ZooKeeper

const ZK_DIR = path.join(DIR, 'zookeeper');
const ZK = {
  data: path.join(ZK_DIR, 'data'),
  cfg: path.join(ZK_DIR, 'zoo.cfg'),
  log4j: path.join(ZK_DIR, 'log4j.properties'),
  out: path.join(ZK_DIR, 'zookeeper.out'),
  pid: path.join(ZK_DIR, 'zookeeper.pid'),
};

/** Sends a four-letter word to ZooKeeper; resolves its answer ('' when it does not answer). */
export function zkCommand(word, timeoutMs = 1000) {
  return new Promise((resolve) => {
    let out = '';
    const s = net.connect({ port: ZK_PORT, host: HOST });
    const done = () => {
      s.destroy();
      resolve(out);
    };
    s.setTimeout(timeoutMs, done);
    s.once('connect', () => s.write(word));
    s.on('data', (c) => {
      out += c;
    });
    s.once('end', done);
    s.once('error', done);
  });
}

/**
 * Serving requests: `ruok` answers `imok` as soon as the process listens, while the server may
 * still be loading its snapshot and log ("not currently serving requests"); `stat` names its mode
 * only once it serves.
 */
export async function zkServing() {
  return /^Mode: /m.test(await zkCommand('stat'));
}

export const zookeeper = {
  name: 'zookeeper',
  envKey: null,
  url: `${HOST}:${ZK_PORT}`,
  ports: [ZK_PORT],
  log: ZK.out,
  marker: ['org.apache.zookeeper.server.ZooKeeperServerMain', ZK.cfg],
  timeoutMs: 60_000,
  missingPackages: javaPackages,
  pid() {
    return readPid(ZK.pid);
  },
  prepare() {
    privateDir(DIR);
    privateDir(ZK_DIR);
    privateDir(ZK.data);
    writeIfChanged(ZK.cfg, render('clickhouse-cluster/zoo.cfg', { ZK_DATA: ZK.data, ZK_PORT }));
    writeIfChanged(ZK.log4j, fs.readFileSync(path.join(TEMPLATES, 'clickhouse-cluster/log4j.properties'), 'utf8'));
  },
  async start({ log }) {
    await ensureLibs(log);
    rotateLog(ZK.out);
    const pid = spawnDetached(
      'java',
      javaArgs(['org.apache.zookeeper.server.ZooKeeperServerMain', ZK.cfg], { heap: ['-Xms64m', '-Xmx256m'], log4j: ZK.log4j }),
      ZK.out,
      { cwd: ZK_DIR },
    );
    fs.writeFileSync(ZK.pid, `${pid}\n`);
    return pid;
  },
  async ready() {
    return zkServing();
  },
  async stop() {
    const pid = this.pid();
    if (!pid || !pidIs(pid, this.marker)) return 'not running';
    return killAndWait(pid, 10_000);
  },
};

// ---------------------------------------------------------------- ClickHouse nodes

/** The <shard> elements of <remote_servers>: internal_replication, so an insert goes to one replica and replication does the rest. */
function shardsXml(password) {
  const out = [];
  for (let s = 1; s <= CH_SHARDS; s++) {
    out.push('            <shard>', '                <internal_replication>true</internal_replication>');
    for (const n of nodeSpecs.filter((x) => x.shard === s)) {
      out.push(
        '                <replica>',
        `                    <host>${HOST}</host>`,
        `                    <port>${n.tcp}</port>`,
        `                    <user>${USER}</user>`,
        `                    <password>${password}</password>`,
        '                </replica>',
      );
    }
    out.push('            </shard>');
  }
  return out.join('\n');
}

function clusterNode(spec) {
  const dir = path.join(DIR, spec.name);
  const f = {
    config: path.join(dir, 'config.xml'),
    log: path.join(dir, 'clickhouse-server.log'),
    errLog: path.join(dir, 'clickhouse-server.err.log'),
    out: path.join(dir, 'stdout.log'),
    pid: path.join(dir, 'clickhouse-server.pid'),
  };
  return {
    name: spec.name,
    envKey: null,
    url: `http://${HOST}:${spec.http}`,
    shard: spec.shard,
    replica: spec.replica,
    ports: [spec.http, spec.tcp, spec.interserver],
    log: f.log,
    failLogs: [f.errLog, f.out, f.log],
    marker: ['clickhouse-server', f.config],
    timeoutMs: 60_000,
    missingPackages: () =>
      [which('clickhouse-server') ? null : 'clickhouse-server', which('clickhouse-client') ? null : 'clickhouse-client'].filter(Boolean),
    pid() {
      return readPid(f.pid);
    },
    prepare() {
      privateDir(DIR);
      privateDir(dir);
      privateDir(path.join(dir, 'data'));
      for (const d of ['tmp', 'user_files', 'format_schemas']) mkdirp(path.join(dir, d));
      this.password = localPassword('CLICKHOUSE_PASSWORD');
      writeIfChanged(
        f.config,
        render('clickhouse-cluster/node-config.xml', {
          CH_DIR: dir,
          HTTP_PORT: spec.http,
          TCP_PORT: spec.tcp,
          INTERSERVER_PORT: spec.interserver,
          CLUSTER: CH_CLUSTER_NAME,
          SHARDS: shardsXml(this.password),
          ZK_PORT,
          SHARD: spec.shard,
          REPLICA: `r${spec.replica}`,
        }),
        0o600,
      );
      const hash = createHash('sha256').update(this.password).digest('hex');
      writeIfChanged(path.join(dir, 'users.xml'), render('clickhouse-cluster/users.xml', { PASSWORD_SHA256: hash }), 0o600);
      writeIfChanged(path.join(dir, 'metrika.xml'), '<?xml version="1.0"?>\n<yandex></yandex>\n');
    },
    async ready() {
      const r = await httpGet(`${this.url}/ping`, { timeoutMs: 1000 });
      return !!r && r.status === 200 && r.body.trim() === 'Ok.';
    },
    async start() {
      // 18.16 exits at start-up when it holds replicated tables and ZooKeeper does not answer
      // (they start together: wait for it).
      const deadline = Date.now() + 60_000;
      while (!(await zkServing())) {
        if (Date.now() > deadline) throw new StackError(spec.name, `ZooKeeper does not answer on ${HOST}:${ZK_PORT}; not starting`, ZK.out);
        await sleep(200);
      }
      const pid = spawnDetached(which('clickhouse-server'), [`--config-file=${f.config}`], f.out, { cwd: dir, env: clickhouseEnv() });
      fs.writeFileSync(f.pid, `${pid}\n`);
      return pid;
    },
    async query(sql) {
      const auth = `Basic ${Buffer.from(`${USER}:${this.password}`).toString('base64')}`;
      const deadline = Date.now() + 15_000;
      for (;;) {
        const r = await httpGet(`${this.url}/`, { method: 'POST', body: sql, headers: { authorization: auth }, timeoutMs: 10_000 });
        if (r?.status !== 401 || Date.now() > deadline) return r;
        await sleep(250);
      }
    },
    async stop() {
      const pid = this.pid();
      if (!pid || !pidIs(pid, this.marker)) return 'not running';
      return killAndWait(pid, 30_000);
    },
    /** kill -9 (the chaos runner's replica loss); resolves once the process is gone. */
    async kill() {
      const pid = this.pid();
      if (!pid || !pidIs(pid, this.marker)) return false;
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
      for (let i = 0; i < 100 && pidIs(pid, this.marker); i++) await sleep(100);
      return true;
    },
  };
}

/** The cluster's four ClickHouse nodes, s1r1 first. */
export const clickhouseNodes = nodeSpecs.map(clusterNode);

/** ZooKeeper then the nodes: what `up --clickhouse-cluster` adds and `down --clickhouse-cluster` stops. */
export const clickhouseCluster = [zookeeper, ...clickhouseNodes];
