import type { ConnectorType } from '../../../lib/events/vocabulary.js';
import type { ConnectorEvents } from './kit.js';
import { aruba } from './aruba.js';
import { density } from './density.js';
import { meraki } from './meraki.js';
import { mywifi } from './mywifi.js';
import { square } from './square.js';
import { unifi } from './unifi.js';
import { verkada } from './verkada.js';

/** Each connector's closed list of accepted event types (documented in docs/events.md). */
export const CONNECTORS: Record<ConnectorType, ConnectorEvents> = { meraki, aruba, unifi, mywifi, square, density, verkada };

export type { ConnectorEvents, EventSpec, Normalised } from './kit.js';
