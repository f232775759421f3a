import type { ConnectorType } from '../../lib/events/vocabulary.js';

/** How often each connector type normally sends something (vendor facts, docs/processors.md). */
export const EXPECTED_INTERVAL_MS: Record<ConnectorType, number> = {
  meraki: 60_000,
  aruba: 60_000,
  unifi: 60_000,
  density: 300_000,
  verkada: 900_000,
  square: 900_000,
  mywifi: 900_000,
};
/** Silent for more than this many intervals: degraded; more than OFFLINE_AFTER: offline. */
export const DEGRADED_AFTER = 3;
export const OFFLINE_AFTER = 10;
