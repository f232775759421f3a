import {
  configString,
  header,
  invalid,
  isObject,
  refused,
  safeEqual,
  vendorEventId,
  type ConnectorEvent,
  type Mapped,
  type Receiver,
} from './kit.js';

/**
 * Density v2 count webhook receiver (docs/connectors/density.md). Density authenticates by a header
 * the customer chooses: the header named `webhook_header_name` must equal `webhook_header_value`.
 * `{space_id, doorway_id, direction: 1 | -1, count}` becomes a density `entry` (1) or `exit` (-1)
 * carrying `count` (the space count after the event). An `id` becomes the `event_id` (stored once
 * when re-delivered) and a `timestamp` the event time; without them the time of receipt, no id.
 */

function eventTime(raw: unknown, now: number): string {
  if (typeof raw === 'string' && raw !== '') return raw;
  if (typeof raw === 'number' && Number.isFinite(raw)) {
    // Epoch milliseconds or seconds.
    const d = new Date(raw > 1e11 ? raw : raw * 1000);
    if (!Number.isNaN(d.getTime())) return d.toISOString();
  }
  return new Date(now).toISOString();
}

export function mapDensity(body: unknown, now: number): Mapped {
  if (!isObject(body)) throw invalid('the Density webhook must be a JSON object', 'body', 'expected an object');
  const { direction } = body;
  if (direction !== 1 && direction !== -1)
    throw invalid('the Density webhook needs direction 1 (entry) or -1 (exit)', 'direction', 'expected 1 or -1');
  const payload: Record<string, unknown> = { direction };
  for (const field of ['space_id', 'doorway_id', 'count'] as const)
    if (body[field] !== undefined && body[field] !== null) payload[field] = body[field];
  const event: ConnectorEvent = { type: direction === 1 ? 'entry' : 'exit', timestamp: eventTime(body.timestamp, now), payload };
  const id = typeof body.id === 'string' && body.id !== '' ? body.id : typeof body.id === 'number' ? String(body.id) : undefined;
  if (id !== undefined) event.event_id = vendorEventId('density', id);
  return { events: [event], ignored: 0 };
}

export const densityReceiver: Receiver = {
  connector: 'density',
  verify(config, req) {
    const name = configString(config, 'webhook_header_name');
    const value = configString(config, 'webhook_header_value');
    if (!name || !value) {
      throw refused(
        "this Density integration has no webhook header: set config.webhook_header_name and webhook_header_value to the custom header configured on Density's webhook",
      );
    }
    const given = header(req, name);
    if (given === undefined) throw refused(`the ${name} header is missing: Density must send the custom header configured on its webhook`);
    if (!safeEqual(given, value)) throw refused(`the ${name} header does not match this integration's webhook_header_value`);
  },
  map: (body, _config, now) => mapDensity(body, now),
};
