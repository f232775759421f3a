import {
  CompressionTypes,
  Kafka,
  Partitioners,
  logLevel,
  type Admin,
  type Consumer,
  type ConsumerConfig,
  type ConsumerSubscribeTopics,
  type ICustomPartitioner,
  type Producer,
  type TopicMessages,
  type LogEntry,
  type RetryOptions,
} from 'kafkajs';
import { createRequire } from 'node:module';
import type { Config } from './config.js';
import { mendKafkajs } from './kafkajs-mends.js';
import type { Logger } from './logger.js';

const levels: Record<number, 'error' | 'warn' | 'info' | 'debug'> = {
  [logLevel.ERROR]: 'error',
  [logLevel.WARN]: 'warn',
  [logLevel.INFO]: 'info',
  [logLevel.DEBUG]: 'debug',
};

/**
 * kafkajs warns whenever an idempotent producer's retries are bounded: after a send that failed
 * but landed, the producer would reuse its sequence numbers and the broker drop the next batch as
 * a duplicate. createPublisher never reuses a producer after a failed send (a fresh producer id
 * takes over), which removes that cause; bounded retries are what keep a send from landing long
 * after its request was refused. So this one line is not logged.
 */
const BOUNDED_RETRIES_WARNING = 'Limiting retries for the idempotent producer may invalidate EoS guarantees';

/**
 * For transactional producers (the stream processors): a transaction started right after the
 * previous commit is answered CONCURRENT_TRANSACTIONS until the broker has written the commit's
 * markers, a few milliseconds later. kafkajs retries it with the client's back-off, so a short
 * first retry keeps a processor from being capped at a few transactions a second under a trickle of
 * input (docs/reliability.md#what-fuzzing-and-the-chaos-runner-found-and-what-changed).
 */
export const TRANSACTIONAL_RETRY: RetryOptions = { retries: 10, initialRetryTime: 20, maxRetryTime: 2000 };

/**
 * kafkajs logs every error response, and every send it retries, as an error, also those failing
 * with a retriable error it waits out itself: a topic just created and not yet known to the broker
 * asked or without a leader yet, a coordinator still loading on a fresh broker, a transaction begun
 * before the previous commit's markers were written. Those are debug: when kafkajs gives up, the
 * error reaches our code, which logs it. kafkajs logs only the error's text, so the retriable texts
 * come from its own error table.
 */
const RETRIABLE_ERRORS = new Set(
  (createRequire(import.meta.url)('kafkajs/src/protocol/error.js') as { errorCodes: { message: string; retriable?: boolean }[] }).errorCodes
    .filter((e) => e.retriable)
    .map((e) => e.message),
);

/**
 * Answers kafkajs handles itself though its table does not call them retriable: a rebalance under
 * way (it rejoins the group: every start or stop of another member of a group causes one), and a
 * CreateTopics answer with errors (kafkajs's `createTopics` returns normally when every topic
 * already exists, which happens when two processes create the same topics at once, and throws
 * anything else to our code).
 */
const HANDLED_ERRORS = new Set(['The group is rebalancing, so a rejoin is needed', 'Topic creation errors']);
/** kafkajs's own note that it rejoins after a rebalance: how a group with several members works, not a warning. */
const REJOINING = 'The group is rebalancing, re-joining';

const RETRIED_SEND = 'Failed to send messages: ';

function retriedByKafkajs(message: string, error: unknown): boolean {
  if (message.startsWith(RETRIED_SEND)) return RETRIABLE_ERRORS.has(message.slice(RETRIED_SEND.length));
  return message.startsWith('Response ') && (RETRIABLE_ERRORS.has(String(error)) || HANDLED_ERRORS.has(String(error)));
}

const unmended = mendKafkajs();

export function createKafka(
  cfg: Config,
  log: Logger,
  clientId = cfg.KAFKA_CLIENT_ID,
  retry: RetryOptions = { retries: 5, initialRetryTime: 200, maxRetryTime: 5000 },
): Kafka {
  const kafkaLog = log.child({ component: 'kafka' });
  for (const warning of unmended) kafkaLog.warn(warning);
  return new Kafka({
    clientId,
    brokers: cfg.KAFKA_BROKERS,
    connectionTimeout: 3000,
    requestTimeout: 10000,
    retry,
    logLevel: logLevel.WARN,
    logCreator:
      () =>
      ({ level, log: entry }: LogEntry) => {
        const { message, ...rest } = entry;
        if (message === BOUNDED_RETRIES_WARNING) return;
        kafkaLog[retriedByKafkajs(message, rest.error) ? 'debug' : message === REJOINING ? 'info' : (levels[level] ?? 'info')](
          rest,
          message,
        );
      },
  });
}

/**
 * `consumer.subscribe`, retried while the broker asked does not know a topic yet: on a cluster a
 * new topic reaches each broker's metadata a moment apart (seconds on a loaded machine), and
 * kafkajs fails a subscription at the first broker that has not applied it.
 */
export async function subscribeWhenKnown(consumer: Consumer, subscription: ConsumerSubscribeTopics, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await consumer.subscribe(subscription);
    } catch (err) {
      if ((err as { type?: string }).type !== 'UNKNOWN_TOPIC_OR_PARTITION' || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/**
 * The next offset of every partition of `topic`, retried while the broker is not yet the leader of
 * a partition it was just given (a new topic answers `ListOffsets` so for a moment, and kafkajs's
 * admin does not retry it).
 */
export async function topicOffsets(admin: Admin, topic: string, timeoutMs = 30_000): ReturnType<Admin['fetchTopicOffsets']> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await admin.fetchTopicOffsets(topic);
    } catch (err) {
      if (!(err as { retriable?: boolean }).retriable || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

export async function topicEndOffsets(admin: Admin, topic: string, timeoutMs = 30_000): Promise<Map<number, string>> {
  return new Map((await topicOffsets(admin, topic, timeoutMs)).map((o) => [o.partition, o.high]));
}

/**
 * The settings of each kind of consumer, so every reader of a kind behaves alike:
 * - `member`: a long-lived group member that commits its offsets itself and reads only committed
 *   messages (the processors write in transactions). A member killed with -9 holds its partitions
 *   until its session lapses; with a heartbeat every second (the sink's goes on while a write is
 *   retried) 10 s costs nothing and shortens that stall.
 * - `bulk`: a `member` fetching up to 4 MB per partition and fetch: at kafkajs's 1 MB default a
 *   batch's fixed costs (a processor's transaction, a sink's insert), not the processing, bound the rate.
 * - `live`: a `bulk` member whose first, empty fetch (an edge listens once every tail's has
 *   answered) lasts its whole wait: 250 ms.
 * - `hold`: a `bulk` member that fetches while it holds a batch (the events sink): the broker
 *   answers once 512 KB are there or 250 ms passed, so a message waits at most that long to join
 *   the batch, and a steady load is fetched a few times a second rather than a message at a time.
 * - `restore`: a throwaway reader of a changelog, gone once it has read to the end.
 * Fetches wait up to a second: the broker answers as soon as data arrives (minBytes 1), and at
 * 250 ms an idle pipeline's dozen members cost it and the broker about twice the CPU
 * (benchmarks/README.md, "Idle consumers").
 */
const MEMBER = {
  sessionTimeout: 10_000,
  heartbeatInterval: 1_000,
  maxWaitTimeInMs: 1_000,
  readUncommitted: false,
  retry: { retries: 10, initialRetryTime: 300, maxRetryTime: 10_000 },
};
const BULK = { ...MEMBER, maxBytesPerPartition: 4 * 1024 * 1024 };
const CONSUMER_KINDS = {
  member: MEMBER,
  bulk: BULK,
  live: { ...BULK, maxWaitTimeInMs: 250 },
  hold: { ...BULK, minBytes: 512 * 1024, maxWaitTimeInMs: 250 },
  restore: { sessionTimeout: 10_000, maxWaitTimeInMs: 100, readUncommitted: false },
} satisfies Record<string, Omit<ConsumerConfig, 'groupId'>>;
export type ConsumerKind = keyof typeof CONSUMER_KINDS;

/** kafkajs consumer options of a kind; `overrides` left undefined keep the kind's value. */
export function consumerOptions(kind: ConsumerKind, overrides: Partial<ConsumerConfig> & { groupId: string }): ConsumerConfig {
  const given = Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined));
  return { ...CONSUMER_KINDS[kind], ...given, groupId: overrides.groupId };
}

/**
 * kafkajs's Java-compatible murmur2 partitioner (its default, named to silence its warning), with
 * the last string key's partition remembered: an ingest batch is many messages with one key (the
 * venue), so the key is hashed once per batch instead of once per message.
 */
const keyedPartitioner: ICustomPartitioner = () => {
  const partitionOf = Partitioners.DefaultPartitioner();
  let last: { topic: string; key: string; partitions: number; partition: number } | undefined;
  return (args) => {
    const { key, partition } = args.message;
    if (typeof key !== 'string' || (partition !== undefined && partition !== null)) return partitionOf(args);
    if (last?.key === key && last.topic === args.topic && last.partitions === args.partitionMetadata.length) return last.partition;
    last = { topic: args.topic, key, partitions: args.partitionMetadata.length, partition: partitionOf(args) };
    return last.partition;
  };
};

/**
 * kafkajs groups a send's messages by partition in time quadratic in their number (it copies the
 * partition's list for every message); sends of at most this many keep it linear. Cost at 10,000
 * messages: benchmarks/README.md#benchingest.
 */
export const MAX_MESSAGES_PER_SEND = 500;

/** A send's bytes (keys and values) stay under the 1 MB a broker takes per partition and request by default. */
export const MAX_BYTES_PER_SEND = 768 * 1024;

const sizeOf = (m: TopicMessages['messages'][number]) => (m.value?.length ?? 0) + (m.key?.length ?? 0);

/** `topicMessages` cut into sends of at most `max` messages and about `maxBytes`, in order (sent one after the other, order holds). */
export function inSends(topicMessages: TopicMessages[], max = MAX_MESSAGES_PER_SEND, maxBytes = MAX_BYTES_PER_SEND): TopicMessages[][] {
  const sends: TopicMessages[][] = [];
  let current: TopicMessages[] = [];
  let count = 0;
  let bytes = 0;
  for (const { topic, messages } of topicMessages) {
    let part: TopicMessages['messages'] = [];
    for (const m of messages) {
      const size = sizeOf(m);
      if (count > 0 && (count === max || bytes + size > maxBytes)) {
        if (part.length > 0) current.push({ topic, messages: part });
        sends.push(current);
        current = [];
        part = [];
        count = 0;
        bytes = 0;
      }
      part.push(m);
      count++;
      bytes += size;
    }
    if (part.length > 0) current.push({ topic, messages: part });
  }
  if (current.length > 0) sends.push(current);
  return sends;
}

/**
 * An idempotent producer: acks from all in-sync replicas, no duplicates on retry. Without `retry`
 * kafkajs retries an idempotent send forever; pass bounded retries only together with a fresh
 * producer after a failure (see createPublisher).
 */
export function createProducer(kafka: Kafka, retry?: RetryOptions): Producer {
  return kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
    createPartitioner: keyedPartitioner,
    ...(retry ? { retry } : {}),
  });
}

/** Thrown when the broker did not acknowledge a batch in time; nothing may be assumed written. */
export class PublishError extends Error {
  override readonly name = 'PublishError';
}

/**
 * Publishes batches that must be acknowledged by all in-sync replicas before the caller answers,
 * kept behind this small interface so the Kafka client can be swapped.
 */
export interface Publisher {
  /**
   * Sends the batches of one or more topics in one request, resolving once every message is
   * acknowledged (acks = all); rejects with PublishError within `deadlineMs`.
   */
  publish(batches: TopicMessages[]): Promise<void>;
  connect(): Promise<void>;
  disconnect(): Promise<void>;
}

export interface PublisherOptions {
  /** Upper bound on waiting for a producer + connect + send, so a dead broker fails a request in seconds. */
  deadlineMs?: number;
  /** Producers, each carrying one batch at a time: how many batches are sent at once. */
  concurrency?: number;
}

/**
 * A Publisher over a pool of idempotent producers with bounded retries, each carrying **one batch
 * at a time**. After a failed or timed-out send the batch may or may not have been written, and
 * kafkajs does not advance that producer's sequence numbers: the next batch it sent would reuse
 * them and the broker could drop it as a duplicate while acknowledging it. So a producer whose
 * send failed is never used again (a fresh one, with a new producer id, takes its place), and no
 * other batch was queued behind it, which is why a producer never carries two batches at once:
 * a queued batch could be acknowledged and lost (docs/reliability.md#results). A send that
 * completes after its caller was told it failed leaves the producer usable.
 */
export function createPublisher(kafka: Kafka, log: Logger, opts: PublisherOptions = {}): Publisher {
  const deadlineMs = opts.deadlineMs ?? 5000;
  const size = opts.concurrency ?? 4;
  // Compression costs more CPU than the socket write it saves (benchmarks/README.md#benchingest).
  const compression = CompressionTypes.None;
  // About 5.5 s of back-off (0.1, 0.2, 0.4, 0.8, then 1 s each), so the deadline ends a send, not
  // the count: a partition whose leader died is retried until it has a new one (about 3 s,
  // docs/scaling.md#kafka) instead of failing after the first second. Still bounded: a
  // refused send stops being retried about when its deadline has passed.
  const make = () => createProducer(kafka, { retries: 8, initialRetryTime: 100, maxRetryTime: 1000 });
  let closed = false;
  const all = new Set<Producer>();
  const idle: Producer[] = [];
  const waiting: Array<{ take: (p: Producer) => void; expired: () => boolean }> = [];
  const ready = new WeakMap<Producer, Promise<void>>();

  // One connect attempt at a time per producer; a failed attempt is retried by the next caller.
  const connectOf = (p: Producer): Promise<void> => {
    let attempt = ready.get(p);
    if (!attempt) {
      attempt = p.connect().catch((err: Error) => {
        ready.delete(p);
        throw err;
      });
      ready.set(p, attempt);
    }
    return attempt;
  };

  const release = (p: Producer) => {
    if (closed) return;
    let next = waiting.shift();
    while (next?.expired()) next = waiting.shift();
    if (next) next.take(p);
    else idle.push(p);
  };

  const add = () => {
    const p = make();
    all.add(p);
    release(p);
  };
  for (let i = 0; i < size; i++) add();

  const acquire = (expired: () => boolean): Promise<Producer> => {
    const p = idle.pop();
    return p ? Promise.resolve(p) : new Promise((take) => waiting.push({ take, expired }));
  };

  const retire = (failed: Producer, err: Error) => {
    log.warn({ err }, 'kafka publish failed; replacing the producer');
    all.delete(failed);
    void failed.disconnect().catch(() => undefined);
    if (closed) return;
    add();
  };

  return {
    connect: async () => {
      if (closed) throw new PublishError('publisher is closed');
      await Promise.all(idle.map(connectOf));
    },
    async publish(batches) {
      if (closed) throw new PublishError('publisher is closed');
      let expired = false;
      let sending = false;
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          expired = true;
          reject(new PublishError(`no acknowledgement from Kafka within ${deadlineMs} ms`));
        }, deadlineMs);
      });
      let current: Producer | undefined;
      const work = acquire(() => expired).then(async (p) => {
        current = p;
        await connectOf(p);
        // Never send after the caller has been told the batch failed.
        if (expired) throw new PublishError('deadline passed before sending');
        sending = true;
        await p.sendBatch({ topicMessages: batches, acks: -1, timeout: deadlineMs, compression });
      });
      work.then(
        () => release(current!),
        (err: Error) => {
          if (!current) return;
          // Only a producer that sent may have sequence numbers the broker has seen and kafkajs has not.
          if (sending) retire(current, err);
          else release(current);
        },
      );
      try {
        await Promise.race([work, deadline]);
      } catch (err) {
        throw err instanceof PublishError ? err : new PublishError((err as Error).message);
      } finally {
        clearTimeout(timer);
      }
    },
    async disconnect() {
      closed = true;
      await Promise.all([...all].map((p) => p.disconnect().catch(() => undefined)));
    },
  };
}
