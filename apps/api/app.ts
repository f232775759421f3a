import Koa from 'koa';
import type Router from '@koa/router';
import './types.js';
import type { ApiDeps } from './deps.js';
import { errorEnvelope } from './middleware/errors.js';
import { requestContext } from './middleware/request.js';
import { jsonBody } from './middleware/body.js';
import { systemRoutes } from './routes/system.js';
import { operatorRoutes } from './routes/operators.js';
import { keyRoutes } from './routes/keys.js';
import { usageRoutes } from './routes/usage.js';
import { openapiRoutes } from './routes/openapi.js';
import { venueRoutes } from './routes/venues.js';
import { zoneRoutes } from './routes/zones.js';
import { integrationRoutes } from './routes/integrations.js';
import { ingestRoutes } from './routes/ingest.js';
import { telemetryRoutes } from './routes/telemetry.js';
import { dashboardRoutes } from './routes/dashboard.js';

export function createApp(deps: ApiDeps): Koa {
  const app = new Koa({ proxy: true });
  app.silent = true;
  app.use(requestContext(deps.services.log));
  app.use(errorEnvelope);
  app.use(jsonBody());
  const routers: Router[] = [systemRoutes(deps), openapiRoutes(deps), operatorRoutes(deps), keyRoutes(deps), usageRoutes(deps), venueRoutes(deps), zoneRoutes(deps), integrationRoutes(deps), ingestRoutes(deps), telemetryRoutes(deps), dashboardRoutes(deps)];
  for (const router of routers) {
    app.use(router.routes());
    app.use(router.allowedMethods({ throw: true }));
  }
  return app;
}
