import type { AnyOperation } from './operation.js';
import { systemOperations } from './system.js';
import { operatorOperations } from './operators.js';
import { keyOperations } from './keys.js';
import { usageOperations } from './usage.js';
import { venueOperations } from './venues.js';
import { zoneOperations } from './zones.js';
import { integrationOperations } from './integrations.js';
import { ingestOperations } from './ingest.js';
import { telemetryOperations } from './telemetry.js';
import { dashboardOperations } from './dashboard.js';
import { analyticsOperations } from './analytics.js';
import { alarmOperations } from './alarms.js';

/** Every operation of the API, in the order the OpenAPI document lists them. */
export const OPERATIONS: readonly AnyOperation[] = [
  ...systemOperations,
  ...operatorOperations,
  ...keyOperations,
  ...usageOperations,
  ...venueOperations,
  ...zoneOperations,
  ...integrationOperations,
  ...ingestOperations,
  ...telemetryOperations,
  ...dashboardOperations,
  ...analyticsOperations,
  ...alarmOperations,
];
