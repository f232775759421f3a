import { hostname } from 'node:os';
import uWS from 'uWebSockets.js';
import { configOrExit } from '../../lib/config.js';
import { createLogger } from '../../lib/logger.js';
import { createKafka, ensureTopics, topicsFor } from '../../lib/kafka.js';
import { onShutdown } from '../../lib/shutdown.js';
import { runConsumer } from '../../lib/consumer.js';

const cfg = configOrExit();
const log = createLogger('edge', cfg.LOG_LEVEL);
process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection'));

const startedAt = Date.now();
const kafka = createKafka(cfg, log, `${cfg.KAFKA_CLIENT_ID}-edge`);
const topics = topicsFor(cfg);
await ensureTopics(kafka, cfg, topics);
let tailed = 0;
let lastMessageAt: number | null = null;
let kafkaConnected = false;

// Every edge instance must see every partition, so each one is its own consumer group and
// starts at the topic's end: the stream is live, history comes from the REST API.
const tail = await runConsumer(kafka, log, {
  groupId: `${cfg.KAFKA_TOPIC_PREFIX}.edge.${hostname()}.${process.pid}`,
  topic: topics.events,
  fromBeginning: false,
  eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
    tailed += batch.messages.length;
    lastMessageAt = Date.now();
    resolveOffset(batch.lastOffset());
    await heartbeat();
  },
});

kafkaConnected = true;
tail.consumer.on(tail.consumer.events.CRASH, () => {
  kafkaConnected = false;
});
tail.consumer.on(tail.consumer.events.FETCH_START, () => {
  kafkaConnected = true;
});

const app = uWS.App();
app.get('/health', (res) => {
  res.cork(() => {
    res.writeHeader('Content-Type', 'application/json').end(
      JSON.stringify({
        status: kafkaConnected ? 'healthy' : 'degraded',
        kafka: { connected: kafkaConnected, topic: topics.events, messagesTailed: tailed, lastMessageAt: lastMessageAt && new Date(lastMessageAt).toISOString() },
        uptime: Math.floor((Date.now() - startedAt) / 1000),
      }),
    );
  });
});

let listenSocket: uWS.us_listen_socket | false = false;
app.listen(cfg.EDGE_HOST, cfg.EDGE_PORT, (socket) => {
  if (!socket) {
    log.fatal({ port: cfg.EDGE_PORT }, 'edge could not listen');
    process.exit(1);
  }
  listenSocket = socket;
  log.info({ port: cfg.EDGE_PORT, host: cfg.EDGE_HOST }, 'edge listening');
});

onShutdown(log, cfg.SHUTDOWN_TIMEOUT_MS, [
  ['stop accepting', () => { if (listenSocket) uWS.us_listen_socket_close(listenSocket); }],
  ['stop tailing', () => tail.stop()],
]);
