/**
 * A processor process for the crash test: runs the occupancy processor of the topic
 * prefix in PROC_PREFIX (instance id `crash-test`) until SIGTERM; SIGKILL is the crash.
 */
import { config } from '../../lib/config.js';
import { createLogger } from '../../lib/logger.js';
import { createKafka } from '../../lib/kafka.js';
import { derivedTopicNames } from '../../lib/topology.js';
import { createDb } from '../../postgres/client.js';
import { ProcessorRuntime } from '../../pipeline/processors/runtime.js';
import type { Processor } from '../../pipeline/processors/processor.js';
import { createOccupancyProcessor } from '../../pipeline/processors/occupancy.js';
import { VenueInfos } from '../../pipeline/processors/venues.js';

const cfg = config();
const prefix = process.argv[2]!;
const log = createLogger('crash-child', cfg.LOG_LEVEL);
const kafka = createKafka(cfg, log, `crash-child-${process.pid}`);
const db = createDb(cfg, 2, log);
const events = `${prefix}.events.v1`;
const derived = derivedTopicNames(prefix);
const processors = [createOccupancyProcessor({ venues: new VenueInfos(db), inputTopic: events, outputTopic: derived.occupancy })] as Array<
  Processor<unknown>
>;
const runtimes = processors.map((p) => new ProcessorRuntime(p, { kafka, log, prefix, partitions: cfg.KAFKA_PARTITIONS, tickMs: 300 }));
for (const rt of runtimes) await rt.start();
process.stdout.write('started\n');
process.on('SIGTERM', () => {
  void Promise.all(runtimes.map((rt) => rt.stop()))
    .then(() => db.end())
    .then(() => process.exit(0));
});
