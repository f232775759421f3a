import { configOrExit } from '../../lib/config.js';
import { createLogger } from '../../lib/logger.js';
import { closeServices, createServices } from '../shared/services.js';
import { onShutdown } from '../../lib/shutdown.js';
import { scheduleRetention } from '../../pipeline/retention.js';
import { runEventsSink } from '../../pipeline/sink/events-sink.js';
import { runAlarmRules } from '../../pipeline/alarms/alarm-rules.js';

const cfg = configOrExit();
const log = createLogger('pipeline', cfg.LOG_LEVEL);
process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection'));

const services = await createServices(cfg, log, { dbPoolSize: 4 });
const sink = await runEventsSink(services.kafka, {
  groupId: `${cfg.KAFKA_TOPIC_PREFIX}.sink.events`,
  partitions: cfg.KAFKA_PARTITIONS,
  ch: services.ch,
  db: services.db,
  producer: services.producer,
  topics: services.topics,
  log,
  batchRows: cfg.PIPELINE_BATCH_ROWS,
  batchMs: cfg.PIPELINE_BATCH_MS,
  // Half the shutdown budget for the last write; the rest is replayed on restart.
  drainMs: cfg.SHUTDOWN_TIMEOUT_MS / 2,
});
const alarmRules = await runAlarmRules({
  kafka: services.kafka,
  db: services.db,
  log,
  publisher: services.publisher,
  prefix: cfg.KAFKA_TOPIC_PREFIX,
  partitions: cfg.KAFKA_PARTITIONS,
});
const retention = scheduleRetention(services.ch, log);
log.info({ topic: services.topics.events }, 'pipeline running');

onShutdown(log, cfg.SHUTDOWN_TIMEOUT_MS, [
  ['stop the retention job', () => retention.stop()],
  ['stop fetching, write and commit what is held, leave the group', () => sink.stop()],
  ['stop the alarm rules: finish the input in hand, commit, leave the group', () => alarmRules.stop()],
  ['close engines', () => closeServices(services)],
]);
