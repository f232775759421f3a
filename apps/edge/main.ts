import { configOrExit } from '../../lib/config.js';
import { createLogger } from '../../lib/logger.js';
import { startMetrics } from '../../lib/metrics.js';
import { onShutdown } from '../../lib/shutdown.js';
import { closeEdgeEngines, createEdgeEngines } from './engines.js';
import { createEdgeRegistry } from './metrics.js';
import { startEdge } from './server.js';

const cfg = configOrExit();
const log = createLogger('edge', cfg.LOG_LEVEL);
process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection'));

const engines = await createEdgeEngines(cfg, log);
const edge = await startEdge(cfg, log, { engines }).catch((err: Error) => {
  log.fatal({ err }, 'edge could not start');
  process.exit(1);
});
const metrics = await startMetrics(createEdgeRegistry(edge.stats), cfg.METRICS_HOST, cfg.EDGE_METRICS_PORT, log);
onShutdown(log, cfg.SHUTDOWN_TIMEOUT_MS, [
  ...edge.shutdownSteps(),
  ['close engines', () => closeEdgeEngines(engines)],
  ['stop serving metrics', () => metrics?.close()],
]);
