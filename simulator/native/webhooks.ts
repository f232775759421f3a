import type { GeneratedEvent } from '../traffic/index.js';
import { SQUARE_SIGNATURE_HEADER, squareSignature, VERKADA_SIGNATURE_HEADER, verkadaSignature } from './sign.js';
import type { Delivery, TranslateContext, Translated } from './types.js';

/**
 * Square, Density and Verkada: one webhook per event, as those vendors deliver, signed as they
 * sign. What a vendor does not push stays on /ingest: heartbeats, fault twins, Density's v3
 * occupancy (a WebSocket stream, not a webhook) and Verkada's people counts and camera occupancy
 * (poll-only at Verkada).
 */

type Payload = Record<string, unknown>;

function split(events: GeneratedEvent[], pushed: (e: GeneratedEvent) => boolean): { vendor: GeneratedEvent[]; ingest: GeneratedEvent[] } {
  const vendor: GeneratedEvent[] = [];
  const ingest: GeneratedEvent[] = [];
  for (const e of events) (!e.malformed && pushed(e) ? vendor : ingest).push(e);
  return { vendor, ingest };
}

// ---- Square -------------------------------------------------------------------------------------

export const squareMerchantId = (venueKey: string) =>
  `MLSIM${venueKey
    .replace(/[^a-z]/g, '')
    .toUpperCase()
    .slice(0, 8)}`;

/** `payment.created` / `payment.updated` notifications, signed over notification_url + raw body. */
export function squareTranslate(events: GeneratedEvent[], ctx: TranslateContext): Translated {
  const { vendor, ingest } = split(events, (e) => e.event.type === 'transaction');
  const key = String(ctx.link.config.webhook_signature_key ?? '');
  const url = String(ctx.link.config.notification_url ?? '');
  const deliveries = vendor.map((e): Delivery => {
    const p = e.event.payload;
    const at = new Date(e.ts).toISOString();
    const type = String(p.event_type ?? 'payment.updated');
    const payment: Payload = {
      id: p.payment_id,
      ...(type === 'payment.created' ? { created_at: at } : {}),
      updated_at: at,
      amount_money: p.amount_money,
      total_money: p.amount_money,
      status: p.status,
      source_type: 'CARD',
      location_id: p.location_id,
      ...(p.customer_id !== undefined ? { customer_id: p.customer_id } : {}),
    };
    const body = JSON.stringify({
      merchant_id: squareMerchantId(ctx.venue.key),
      type,
      event_id: p.event_id,
      created_at: at,
      data: { type: 'payment', id: p.payment_id, object: { payment } },
    });
    return {
      integrationId: ctx.link.integrationId,
      connector: 'square',
      body,
      headers: () => ({ [SQUARE_SIGNATURE_HEADER]: squareSignature(key, url, body) }),
      events: 1,
      kind: `square ${type}`,
    };
  });
  return { deliveries, ingest };
}

// ---- Density ------------------------------------------------------------------------------------

/** v2 count webhooks: one per person through a doorway, authenticated by the customer's header. */
export function densityTranslate(events: GeneratedEvent[], ctx: TranslateContext): Translated {
  const { vendor, ingest } = split(events, (e) => e.event.type === 'entry' || e.event.type === 'exit');
  const name = String(ctx.link.config.webhook_header_name ?? '');
  const value = String(ctx.link.config.webhook_header_value ?? '');
  const deliveries = vendor.map((e): Delivery => {
    const p = e.event.payload;
    const body = JSON.stringify({
      space_id: p.space_id,
      doorway_id: p.doorway_id,
      direction: p.direction,
      count: p.count,
      ...densityExtras(e),
    });
    return {
      integrationId: ctx.link.integrationId,
      connector: 'density',
      body,
      headers: () => ({ [name.toLowerCase()]: value }),
      events: 1,
      kind: `density ${e.event.type}`,
    };
  });
  return { deliveries, ingest };
}

/** Fields Density's receiver takes beyond the documented four (an id to dedupe a re-delivery, the event time). */
function densityExtras(e: GeneratedEvent): Payload {
  const p = e.event.payload;
  return {
    id: `evt_sim${e.ts.toString(36)}${String(p.doorway_id ?? '').slice(4)}${p.direction === 1 ? 'i' : 'o'}${String(p.count)}`,
    timestamp: new Date(e.ts).toISOString(),
  };
}

// ---- Verkada ------------------------------------------------------------------------------------

/** The webhook type the service's receiver maps to telemetry (domain/ingest/receivers/verkada.ts); others are accepted and ignored. */
export const VERKADA_SENSOR_WEBHOOK = 'sensor_alert';
/**
 * The readings sent, each as its own alert (a Verkada sensor alert names one `reading`): the four
 * with a telemetry key. PM2.5 and TVOC have none, so the receiver would only ignore them: they are
 * not sent (in /ingest mode they are stored as payload fields).
 */
export const VERKADA_READINGS = ['temperature', 'humidity', 'co2', 'noise'] as const;
/** Alert thresholds of the simulated sensors (shown in the alert; the value is the reading). */
const THRESHOLDS: Record<(typeof VERKADA_READINGS)[number], number> = { temperature: 24, humidity: 60, co2: 1000, noise: 70 };

/**
 * SV sensor readings as signed `sensor_alert` webhooks, one per reading (`data.reading`,
 * `most_extreme_value`, `threshold`), `Verkada-Signature: ts|hex` signed at send time.
 */
export function verkadaTranslate(events: GeneratedEvent[], ctx: TranslateContext): Translated {
  const { vendor, ingest } = split(events, (e) => e.event.type === 'environment');
  const secret = String(ctx.link.config.webhook_secret ?? '');
  const orgId = String(ctx.link.config.org_id ?? '');
  const deliveries: Delivery[] = [];
  for (const e of vendor) {
    const p = e.event.payload;
    const at = Math.floor(e.ts / 1000);
    for (const reading of VERKADA_READINGS) {
      const value = p[reading];
      if (typeof value !== 'number') continue;
      const alertId = `sim-${ctx.venue.key}-${String(p.device_id)}-${reading}-${at}`;
      const body = JSON.stringify({
        org_id: orgId,
        webhook_type: VERKADA_SENSOR_WEBHOOK,
        webhook_id: `wh-${alertId}`,
        created_at: at,
        data: {
          device_id: p.device_id,
          device_type: 'SV11',
          alert_event_id: alertId,
          reading,
          most_extreme_value: value,
          threshold: THRESHOLDS[reading],
          start_time: at,
          end_time: at,
        },
      });
      deliveries.push({
        integrationId: ctx.link.integrationId,
        connector: 'verkada',
        body,
        headers: (now) => ({ [VERKADA_SIGNATURE_HEADER]: verkadaSignature(secret, body, Math.floor(now / 1000)) }),
        events: 1,
        kind: `verkada ${VERKADA_SENSOR_WEBHOOK} ${reading}`,
      });
    }
  }
  return { deliveries, ingest };
}
