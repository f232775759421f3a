import { canonicalMac } from '../../domain/ingest/pseudonyms.js';
import { pastCursor, type SecondCursor } from './cursor.js';
import { describeUrl, jsonOf, VendorError, vendorText, type HttpResponse } from './http.js';
import { isoFromSeconds, type PollContext, type PolledEvent, type PollResult, type VendorPoller } from './vendor.js';

/**
 * Ubiquiti UniFi Network controller: `stat/sta` lists the associated clients with `last_seen`
 * (epoch s); each client whose `last_seen` moved since the last poll becomes a `device_seen` at
 * that time. Classic controllers log in at `/api/login` (cookie `unifises`); UniFi OS consoles
 * (UDM, Cloud Key Gen2+) at `/api/auth/login` (cookie `TOKEN`) and serve the Network API under
 * `/proxy/network`. The classic login is tried first; a 404 there means UniFi OS.
 */

/** One client of `stat/sta` (fields we read; the controller sends many more, `hostname` among them, which is never kept). */
export interface UnifiClient {
  mac?: unknown;
  ap_mac?: unknown;
  essid?: unknown;
  /** Classic controllers: signal above noise (positive); some versions: dBm. */
  rssi?: unknown;
  /** dBm (negative). */
  signal?: unknown;
  first_seen?: unknown;
  last_seen?: unknown;
  is_guest?: unknown;
}

/** The newest `last_seen` published and the clients published at that second (cursor.ts). */
export type UnifiCursor = SecondCursor;

export interface UnifiSession {
  /** `Cookie` header value of the controller session; never logged. */
  cookie?: string;
  /** UniFi OS consoles serve the Network API under /proxy/network. */
  unifiOs?: boolean;
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const str = (v: unknown): string | undefined => (typeof v === 'string' && v.length > 0 ? v : undefined);

/** A signal strength in dBm when the client record has one (`signal`, else a negative `rssi`); the positive `rssi` of classic controllers is not dBm. */
function dbm(c: UnifiClient): number | undefined {
  for (const v of [num(c.signal), num(c.rssi)]) if (v !== undefined && v <= 0 && v >= -150) return v;
  return undefined;
}

/**
 * Maps a `stat/sta` answer to `device_seen` events past the cursor, oldest first, and the cursor
 * after them. Pure: `idOf` gives a client's keyed pseudonym (for event ids and the cursor).
 * Records without a MAC or a `last_seen` are skipped (nothing to say when or who).
 */
export function mapUnifiClients(
  clients: readonly UnifiClient[],
  cursor: UnifiCursor | undefined,
  idOf: (mac: string) => string,
): { events: PolledEvent[]; cursor: UnifiCursor | undefined; skipped: number } {
  const records: Array<{ c: UnifiClient; mac: string; id: string; at: number }> = [];
  let skipped = 0;
  for (const c of clients) {
    if (typeof c !== 'object' || c === null) {
      skipped++;
      continue;
    }
    const mac = typeof c.mac === 'string' ? canonicalMac(c.mac) : undefined;
    const at = num(c.last_seen);
    if (!mac || at === undefined || !Number.isInteger(at) || at < 0) skipped++;
    else records.push({ c, mac, id: idOf(mac), at });
  }
  const { fresh, cursor: next } = pastCursor(records, cursor);
  const events = fresh.map(({ c, mac, id, at }): PolledEvent => {
    const payload: Record<string, unknown> = { mac, last_seen: at };
    if (str(c.ap_mac)) payload.ap_mac = c.ap_mac;
    if (str(c.essid)) payload.essid = c.essid;
    const rssi = dbm(c);
    if (rssi !== undefined) payload.rssi = rssi;
    if (typeof c.is_guest === 'boolean') payload.is_guest = c.is_guest;
    const firstSeen = num(c.first_seen);
    if (firstSeen !== undefined && Number.isInteger(firstSeen) && firstSeen >= 0) payload.first_seen = firstSeen;
    return { type: 'device_seen', timestamp: isoFromSeconds(at), event_id: `unifi:${id}:${at}`, payload };
  });
  return { events, cursor: next, skipped };
}

/** `path` under the controller URL, which may itself hold a path (a controller behind a reverse proxy). */
const under = (controllerUrl: string, path: string): URL => {
  const base = new URL(controllerUrl);
  return new URL(`${base.origin}${base.pathname.replace(/\/+$/, '')}${path}`);
};

/** `name=value` pairs of the Set-Cookie headers, for the Cookie header of later requests. */
function cookiesOf(res: HttpResponse): string | undefined {
  const set = res.headers['set-cookie'] ?? [];
  const pairs = set.map((c) => c.split(';')[0]!.trim()).filter((p) => p.includes('='));
  return pairs.length > 0 ? pairs.join('; ') : undefined;
}

function loginRefused(where: string, res: HttpResponse): VendorError {
  if (res.status === 401 || res.status === 403 || res.status === 400) {
    return new VendorError(`controller answered ${res.status} to login at ${where}: check username and password`, res.status);
  }
  if (res.status === 429)
    return new VendorError(`controller answered 429 to login at ${where}: too many logins, it will be retried later`, 429);
  return new VendorError(`controller answered ${res.status} to login at ${where}`, res.status);
}

async function login(ctx: PollContext, session: UnifiSession): Promise<void> {
  const { controller_url, username, password } = ctx.integration.config as { controller_url: string; username: string; password: string };
  const credentials = { username, password };
  const attempt = async (path: string) => {
    const url = under(controller_url, path);
    return { url, res: await ctx.request({ method: 'POST', url, json: credentials }) };
  };
  // The classic controller first; a console running UniFi OS has no /api/login (404) and logs in at /api/auth/login.
  let { url, res } = await attempt('/api/login');
  let unifiOs = false;
  if (res.status === 404) {
    ({ url, res } = await attempt('/api/auth/login'));
    unifiOs = true;
  }
  if (res.status < 200 || res.status >= 300) throw loginRefused(describeUrl(url), res);
  const cookie = cookiesOf(res);
  if (!cookie) throw new VendorError(`controller accepted the login at ${describeUrl(url)} but set no session cookie`, res.status);
  session.cookie = cookie;
  session.unifiOs = unifiOs;
  ctx.log.debug({ unifiOs }, 'logged in to the controller');
}

async function clients(ctx: PollContext, session: UnifiSession): Promise<UnifiClient[]> {
  const { controller_url, site } = ctx.integration.config as { controller_url: string; site?: string };
  const path = `${session.unifiOs ? '/proxy/network' : ''}/api/s/${encodeURIComponent(site ?? 'default')}/stat/sta`;
  const url = under(controller_url, path);
  const where = describeUrl(url);
  let res = await ctx.request({ method: 'GET', url, headers: { cookie: session.cookie ?? '' } });
  if (res.status === 401) {
    // The session expired (or the controller restarted): log in again, once.
    session.cookie = undefined;
    await login(ctx, session);
    res = await ctx.request({ method: 'GET', url, headers: { cookie: session.cookie ?? '' } });
    if (res.status === 401)
      throw new VendorError(
        `controller answered 401 to ${where} right after a login: check the user's access to site '${site ?? 'default'}'`,
        401,
      );
  }
  const body =
    res.status === 200 || res.status === 400 ? jsonOf<{ meta?: { rc?: unknown; msg?: unknown }; data?: unknown }>(res, where) : undefined;
  if (!body) throw new VendorError(`controller answered ${res.status} to ${where}`, res.status);
  if (body.meta?.rc !== 'ok') {
    const msg = vendorText(body.meta?.msg);
    const hint =
      msg === 'api.err.NoSiteContext' ? `: no site '${site ?? 'default'}' on this controller, check site` : msg ? `: ${msg}` : '';
    throw new VendorError(`controller refused ${where} (${res.status}${hint ? '' : ', no reason given'})${hint}`, res.status);
  }
  if (!Array.isArray(body.data)) throw new VendorError(`controller answered ${where} without a data list`, res.status);
  return body.data as UnifiClient[];
}

export const unifiPoller: VendorPoller<UnifiSession, UnifiCursor> = {
  connector: 'unifi',
  name: 'unifi',
  intervalMs: 60_000,
  polls: (config) => config.polling !== false,
  newSession: () => ({}),
  async poll(ctx, session, cursor): Promise<PollResult<UnifiCursor>> {
    if (!session.cookie) await login(ctx, session);
    const list = await clients(ctx, session);
    const mapped = mapUnifiClients(list, cursor, (mac) => ctx.idOf(mac));
    if (mapped.skipped > 0) ctx.log.debug({ skipped: mapped.skipped }, 'stat/sta records without a MAC or last_seen skipped');
    return { events: mapped.events, cursor: mapped.cursor ?? cursor ?? { at: 0, ids: [] } };
  },
};
