import type { ConnectorType } from '../../lib/events/vocabulary.js';
import type { GeneratedEvent } from '../traffic/index.js';
import { merakiTranslate } from './meraki.js';
import type { TranslateContext, Translated } from './types.js';
import { unifiTranslate } from './unifi.js';
import { densityTranslate, squareTranslate, verkadaTranslate } from './webhooks.js';

export type Translator = (events: GeneratedEvent[], ctx: TranslateContext) => Translated;

/** The connectors with a native link in the service; Aruba and MyWiFi have none and stay on /ingest. */
export const TRANSLATORS: Partial<Record<ConnectorType, Translator>> = {
  meraki: merakiTranslate,
  square: squareTranslate,
  density: densityTranslate,
  verkada: verkadaTranslate,
  unifi: unifiTranslate,
};

export const NATIVE_CONNECTORS = Object.keys(TRANSLATORS) as ConnectorType[];

/** A stream's batch in the vendor's own deliveries (what has no vendor form stays on /ingest). */
export function translate(connector: ConnectorType, events: GeneratedEvent[], ctx: TranslateContext): Translated {
  const t = TRANSLATORS[connector];
  return t ? t(events, ctx) : { deliveries: [], ingest: events };
}
