// The REST client: every call carries the signed-in key; every failure becomes an ApiError whose
// message is the API's envelope ({error, code}) in words, so views can show it as is.

const KEY_STORAGE = 'venue-dashboard.key';

export const session = {
  key: (): string | null => sessionStorage.getItem(KEY_STORAGE),
  signIn: (key: string): void => sessionStorage.setItem(KEY_STORAGE, key),
  signOut: (): void => sessionStorage.removeItem(KEY_STORAGE),
};

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
  /** "the error (CODE)", as shown to the person. */
  get text(): string {
    return `${this.message} (${this.code})`;
  }
}

/** Called when the API refuses the key (401): the app returns to sign-in. */
let onUnauthorized: (err: ApiError) => void = () => undefined;
export const setUnauthorizedHandler = (fn: (err: ApiError) => void): void => void (onUnauthorized = fn);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function toError(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { error?: unknown; code?: unknown };
    if (typeof body.error === 'string' && typeof body.code === 'string') return new ApiError(res.status, body.code, body.error);
  } catch {
    // Not the envelope (a proxy's page): described by its status below.
  }
  return new ApiError(res.status, `HTTP_${res.status}`, `the server answered ${res.status} ${res.statusText || ''}`.trim());
}

/** One call with an explicit key (sign-in checks a key before keeping it). */
export async function call<T>(path: string, opts: { method?: string; key?: string; body?: unknown } = {}): Promise<T> {
  const key = opts.key ?? session.key();
  const method = opts.method ?? 'GET';
  // GETs wait out a 429 (the heat map's batches may meet the rate limit), at most three times.
  for (let attempt = 0; ; attempt++) {
    let res: Response;
    try {
      res = await fetch(path, {
        method,
        headers: { ...(key ? { Authorization: `Bearer ${key}` } : {}), ...(opts.body ? { 'Content-Type': 'application/json' } : {}) },
        body: opts.body ? JSON.stringify(opts.body) : undefined,
      });
    } catch {
      throw new ApiError(0, 'NETWORK_ERROR', 'the server could not be reached; check the connection and retry');
    }
    if (res.ok) return (await res.json()) as T;
    const err = await toError(res);
    if (res.status === 429 && method === 'GET' && attempt < 3) {
      await sleep(Math.min(30, Number(res.headers.get('Retry-After')) || 2) * 1000);
      continue;
    }
    if (res.status === 401 && opts.key === undefined) onUnauthorized(err);
    throw err;
  }
}

// Shapes of the answers the page reads (the API's OpenAPI document has them in full).
export interface Venue {
  id: string;
  name: string;
  timezone: string;
  address: string | null;
  zone_count: number;
  last_event_at: string | null;
}
export interface Figure {
  occupancy: number | null;
  capacity: number | null;
  percent: number | null;
  updated_at: string | null;
}
export interface Occupancy extends Figure {
  venue_id: string;
  zones: Array<Figure & { zone_id: string; zone_name: string; zone_type: string }>;
}
export interface Alarm {
  id: string;
  venueId: string;
  zoneId: string | null;
  type: string;
  severity: 'CRITICAL' | 'MAJOR' | 'MINOR' | 'WARNING';
  status: 'ACTIVE_UNACK' | 'ACTIVE_ACK' | 'CLEARED_UNACK' | 'CLEARED_ACK';
  message: string;
  createdAt: string;
  updatedAt: string;
}
export interface Point {
  ts: number;
  value: number | null;
}
export interface Dwell {
  zones: Array<{ zone_id: string; zone_name: string; buckets: Array<{ range: string; count: number }> }>;
}
export interface Scoring {
  segments: Array<{ name: string; count: number; percentage: number }>;
  total: number;
  range: string;
}
export interface Prediction {
  dayOfWeek: number;
  hour: number;
  mean: number;
  p95: number;
  sampleSize: number;
}
export interface ConnectorHealth {
  connectors: Array<{ type: string; status: 'healthy' | 'degraded' | 'offline' | 'waiting'; count: number; lastEventAt: string | null }>;
}

const v = (id: string) => `/api/venues/${encodeURIComponent(id)}`;

export const api = {
  venues: (key?: string) => call<{ data: Venue[]; total: number }>('/api/venues?limit=200', key ? { key } : {}),
  venue: (id: string) => call<Venue>(v(id)),
  occupancy: (id: string) => call<Occupancy>(`${v(id)}/occupancy`),
  telemetry: (id: string, q: { key: string; startTs: number; endTs: number; interval: number; agg: string }) =>
    call<Record<string, Point[]>>(`${v(id)}/telemetry?keys=${q.key}&startTs=${q.startTs}&endTs=${q.endTs}&interval=${q.interval}&agg=${q.agg}`),
  dwell: (id: string, range: string) => call<Dwell>(`${v(id)}/dwell?range=${range}`),
  scoring: (id: string, range: string) => call<Scoring>(`${v(id)}/visitors/scoring?range=${range}`),
  prediction: (id: string, dayOfWeek: number, hour: number) => call<Prediction>(`${v(id)}/predictions/occupancy?dayOfWeek=${dayOfWeek}&hour=${hour}`),
  connectors: () => call<ConnectorHealth>('/api/dashboard/connectors'),
  alarms: (venueId: string) => call<{ alarms: Alarm[]; total: number }>(`/api/alarms?venue_id=${encodeURIComponent(venueId)}&limit=50`),
  alarmAction: (id: string, action: 'ack' | 'clear') => call<{ id: string; status: Alarm['status'] }>(`/api/alarms/${encodeURIComponent(id)}/${action}`, { method: 'POST' }),
};
