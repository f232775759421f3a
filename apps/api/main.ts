import { createServer } from 'node:http';
import { configOrExit } from '../../lib/config.js';
import { createLogger } from '../../lib/logger.js';
import { closeServices, createServices } from '../../lib/services.js';
import { onShutdown } from '../../lib/shutdown.js';
import { createApiDeps, createApp } from './app.js';

const cfg = configOrExit();
const log = createLogger('api', cfg.LOG_LEVEL);

process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection'));

const services = await createServices(cfg, log);
const deps = createApiDeps(services);
const server = createServer(createApp(deps).callback());
server.keepAliveTimeout = 65_000;
server.listen(cfg.API_PORT, cfg.API_HOST, () => log.info({ port: cfg.API_PORT, host: cfg.API_HOST }, 'api listening'));

onShutdown(log, cfg.SHUTDOWN_TIMEOUT_MS, [
  ['stop accepting', () => new Promise<void>((resolve) => { server.close(() => resolve()); server.closeIdleConnections(); })],
  ['close engines', () => closeServices(services)],
]);
