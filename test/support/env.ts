import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { config, loadConfig, parseDotenv, type Config } from '../../lib/config.js';
import { repoPath } from '../../lib/paths.js';
import { createLogger } from '../../lib/logger.js';
import { closeServices, createServices, type Services } from '../../apps/shared/services.js';
import { createApp } from '../../apps/api/app.js';
import { createApiDeps, type ApiDeps } from '../../apps/api/deps.js';
import { answerClientErrors } from '../../apps/api/http/client-errors.js';

/** The run's configuration (set up by global-setup), optionally with some variables replaced. */
export function testConfig(overrides: Partial<Record<keyof Config, string>> = {}): Config {
  if (Object.keys(overrides).length === 0) return config();
  return loadConfig({ ...parseDotenv(readFileSync(repoPath('.env'), 'utf8')), ...process.env, ...overrides });
}

export interface RunningApi {
  url: string;
  deps: ApiDeps;
  services: Services;
  server: Server;
  close(): Promise<void>;
}

/** Starts a real API instance (real engines) on an ephemeral port. */
export async function startApi(cfg: Config = testConfig()): Promise<RunningApi> {
  const log = createLogger('api-test', cfg.LOG_LEVEL);
  const services = await createServices(cfg, log);
  const deps = createApiDeps(services);
  const server = createServer(createApp(deps).callback());
  answerClientErrors(server, log);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    deps,
    services,
    server,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await closeServices(services);
    },
  };
}
