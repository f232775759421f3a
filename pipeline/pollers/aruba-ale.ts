import { canonicalMac } from '../../domain/ingest/pseudonyms.js';
import { pastCursor, type SecondCursor } from './cursor.js';
import { describeUrl, jsonOf, VendorError } from './http.js';
import { isoFromSeconds, type PolledEvent, type PollResult, type VendorPoller } from './vendor.js';

/**
 * HPE Aruba ALE (Analytics and Location Engine, on premises) presence over its REST API:
 * `GET {base_url}/api/v1/presence` with HTTP basic authentication (the ALE REST API's scheme; no
 * session to keep). Each presence record whose `ts` moved since the last poll becomes a
 * `device_seen` at that time. Aruba Central integrations (`mode: central`) are not polled.
 */

/** A presence record: ALE wraps it as `{msg: {...}, ts}` and MACs as `{addr}`; flat records are read too. */
export interface AlePresence {
  msg?: Record<string, unknown>;
  ts?: unknown;
  [field: string]: unknown;
}

export type AleCursor = SecondCursor;

const macText = (v: unknown): string | undefined => {
  const raw =
    typeof v === 'string'
      ? v
      : typeof v === 'object' && v !== null && typeof (v as { addr?: unknown }).addr === 'string'
        ? (v as { addr: string }).addr
        : undefined;
  return raw === undefined ? undefined : canonicalMac(raw);
};
const hashText = (v: unknown): string | undefined => {
  const raw =
    typeof v === 'string'
      ? v
      : typeof v === 'object' && v !== null && typeof (v as { addr?: unknown }).addr === 'string'
        ? (v as { addr: string }).addr
        : undefined;
  return raw && /^[0-9a-fA-F]{40}$/.test(raw) ? raw.toLowerCase() : undefined;
};

/** Maps presence records to `device_seen` events past the cursor, oldest first, and the next cursor. Pure. */
export function mapAlePresence(
  records: readonly AlePresence[],
  cursor: AleCursor | undefined,
  idOf: (identifier: string) => string,
): { events: PolledEvent[]; cursor: AleCursor | undefined; skipped: number } {
  const found: Array<{ id: string; at: number; payload: Record<string, unknown> }> = [];
  let skipped = 0;
  for (const r of records) {
    if (typeof r !== 'object' || r === null) {
      skipped++;
      continue;
    }
    const m = (typeof r.msg === 'object' && r.msg !== null ? r.msg : r) as Record<string, unknown>;
    const ts = typeof r.ts === 'number' ? r.ts : m.ts;
    const mac = macText(m.sta_eth_mac);
    const hashed = mac ? undefined : hashText(m.hashed_sta_eth_mac);
    if ((!mac && !hashed) || typeof ts !== 'number' || !Number.isInteger(ts) || ts < 0) {
      skipped++;
      continue;
    }
    const payload: Record<string, unknown> = mac ? { sta_eth_mac: mac } : { hashed_sta_eth_mac: hashed };
    if (typeof m.associated === 'boolean') payload.associated = m.associated;
    if (typeof m.ap_name === 'string' && m.ap_name) payload.ap_name = m.ap_name;
    const radio = macText(m.radio_mac);
    if (radio) payload.radio_mac = radio;
    found.push({ id: idOf(mac ?? `hashed_sta_eth_mac:${hashed}`), at: ts, payload });
  }
  const { fresh, cursor: next } = pastCursor(found, cursor);
  const events = fresh.map((f): PolledEvent => ({
    type: 'device_seen',
    timestamp: isoFromSeconds(f.at),
    event_id: `aruba:${f.id}:${f.at}`,
    payload: f.payload,
  }));
  return { events, cursor: next, skipped };
}

/** The records of a presence answer: `{Presence_result: [...]}` (ALE), `{presence: [...]}` or a bare list. */
function recordsOf(body: unknown): AlePresence[] | undefined {
  if (Array.isArray(body)) return body as AlePresence[];
  if (typeof body !== 'object' || body === null) return undefined;
  const o = body as Record<string, unknown>;
  const list = o.Presence_result ?? o.presence_result ?? o.presence;
  return Array.isArray(list) ? (list as AlePresence[]) : undefined;
}

export const arubaAlePoller: VendorPoller<Record<string, never>, AleCursor> = {
  connector: 'aruba',
  name: 'aruba-ale',
  intervalMs: 60_000,
  polls: (config) => config.mode === 'ale' && config.polling !== false,
  newSession: () => ({}),
  async poll(ctx, _session, cursor): Promise<PollResult<AleCursor>> {
    const { base_url, username, password } = ctx.integration.config as { base_url: string; username: string; password: string };
    const url = new URL(`${base_url.replace(/\/+$/, '')}/api/v1/presence`);
    const where = describeUrl(url);
    const res = await ctx.request({
      method: 'GET',
      url,
      headers: { authorization: `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}` },
    });
    if (res.status === 401 || res.status === 403)
      throw new VendorError(`ALE answered ${res.status} to ${where}: check username and password`, res.status);
    if (res.status !== 200) throw new VendorError(`ALE answered ${res.status} to ${where}`, res.status);
    const records = recordsOf(jsonOf(res, where));
    if (!records) throw new VendorError(`ALE answered ${where} without a Presence_result list`, res.status);
    const mapped = mapAlePresence(records, cursor, (i) => ctx.idOf(i));
    if (mapped.skipped > 0) ctx.log.debug({ skipped: mapped.skipped }, 'presence records without a station or ts skipped');
    return { events: mapped.events, cursor: mapped.cursor ?? cursor ?? { at: 0, ids: [] } };
  },
};
