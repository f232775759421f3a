import { configOrExit } from '../lib/config.js';
import { createLogger } from '../lib/logger.js';
import { closeServices, createServices } from '../lib/services.js';
import { onShutdown } from '../lib/shutdown.js';
import { runConsumer } from './consumer.js';
import { eventsSink } from './sink/events-sink.js';

const cfg = configOrExit();
const log = createLogger('pipeline', cfg.LOG_LEVEL);
process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection'));

const services = await createServices(cfg, log, { dbPoolSize: 4 });
const sink = await runConsumer(services.kafka, log, {
  groupId: `${cfg.KAFKA_TOPIC_PREFIX}.sink.events`,
  topic: services.topics.events,
  eachBatch: eventsSink({ ch: services.ch, log }),
});
log.info({ topic: services.topics.events }, 'pipeline running');

onShutdown(log, cfg.SHUTDOWN_TIMEOUT_MS, [
  ['drain and commit sink', () => sink.stop()],
  ['close engines', () => closeServices(services)],
]);
