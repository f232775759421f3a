// Kafka as three KRaft nodes on loopback (`stack.mjs up --brokers 3`), each broker and controller:
// the quorum (three voters) and every partition (replication factor 3, min.insync.replicas 2)
// survive the loss of one node. The jars are the single broker's (.stack/kafka/libs); ports, data
// and cluster id are the cluster's own (.stack/kafka-cluster/<n>/), so it runs alongside the
// single broker. One service object per node, the same shape as every other engine module.

import fs from 'node:fs';
import path from 'node:path';
import {
  ENGINE_DIRS,
  HOST,
  PORTS,
  TEMPLATES,
  killAndWait,
  pidIs,
  portOpen,
  privateDir,
  readPid,
  render,
  run,
  spawnDetached,
  writeIfChanged,
  writtenWithin,
} from './common.mjs';
import { clusterIdIn, ensureLibs, formatStorage, javaArgs, missingPackages, rotateLog, startedLogged } from './kafka.mjs';

export const CLUSTER_SIZE = 3;
const DIR = ENGINE_DIRS.kafkaCluster;
const CLUSTER_ID = path.join(DIR, 'cluster-id');
const LOG4J = path.join(DIR, 'log4j.properties');
// Three JVMs next to the rest of the stack on a small machine.
const JAVA_OPTS = { heap: ['-Xms128m', '-Xmx384m'], log4j: LOG4J };

/** Node n (1-based) listens on 29092 + 100 (n − 1) (broker) and the port after it (controller). */
const brokerPort = (n) => PORTS.kafkaCluster + 100 * (n - 1);
const controllerPort = (n) => brokerPort(n) + 1;
const ids = Array.from({ length: CLUSTER_SIZE }, (_, i) => i + 1);

/** KAFKA_BROKERS for the cluster: every node's broker listener. */
export const CLUSTER_BROKERS = ids.map((n) => `${HOST}:${brokerPort(n)}`).join(',');

function clusterNode(n) {
  const dir = path.join(DIR, String(n));
  const f = {
    data: path.join(dir, 'data'),
    props: path.join(dir, 'server.properties'),
    out: path.join(dir, 'kafka.out'),
    pid: path.join(dir, 'kafka.pid'),
  };
  return {
    name: `kafka-${n}`,
    envKey: null,
    url: `${HOST}:${brokerPort(n)}`,
    nodeId: n,
    ports: [brokerPort(n), controllerPort(n)],
    log: f.out,
    marker: ['kafka.Kafka', f.props],
    // A node is "started" only once a quorum has formed: it waits for the others' JVMs too.
    timeoutMs: 150_000,
    missingPackages,
    pid() {
      return readPid(f.pid);
    },
    // Still logging: recovering its partitions after an unclean stop.
    busy() {
      return writtenWithin(f.out, 10_000);
    },
    prepare() {
      privateDir(DIR);
      privateDir(dir);
      privateDir(f.data);
      writeIfChanged(
        f.props,
        render('kafka/cluster.properties', {
          NODE_ID: n,
          VOTERS: ids.map((i) => `${i}@${HOST}:${controllerPort(i)}`).join(','),
          KAFKA_DATA_DIR: f.data,
          BROKER_PORT: brokerPort(n),
          CONTROLLER_PORT: controllerPort(n),
        }),
      );
      writeIfChanged(LOG4J, fs.readFileSync(path.join(TEMPLATES, 'kafka/log4j.properties'), 'utf8'));
      // Made here, before the nodes start concurrently: all three must be formatted with one id.
      clusterIdIn(CLUSTER_ID);
    },

    async start({ log }) {
      await ensureLibs(log);
      await formatStorage({
        name: this.name,
        data: f.data,
        props: f.props,
        out: f.out,
        id: clusterIdIn(CLUSTER_ID),
        log,
        javaOpts: JAVA_OPTS,
      });
      this.logOffset = rotateLog(f.out);
      const pid = spawnDetached('java', javaArgs(['kafka.Kafka', f.props], JAVA_OPTS), f.out, { cwd: dir });
      fs.writeFileSync(f.pid, `${pid}\n`);
      return pid;
    },

    async ready({ fresh } = {}) {
      if (!(await portOpen(brokerPort(n)))) return false;
      return fresh ? startedLogged(f.out, this.logOffset) : true;
    },

    async stop() {
      const pid = this.pid();
      if (!pid || !pidIs(pid, this.marker)) return 'not running';
      // The last node of a cluster going down waits in vain for a quorum to confirm its controlled
      // shutdown; it has nothing left to hand over, so it is not waited for long.
      return killAndWait(pid, 10_000);
    },
  };
}

/** The cluster's nodes, node 1 first. */
export const kafkaCluster = ids.map(clusterNode);

/** The node id of the quorum's leader (the active controller), or null when no controller answers. */
export async function quorumLeader() {
  const controllers = ids.map((n) => `${HOST}:${controllerPort(n)}`).join(',');
  const r = await run(
    'java',
    javaArgs(['org.apache.kafka.tools.MetadataQuorumCommand', '--bootstrap-controller', controllers, 'describe', '--status'], {
      heap: ['-Xmx128m'],
      log4j: LOG4J,
    }),
  );
  const m = r.out.match(/^LeaderId:\s+(\d+)/m);
  return r.code === 0 && m ? Number(m[1]) : null;
}
