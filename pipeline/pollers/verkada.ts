import { createHash } from 'node:crypto';
import { describeUrl, jsonOf, VendorError, vendorText } from './http.js';
import { isoFromSeconds, type PollContext, type PolledEvent, type PollResult, type VendorPoller } from './vendor.js';

/**
 * Verkada people counting (poll-only): per configured camera, the occupancy trends of its line
 * presets in 15-minute buckets. `trend_in` buckets become `entry` events and `trend_out` buckets
 * `exit` events, `count` people each, timed at the bucket's start. Only complete buckets (ended at
 * least a minute ago) are taken; the cursor per camera is the end of the last complete bucket
 * seen, and a camera's first poll looks back 24 hours at most.
 */

export const VERKADA_HOSTS = { us: 'https://api.verkada.com', eu: 'https://api.eu.verkada.com', au: 'https://api.au.verkada.com' } as const;
const BUCKET_S = 15 * 60;
/** A bucket is complete once it ended at least this long ago (Verkada computes the last one late). */
export const SETTLE_S = 60;
export const FIRST_LOOKBACK_S = 24 * 3600;
/** Verkada's API tokens live 30 minutes; a fresh one is fetched before that. */
const TOKEN_LIFE_MS = 25 * 60_000;

/** `[bucket_start, bucket_end, count]`, epoch seconds. */
export type TrendBucket = [number, number, number];

/** A camera's answer: its presets' trends, or (a camera with one line) the trends at the top level. */
export interface VerkadaTrends {
  camera_id?: string;
  trend_in?: unknown;
  trend_out?: unknown;
  presets?: Array<{ preset_id?: unknown; name?: unknown; trend_in?: unknown; trend_out?: unknown }>;
}

/** Camera id → end of its last complete bucket taken (epoch seconds). */
export interface VerkadaCursor {
  cameras: Record<string, number>;
}

export interface VerkadaSession {
  token?: string;
  tokenAt?: number;
}

/** A preset id as it can stand in an event id (printable ASCII, 128 characters in all): long or unusual ids by a hash. */
const presetKey = (preset: string): string =>
  /^[\x21-\x7e]{1,40}$/.test(preset) ? preset : `h${createHash('sha256').update(preset).digest('hex').slice(0, 16)}`;

const isBucket = (b: unknown): b is TrendBucket =>
  Array.isArray(b) &&
  b.length >= 3 &&
  b.slice(0, 3).every((v) => typeof v === 'number' && Number.isFinite(v)) &&
  (b[1] as number) > (b[0] as number);

/**
 * Maps one camera's trends to entry/exit events for the complete buckets after `since`, and the
 * camera's new cursor (the newest complete bucket end seen, buckets of 0 people included). Pure.
 */
export function mapVerkadaTrends(
  cameraId: string,
  trends: VerkadaTrends,
  since: number,
  nowS: number,
): { events: PolledEvent[]; until: number } {
  const lines: Array<{ preset: string; trend_in?: unknown; trend_out?: unknown }> = [];
  if (typeof trends !== 'object' || trends === null)
    throw new VendorError(`Verkada answered trends for camera ${cameraId} that are not an object`);
  if (Array.isArray(trends.presets)) {
    for (const p of trends.presets) {
      if (typeof p !== 'object' || p === null) continue;
      const preset = typeof p.preset_id === 'string' || typeof p.preset_id === 'number' ? String(p.preset_id) : 'all';
      lines.push({ preset, trend_in: p.trend_in, trend_out: p.trend_out });
    }
  }
  if (trends.trend_in !== undefined || trends.trend_out !== undefined)
    lines.push({ preset: 'all', trend_in: trends.trend_in, trend_out: trends.trend_out });
  const events: PolledEvent[] = [];
  let until = since;
  for (const { preset, trend_in, trend_out } of lines) {
    for (const [direction, type, trend] of [
      ['in', 'entry', trend_in],
      ['out', 'exit', trend_out],
    ] as const) {
      if (!Array.isArray(trend)) continue;
      for (const b of trend) {
        if (!isBucket(b)) continue;
        const [start, end, count] = b;
        if (start < since || end > nowS - SETTLE_S) continue;
        until = Math.max(until, end);
        if (!Number.isInteger(count) || count <= 0) continue;
        events.push({
          type,
          timestamp: isoFromSeconds(start),
          event_id: `verkada:${cameraId}:${presetKey(preset)}:${start}:${direction}`,
          payload: { camera_id: cameraId, line_id: preset, count, bucket_start: start, bucket_end: end },
        });
      }
    }
  }
  events.sort((a, b) => (a.payload.bucket_start as number) - (b.payload.bucket_start as number));
  return { events, until };
}

function baseOf(ctx: PollContext): string {
  const region = (ctx.integration.config.region as keyof typeof VERKADA_HOSTS | undefined) ?? 'us';
  return (ctx.baseUrl ?? VERKADA_HOSTS[region] ?? VERKADA_HOSTS.us).replace(/\/+$/, '');
}

async function token(ctx: PollContext, session: VerkadaSession): Promise<string> {
  if (session.token && session.tokenAt !== undefined && ctx.now() - session.tokenAt < TOKEN_LIFE_MS) return session.token;
  const url = new URL(`${baseOf(ctx)}/token`);
  const where = describeUrl(url);
  const res = await ctx.request({ method: 'POST', url, headers: { 'x-api-key': String(ctx.integration.config.api_key) } });
  if (res.status === 401 || res.status === 403)
    throw new VendorError(
      `Verkada answered ${res.status} to ${where}: check the API key (and that it may read camera analytics)`,
      res.status,
    );
  if (res.status !== 200) throw new VendorError(`Verkada answered ${res.status} to ${where}`, res.status);
  const body = jsonOf<{ token?: unknown }>(res, where);
  if (typeof body.token !== 'string' || body.token.length === 0)
    throw new VendorError(`Verkada answered ${where} without a token`, res.status);
  session.token = body.token;
  session.tokenAt = ctx.now();
  return body.token;
}

async function trendsOf(ctx: PollContext, session: VerkadaSession, cameraId: string, start: number, end: number): Promise<VerkadaTrends> {
  const url = new URL(`${baseOf(ctx)}/cameras/v1/analytics/occupancy_trends`);
  url.search = new URLSearchParams({
    camera_id: cameraId,
    start_time: String(start),
    end_time: String(end),
    interval: '15_minutes',
    type: 'person',
  }).toString();
  const where = describeUrl(url);
  let res = await ctx.request({ method: 'GET', url, headers: { 'x-verkada-auth': await token(ctx, session) } });
  if (res.status === 401) {
    session.token = undefined;
    res = await ctx.request({ method: 'GET', url, headers: { 'x-verkada-auth': await token(ctx, session) } });
  }
  if (res.status === 404) throw new VendorError(`Verkada answered 404 to ${where} for camera ${cameraId}: check camera_ids`, 404);
  if (res.status !== 200) {
    let reason = '';
    try {
      reason = vendorText((JSON.parse(res.body) as { message?: unknown }).message);
    } catch {
      // not JSON: the status says enough
    }
    throw new VendorError(`Verkada answered ${res.status} to ${where} for camera ${cameraId}${reason ? `: ${reason}` : ''}`, res.status);
  }
  return jsonOf<VerkadaTrends>(res, where);
}

export const verkadaPoller: VendorPoller<VerkadaSession, VerkadaCursor> = {
  connector: 'verkada',
  name: 'verkada',
  intervalMs: 5 * 60_000,
  polls: (config) => Array.isArray(config.camera_ids) && config.camera_ids.length > 0,
  newSession: () => ({}),
  async poll(ctx, session, cursor): Promise<PollResult<VerkadaCursor>> {
    const nowS = Math.floor(ctx.now() / 1000);
    const cameras = ctx.integration.config.camera_ids as string[];
    const next: VerkadaCursor = { cameras: { ...(cursor?.cameras ?? {}) } };
    const events: PolledEvent[] = [];
    for (const cameraId of cameras) {
      const since = next.cameras[cameraId] ?? Math.floor((nowS - FIRST_LOOKBACK_S) / BUCKET_S) * BUCKET_S;
      const end = nowS - SETTLE_S;
      if (end <= since) continue;
      const mapped = mapVerkadaTrends(cameraId, await trendsOf(ctx, session, cameraId, since, end), since, nowS);
      events.push(...mapped.events);
      if (mapped.until > since) next.cameras[cameraId] = mapped.until;
    }
    // Cameras no longer configured are forgotten.
    for (const id of Object.keys(next.cameras)) if (!cameras.includes(id)) delete next.cameras[id];
    return { events, cursor: next };
  },
};
