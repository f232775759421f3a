const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));
const randomByte = () => Math.floor(Math.random() * 256);

/**
 * A universally administered unicast MAC, as a phone's real address reads. Math.random, not
 * crypto: the load generator shares the cores with the service, and randomBytes per MAC cost it
 * ~1.5 ms per request (6.6 % of its CPU).
 */
export const randomMac = (): string =>
  `${HEX[randomByte() & 0xfc]}:${HEX[randomByte()]}:${HEX[randomByte()]}:${HEX[randomByte()]}:${HEX[randomByte()]}:${HEX[randomByte()]}`;

export interface BenchVenue {
  venueId: string;
  connector: 'meraki' | 'density';
  /** The venue's recurring devices (Meraki). */
  pool: string[];
}

/**
 * One `POST /ingest` body, built when it is sent, as a connector pushes what it saw since its last
 * push: `size` events spread over (`since`, `now`] in time order (a venue's first push covers the
 * last 2 s). Meraki presence (recurring devices and a share `newDevices` of new ones), or Density
 * door counts and occupancy. With `eventIds`, each event carries an `event_id` (`<eventIds>-<position>`),
 * as the soak's fleet sends them.
 */
export function ingestBody(
  v: BenchVenue,
  size: number,
  newDevices: number,
  now = Date.now(),
  since = now - 2000,
  eventIds?: string,
): string {
  const span = Math.max(1, now - since);
  const events = Array.from({ length: size }, (_, i) => {
    const timestamp = new Date(since + Math.ceil(((i + 1) * span) / size)).toISOString();
    if (v.connector === 'meraki') {
      const clientMac = Math.random() < newDevices ? randomMac() : v.pool[Math.floor(Math.random() * v.pool.length)]!;
      return {
        type: 'device_seen',
        timestamp,
        payload: {
          clientMac,
          apMac: '00:18:0a:13:dd:b0',
          ssid: 'Guest WiFi',
          rssi: 20 + (i % 50),
          os: 'iOS',
          manufacturer: 'Apple',
          radio: 'WiFi',
        },
      };
    }
    const kind = i % 3;
    if (kind === 2) return { type: 'occupancy', timestamp, payload: { space_id: 'spc_1', update_type: 'live', occupancy: 50 + (i % 20) } };
    return {
      type: kind === 0 ? 'entry' : 'exit',
      timestamp,
      payload: { space_id: 'spc_1', doorway_id: 'drw_1', direction: kind === 0 ? 1 : -1, count: 40 + (i % 30) },
    };
  });
  if (eventIds !== undefined) events.forEach((e, i) => Object.assign(e, { event_id: `${eventIds}-${i}` }));
  return JSON.stringify({ venue_id: v.venueId, connector_type: v.connector, events });
}
