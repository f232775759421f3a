import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kafka, logLevel, type Admin } from 'kafkajs';
import { createPublisher, type Publisher } from '../../lib/kafka.js';
import { createMissingTopics } from '../../lib/topology.js';
import { createLogger } from '../../lib/logger.js';
// @ts-expect-error plain ESM script without types
import { CLUSTER_BROKERS, down, kafkaCluster, status, up } from '../../scripts/stack.mjs';

// `stack.mjs up --brokers 3` against the real thing: three KRaft nodes, a topic created the way the
// processes create theirs, one node killed with -9 while acks=all writes go on, the node started
// again and back in every ISR. Opt-in (KAFKA_CLUSTER_TEST=1): three more JVMs take about a minute
// of the 2-core machine, too much for every `npm test`; the chaos runner's `--brokers 3` covers the
// same ground under load. A cluster this file started is stopped again; one already running is left.
// The last test kills the transaction coordinator a producer keeps (lib/kafkajs-coordinators.ts).

type Node = { name: string; nodeId: number; pid(): number | null };
const nodes = kafkaCluster as Node[];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The partition of Kafka's transaction or offset topic an id's coordinator leads: Utils.abs(id.hashCode) % 6 (stack/kafka/cluster.properties). */
function statePartition(id: string): number {
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (Math.imul(31, h) + id.charCodeAt(i)) | 0;
  return (h === -2147483648 ? 0 : Math.abs(h)) % 6;
}

describe.skipIf(!process.env.KAFKA_CLUSTER_TEST)('the three-broker Kafka cluster of the stack', () => {
  const topic = `test.cluster.${randomUUID()}`;
  let startedHere = false;
  let admin: Admin;
  let publisher: Publisher;

  beforeAll(async () => {
    const before = (await status()) as Array<{ name: string; status: string }>;
    startedHere = !before.some((s) => s.name === 'kafka-1' && s.status === 'running');
    const { env } = await up({ quiet: true, brokers: 3 });
    expect(env.KAFKA_BROKERS).toBe(CLUSTER_BROKERS);
    const kafka = new Kafka({ brokers: CLUSTER_BROKERS.split(','), clientId: 'cluster-test', logLevel: logLevel.NOTHING });
    admin = kafka.admin();
    await admin.connect();
    publisher = createPublisher(kafka, createLogger('cluster-test', 'silent'));
  });

  afterAll(async () => {
    await publisher?.disconnect();
    await admin?.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin?.disconnect();
    if (startedHere) await down({ quiet: true, cluster: true });
  });

  /** The topic's partitions; a node that has not heard of the topic yet answers UNKNOWN_TOPIC_OR_PARTITION for a moment. */
  async function partitions() {
    for (let attempt = 0; ; attempt++) {
      try {
        return (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0]!.partitions;
      } catch (err) {
        if (!(err as { retriable?: boolean }).retriable || attempt >= 50) throw err;
        await sleep(100);
      }
    }
  }

  /** Started again after a kill, back in every ISR of the topic. */
  async function restart(): Promise<void> {
    await up({ quiet: true, brokers: 3 });
    const deadline = Date.now() + 60_000;
    let isr = (await partitions()).map((p) => p.isr.length);
    while (isr.some((n) => n !== 3) && Date.now() < deadline) {
      await sleep(250);
      isr = (await partitions()).map((p) => p.isr.length);
    }
    expect(isr).toEqual([3, 3, 3]);
  }

  it('gives a topic created by the processes three replicas and min.insync.replicas 2', async () => {
    await createMissingTopics(admin, [{ topic, numPartitions: 3 }]);
    expect((await partitions()).map((p) => p.replicas.length)).toEqual([3, 3, 3]);
    const { resources } = await admin.describeConfigs({
      resources: [{ type: 2, name: topic, configNames: ['min.insync.replicas'] }],
      includeSynonyms: false,
    });
    expect(resources[0]!.configEntries.find((e) => e.configName === 'min.insync.replicas')?.configValue).toBe('2');
  });

  it('acknowledges acks=all writes while one node is killed with -9, and the node rejoins every ISR once started again', async () => {
    const publish = (n: number) =>
      publisher.publish([{ topic, messages: Array.from({ length: 50 }, (_, i) => ({ key: `venue-${(n + i) % 7}`, value: `${n}-${i}` })) }]);
    await publish(0);
    // Partition 0's leader: writes to it must move to a new leader within the publish deadline.
    const leader = (await partitions()).find((p) => p.partitionId === 0)!.leader;
    const node = nodes.find((n) => n.nodeId === leader)!;
    process.kill(node.pid()!, 'SIGKILL');
    const killedAt = Date.now();
    for (let n = 1; Date.now() - killedAt < 8_000; n++) await publish(n);
    expect((await partitions()).every((p) => p.leader !== leader && p.isr.length === 2)).toBe(true);

    await restart();
    await publish(-1);
  }, 180_000);

  it('finds the new transaction coordinator when the node of the one a producer keeps is killed with -9, and commits on', async () => {
    // Retries spanning the controller's fencing of the dead node (broker.session.timeout.ms, 9 s):
    // until then the look-up still names it.
    const kafka = new Kafka({
      brokers: CLUSTER_BROKERS.split(','),
      clientId: 'cluster-coordinators-test',
      logLevel: logLevel.NOTHING,
      retry: { retries: 10, initialRetryTime: 200, maxRetryTime: 5000 },
    });
    const transactionalId = `cluster-coordinators-${randomUUID()}`;
    const group = `cluster-coordinators-${randomUUID()}`;
    const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
    let lookups = 0;
    producer.on(producer.events.REQUEST, ({ payload }: { payload: { apiName: string } }) => {
      if (payload.apiName === 'GroupCoordinator') lookups++;
    });
    const transact = async (n: number) => {
      const txn = await producer.transaction();
      await txn.send({ topic, acks: -1, messages: [{ key: 'k', value: `txn ${n}`, partition: 0 }] });
      await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: String(n) }] }] });
      await txn.commit();
    };
    await producer.connect();
    try {
      await transact(1);
      await transact(2);
      const kept = lookups;
      const state = (await admin.fetchTopicMetadata({ topics: ['__transaction_state'] })).topics[0]!.partitions;
      const coordinator = state.find((p) => p.partitionId === statePartition(transactionalId))!.leader;
      process.kill(nodes.find((n) => n.nodeId === coordinator)!.pid()!, 'SIGKILL');
      await transact(3);
      await transact(4);
      // Forgotten once its node stopped answering, looked up again, and kept again after.
      expect(lookups).toBeGreaterThan(kept);
      const [offsets] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
      expect(offsets!.partitions.find((p) => p.partition === 0)!.offset).toBe('4');
    } finally {
      await producer.disconnect();
    }
    await restart();
  }, 180_000);
});
