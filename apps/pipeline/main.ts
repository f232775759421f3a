import { configOrExit } from '../../lib/config.js';
import { createLogger } from '../../lib/logger.js';
import { closeServices, createServices } from '../shared/services.js';
import { onShutdown } from '../../lib/shutdown.js';
import { derivedTopicNames } from '../../lib/topology.js';
import { createHousekeepingCh, scheduleHousekeeping } from '../../pipeline/housekeeping.js';
import { runEventsSink } from '../../pipeline/sink/events-sink.js';
import { runProcessors } from '../../pipeline/processors/run.js';
import { runAlarmRules } from '../../pipeline/alarms/alarm-rules.js';
import { startDeriveThread } from '../../pipeline/derive/thread.js';
import { createKafka, TRANSACTIONAL_RETRY } from '../../lib/kafka.js';
import { startMetrics } from '../../lib/metrics.js';
import { createPipelineMetrics } from './metrics.js';
import { startPollers } from '../../pipeline/pollers/runner.js';
import { keyringFromConfig } from '../../lib/secret-box.js';
import { Pseudonyms } from '../../domain/ingest/pseudonyms.js';
import { Throughput } from '../../domain/system/throughput.js';

const cfg = configOrExit();
const log = createLogger('pipeline', cfg.LOG_LEVEL);
process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection'));

const services = await createServices(cfg, log, { dbPoolSize: 6 });
// Half the shutdown budget for the last writes; the rest is replayed on restart.
const drainMs = cfg.SHUTDOWN_TIMEOUT_MS / 2;
const metrics = createPipelineMetrics(services.kafkaAdmin, cfg.KAFKA_TOPIC_PREFIX, log);
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
  drainMs,
  onInsert: metrics.observeInsert,
});
metrics.observeEventsSink(sink.sink.stats);
const processors = await runProcessors({
  kafka: createKafka(cfg, log, cfg.KAFKA_CLIENT_ID, TRANSACTIONAL_RETRY),
  db: services.db,
  ch: services.ch,
  producer: services.producer,
  log,
  prefix: cfg.KAFKA_TOPIC_PREFIX,
  partitions: cfg.KAFKA_PARTITIONS,
  events: services.topics.events,
  deadLetter: services.topics.deadLetter,
  derived: derivedTopicNames(cfg.KAFKA_TOPIC_PREFIX),
  batchRows: cfg.PIPELINE_BATCH_ROWS,
  batchMs: cfg.PIPELINE_BATCH_MS,
  outputBatchMs: cfg.PIPELINE_DERIVED_BATCH_MS,
  drainMs,
  tickMs: cfg.PROCESSOR_TICK_MS,
  onInsert: metrics.observeInsert,
  onUnreflected: metrics.unreflected,
});
const alarmRules = await runAlarmRules({
  kafka: services.kafka,
  db: services.db,
  log,
  publisher: services.publisher,
  prefix: cfg.KAFKA_TOPIC_PREFIX,
});
const derive = startDeriveThread(cfg, log);
metrics.observeDerive(derive.stats);
const housekeepingCh = createHousekeepingCh(cfg, log);
const housekeeping = scheduleHousekeeping(housekeepingCh, log, { onPartition: metrics.observeHousekeeping });
// Vendors that only answer questions (UniFi, Verkada, Aruba ALE): polled here, brought in through ingest.
const pollers = cfg.POLLERS_ENABLED
  ? startPollers({
      db: services.db,
      keyring: keyringFromConfig(cfg),
      ingest: {
        db: services.db,
        publisher: services.publisher,
        topic: services.topics.events,
        reportsTopic: derivedTopicNames(cfg.KAFKA_TOPIC_PREFIX).ingestReports,
        pseudonyms: new Pseudonyms(cfg.PSEUDONYM_KEY),
        throughput: new Throughput(services.redis),
        log,
      },
      log,
      baseUrls: cfg.VERKADA_API_BASE_URL ? { verkada: cfg.VERKADA_API_BASE_URL } : undefined,
    })
  : undefined;
if (pollers) metrics.observePollers(pollers);
const metricsServer = await startMetrics(metrics.registry, cfg.METRICS_HOST, cfg.PIPELINE_METRICS_PORT, log);
log.info({ topic: services.topics.events }, 'pipeline running');

onShutdown(log, cfg.SHUTDOWN_TIMEOUT_MS, [
  [
    'stop the housekeeping (retention and compaction) without waiting for a merge in hand',
    async () => {
      await housekeeping.stop();
      await housekeepingCh.close();
    },
  ],
  ['stop the pollers: finish or abort the polls in hand, release their leases', () => pollers?.stop()],
  ['stop the derive job after its round in hand', () => derive.stop()],
  ['stop the processors (each commits what it holds), then write and commit their outputs held by the sinks', () => processors.stop()],
  ['stop the alarm rules: finish the input in hand, commit, leave the group', () => alarmRules.stop()],
  ['stop fetching events, write and commit what is held, leave the group', () => sink.stop()],
  ['stop serving metrics', () => metricsServer?.close()],
  ['close engines', () => closeServices(services)],
]);
