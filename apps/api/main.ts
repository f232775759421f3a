import { createServer, type ServerResponse } from 'node:http';
import { configOrExit } from '../../lib/config.js';
import { createLogger } from '../../lib/logger.js';
import { closeServices, createServices } from '../shared/services.js';
import { onShutdown } from '../../lib/shutdown.js';
import { createApp } from './app.js';
import { createApiDeps } from './deps.js';
import { answerClientErrors } from './http/client-errors.js';
import { startMetrics } from '../../lib/metrics.js';

const cfg = configOrExit();
const log = createLogger('api', cfg.LOG_LEVEL);

process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection'));

const services = await createServices(cfg, log);
const deps = createApiDeps(services);
const server = createServer(createApp(deps).callback());
server.keepAliveTimeout = 65_000;
answerClientErrors(server, log);
// At shutdown every answer still to be written says `Connection: close`, so keep-alive clients
// (proxies, load balancers) let go instead of holding the server open until keepAliveTimeout.
let stopping = false;
const unanswered = new Set<ServerResponse>();
server.on('request', (_req, res: ServerResponse) => {
  if (stopping) res.setHeader('Connection', 'close');
  unanswered.add(res);
  res.on('close', () => unanswered.delete(res));
});
server.listen(cfg.API_PORT, cfg.API_HOST, () => log.info({ port: cfg.API_PORT, host: cfg.API_HOST }, 'api listening'));
const metrics = await startMetrics(deps.metrics.registry, cfg.METRICS_HOST, cfg.API_METRICS_PORT, log);

onShutdown(log, cfg.SHUTDOWN_TIMEOUT_MS, [
  [
    'stop accepting, answer the requests in flight',
    () =>
      new Promise<void>((resolve) => {
        stopping = true;
        for (const res of unanswered) if (!res.headersSent) res.setHeader('Connection', 'close');
        // A keep-alive connection turns idle only once its request is fully read, which can be
        // after an early answer (a 401 before the body): keep closing the idle ones until done.
        const sweep = setInterval(() => server.closeIdleConnections(), 100);
        server.close(() => {
          clearInterval(sweep);
          resolve();
        });
        server.closeIdleConnections();
      }),
  ],
  ['stop serving metrics', () => metrics?.close()],
  ['close engines', () => closeServices(services)],
]);
