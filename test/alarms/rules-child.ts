/**
 * The alarm-rule consumer as a process of its own, for the restart tests (killed with SIGKILL or
 * stopped with SIGTERM). Arguments: topic prefix, group id, minimum duration (ms), commit interval (ms).
 */
import { configOrExit } from '../../lib/config.js';
import { createKafka, createPublisher } from '../../lib/kafka.js';
import { createLogger } from '../../lib/logger.js';
import { onShutdown } from '../../lib/shutdown.js';
import { DEFAULT_OCCUPANCY_RULE } from '../../domain/alarms/rules.js';
import { createDb } from '../../postgres/client.js';
import { runAlarmRules } from '../../pipeline/alarms/alarm-rules.js';

const [prefix, groupId, minDurationMs, commitIntervalMs] = process.argv.slice(2);
const cfg = configOrExit();
const log = createLogger('alarm-rules-child', cfg.LOG_LEVEL);
const kafka = createKafka(cfg, log, 'alarm-rules-child');
const db = createDb(cfg, 4, log);
const publisher = createPublisher(kafka, log);
const rules = await runAlarmRules({
  kafka,
  db,
  log,
  publisher,
  prefix: prefix!,
  groupId,
  occupancyRule: { ...DEFAULT_OCCUPANCY_RULE, minDurationMs: Number(minDurationMs) },
  commitIntervalMs: Number(commitIntervalMs),
  tickMs: 200,
  sessionTimeoutMs: 6_000,
});
onShutdown(log, 15_000, [
  ['stop the alarm rules', () => rules.stop()],
  [
    'close',
    async () => {
      await publisher.disconnect();
      await db.end();
    },
  ],
]);
process.stdout.write('ready\n');
