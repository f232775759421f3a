import type { Kafka } from 'kafkajs';
import type { Config } from '../../lib/config.js';
import type { Logger } from '../../lib/logger.js';
import { ensureTopology } from '../../lib/topology.js';
import { runLiveTail, type RunningConsumer } from '../../lib/consumer.js';
import type { AnyStreamSource, StreamItem } from './sources.js';
import { newOutbox, type Subscriber, type Subscriptions } from './subscriptions.js';
import { withTimeout } from '../../lib/timers.js';

/** Queued pushes after which a batch is flushed to the sockets before reading on. */
const FLUSH_EVERY = 5000;
/** How long start-up waits for every consumer's first fetch (its position at the topic's end) before listening anyway. */
const READY_TIMEOUT_MS = 30_000;

interface Tail {
  source: AnyStreamSource;
  topic: string;
  tailed: number;
  undecodable: number;
  lastMessageAt: number | null;
  connected: boolean;
  ready: boolean;
}

export interface TailsHealth {
  connected: boolean;
  sources: Array<{
    name: string;
    topic: string;
    ready: boolean;
    messagesTailed: number;
    undecodable: number;
    lastMessageAt: string | null;
  }>;
}

export interface RunningTails {
  health(): TailsHealth;
  /** Leaves the consumer groups. */
  stop(): Promise<void>;
}

/**
 * Tails every stream source and fans its items out to the registry's subscribers. Resolves once
 * each consumer has made its first fetch from the topic's end (or READY_TIMEOUT_MS has passed).
 */
export async function startTails<C extends Subscriber>(
  kafka: Kafka,
  cfg: Config,
  log: Logger,
  opts: { sources: readonly AnyStreamSource[]; instanceId: string; registry: Subscriptions<C> },
): Promise<RunningTails> {
  const { registry, instanceId } = opts;
  // The configured topics, derived streams included: the edge may start before the pipeline.
  await ensureTopology(kafka, cfg);
  const tails: Tail[] = opts.sources.map((source) => ({
    source,
    topic: source.topic(cfg.KAFKA_TOPIC_PREFIX),
    tailed: 0,
    undecodable: 0,
    lastMessageAt: null,
    connected: false,
    ready: false,
  }));
  const consumers: RunningConsumer[] = [];
  let markReady: () => void = () => undefined;
  const allReady = new Promise<void>((resolve) => (markReady = resolve));
  for (const tail of tails) {
    const slog = log.child({ source: tail.source.name });
    // Every edge instance must see every partition, so each one is its own consumer group and
    // starts at the topic's end: the stream is live, history comes from the REST API.
    consumers.push(
      await runLiveTail(kafka, slog, {
        groupId: `${cfg.KAFKA_TOPIC_PREFIX}.edge.${instanceId}.${tail.source.name}`,
        topic: tail.topic,
        onCreate: (consumer) => {
          consumer.on(consumer.events.CRASH, () => (tail.connected = false));
          consumer.on(consumer.events.FETCH_START, () => (tail.connected = true));
          // The first completed fetch means the tail is reading from the end offsets it took at start.
          consumer.on(consumer.events.FETCH, () => {
            if (tail.ready) return;
            tail.ready = true;
            if (tails.every((t) => t.ready)) markReady();
          });
        },
        eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
          const outbox = newOutbox();
          for (const message of batch.messages) {
            if (!isRunning() || isStale()) break;
            // Every stream is keyed by venue: a venue nobody here watches is not even decoded.
            const key = message.key?.toString();
            if (key === undefined || registry.watches(key)) {
              let items: StreamItem[] = [];
              try {
                items = tail.source.toItems(tail.source.decode(message.value));
              } catch (err) {
                tail.undecodable++;
                slog.warn({ partition: batch.partition, offset: message.offset, err }, 'message does not decode; not pushed');
              }
              for (const item of items) registry.fanOut(item, outbox);
            }
            if (outbox.size >= FLUSH_EVERY) registry.flush(outbox);
            tail.tailed++;
            resolveOffset(message.offset);
          }
          registry.flush(outbox);
          tail.lastMessageAt = Date.now();
          await heartbeat();
        },
      }),
    );
  }
  await withTimeout(allReady, READY_TIMEOUT_MS).catch(() => log.warn('stream sources not positioned yet; listening anyway'));

  return {
    health: () => ({
      connected: tails.every((t) => t.connected),
      sources: tails.map((t) => ({
        name: t.source.name,
        topic: t.topic,
        ready: t.ready,
        messagesTailed: t.tailed,
        undecodable: t.undecodable,
        lastMessageAt: t.lastMessageAt === null ? null : new Date(t.lastMessageAt).toISOString(),
      })),
    }),
    stop: async () => {
      await Promise.all(consumers.map((c) => c.stop()));
    },
  };
}
