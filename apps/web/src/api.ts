// The REST client: every call carries the signed-in key; every failure becomes an ApiError whose
// message is the API's envelope ({error, code, details}) in words, so views can show it as is.

const KEY_STORAGE = 'venue-dashboard.key';

export const session = {
  key: (): string | null => sessionStorage.getItem(KEY_STORAGE),
  signIn: (key: string): void => sessionStorage.setItem(KEY_STORAGE, key),
  signOut: (): void => sessionStorage.removeItem(KEY_STORAGE),
};

/** One problem of a VALIDATION_ERROR: the field's path in the input (`name`, `config.api_key`). */
export interface FieldProblem {
  field: string;
  message: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: unknown = undefined,
  ) {
    super(message);
  }
  /** "the error (CODE)", as shown to the person. */
  get text(): string {
    return `${this.message} (${this.code})`;
  }
  /** The per-field problems of a 400, if any. */
  get fields(): FieldProblem[] {
    return Array.isArray(this.details)
      ? this.details.filter(
          (d): d is FieldProblem =>
            !!d &&
            typeof d === 'object' &&
            typeof (d as FieldProblem).field === 'string' &&
            typeof (d as FieldProblem).message === 'string',
        )
      : [];
  }
}

/** Called when the API refuses the key (401): the app returns to sign-in. */
let onUnauthorized: (err: ApiError) => void = () => undefined;
export const setUnauthorizedHandler = (fn: (err: ApiError) => void): void => void (onUnauthorized = fn);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function toError(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { error?: unknown; code?: unknown; details?: unknown };
    if (typeof body.error === 'string' && typeof body.code === 'string')
      return new ApiError(res.status, body.code, body.error, body.details);
  } catch {
    // Not the envelope (a proxy's page): described by its status below.
  }
  return new ApiError(res.status, `HTTP_${res.status}`, `the server answered ${res.status} ${res.statusText || ''}`.trim());
}

/** One call with an explicit key (sign-in checks a key before keeping it). */
export async function call<T>(path: string, opts: { method?: string; key?: string; body?: unknown } = {}): Promise<T> {
  const key = opts.key ?? session.key();
  const method = opts.method ?? 'GET';
  // GETs wait out a 429 (the rate limit), at most three times.
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
    // Only a refusal of the key in use signs out: not an answer to a request sent before a sign-out
    // or a rotation from this page (the key has changed since), nor one sent without a key.
    if (res.status === 401 && opts.key === undefined && key && key === session.key()) onUnauthorized(err);
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
export interface VenueDetail {
  id: string;
  name: string;
  timezone: string;
  address: string | null;
  lat: number | null;
  lng: number | null;
  hardware_type: string | null;
  zones: Array<{ id: string; slug: string; name: string; type: string; capacity: number | null }>;
  integrations: Array<{ id: string; connector_type: string; is_active: boolean; created_at: string }>;
}
export interface Zone {
  id: string;
  slug: string;
  name: string;
  type: string;
  capacity: number | null;
  is_active: boolean;
  [more: string]: unknown;
}
export interface Integration {
  id: string;
  venue_id: string;
  connector_type: string;
  is_active: boolean;
  config: Record<string, unknown>;
  created_at: string;
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
export type Severity = 'CRITICAL' | 'MAJOR' | 'MINOR' | 'WARNING';
export type AlarmStatus = 'ACTIVE_UNACK' | 'ACTIVE_ACK' | 'CLEARED_UNACK' | 'CLEARED_ACK';
export interface Alarm {
  id: string;
  venueId: string;
  zoneId: string | null;
  integrationId?: string | null;
  type: string;
  severity: Severity;
  status: AlarmStatus;
  message: string;
  details?: Record<string, unknown>;
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
export interface WeekPrediction {
  venue_id: string;
  timezone: string;
  cells: Array<{ dayOfWeek: number; hour: number; mean: number; p25: number; p75: number; p95: number; sampleSize: number }>;
}
export type Health = 'healthy' | 'degraded' | 'offline' | 'waiting';
export interface ConnectorHealth {
  connectors: Array<{ type: string; status: Health; count: number; lastEventAt: string | null }>;
}
export interface PortfolioVenue {
  id: string;
  name: string;
  timezone: string;
  local_day: string;
  occupancy: { value: number; capacity: number | null; percent: number | null; updated_at: string | null };
  alarms: Record<Severity, number>;
  connectors: Record<Health, number>;
  events_today: number;
  avg_dwell_seconds_today: number | null;
}
export interface Portfolio {
  venues: PortfolioVenue[];
  generated_at: string;
}
export interface Stats {
  venueCount: number;
  events24h: number;
  activeIntegrations: number;
  avgDwellSeconds: number;
}
export interface EventBuckets {
  events: Array<{ ts: number; events: number; entries: number; exits: number }>;
  range: string;
}
export interface AlarmRules {
  venue_id: string;
  zone_occupancy: {
    warning_percent: number;
    major_percent: number;
    critical_percent: number;
    hysteresis_points: number;
    min_duration_seconds: number;
  };
  is_default: boolean;
  updated_at: string | null;
}

const v = (id: string) => `/api/venues/${encodeURIComponent(id)}`;
const qs = (q: Record<string, string | number | undefined>) =>
  Object.entries(q)
    .filter(([, x]) => x !== undefined && x !== '')
    .map(([k, x]) => `${k}=${encodeURIComponent(String(x))}`)
    .join('&');

export const api = {
  venues: (key?: string) => call<{ data: Venue[]; total: number }>('/api/venues?limit=200', key ? { key } : {}),
  venue: (id: string) => call<VenueDetail>(v(id)),
  createVenue: (body: Record<string, unknown>) => call<{ id: string }>('/api/venues', { method: 'POST', body }),
  updateVenue: (id: string, body: Record<string, unknown>) => call<VenueDetail>(v(id), { method: 'PUT', body }),
  zones: (id: string) => call<{ data: Zone[] }>(`${v(id)}/zones`),
  zone: (id: string, zoneId: string) => call<Zone>(`${v(id)}/zones/${encodeURIComponent(zoneId)}`),
  createZone: (id: string, body: Record<string, unknown>) => call<Zone>(`${v(id)}/zones`, { method: 'POST', body }),
  updateZone: (id: string, zoneId: string, body: Record<string, unknown>) =>
    call<Zone>(`${v(id)}/zones/${encodeURIComponent(zoneId)}`, { method: 'PUT', body }),
  integrations: (id: string) => call<{ data: Integration[] }>(`${v(id)}/integrations`),
  createIntegration: (id: string, body: Record<string, unknown>) => call<{ id: string }>(`${v(id)}/integrations`, { method: 'POST', body }),
  updateIntegration: (id: string, integrationId: string, body: Record<string, unknown>) =>
    call<Integration>(`${v(id)}/integrations/${encodeURIComponent(integrationId)}`, { method: 'PUT', body }),
  alarmRules: (id: string) => call<AlarmRules>(`${v(id)}/alarm-rules`),
  setAlarmRules: (id: string, body: Record<string, unknown>) => call<AlarmRules>(`${v(id)}/alarm-rules`, { method: 'PUT', body }),
  resetAlarmRules: (id: string) => call<AlarmRules>(`${v(id)}/alarm-rules`, { method: 'DELETE' }),
  rotateKey: () => call<{ api_key: string; api_key_prefix: string; rotated_at: string }>('/api/keys/rotate', { method: 'POST' }),
  occupancy: (id: string) => call<Occupancy>(`${v(id)}/occupancy`),
  telemetry: (id: string, q: { key: string; startTs: number; endTs: number; interval: number; agg: string; zoneId?: string }) =>
    call<Record<string, Point[]>>(
      `${v(id)}/telemetry?keys=${q.key}&startTs=${q.startTs}&endTs=${q.endTs}&interval=${q.interval}&agg=${q.agg}${q.zoneId ? `&zoneId=${q.zoneId}` : ''}`,
    ),
  dwell: (id: string, range: string) => call<Dwell>(`${v(id)}/dwell?range=${range}`),
  scoring: (id: string, range: string) => call<Scoring>(`${v(id)}/visitors/scoring?range=${range}`),
  predictionWeek: (id: string) => call<WeekPrediction>(`${v(id)}/predictions/occupancy/week`),
  connectors: () => call<ConnectorHealth>('/api/dashboard/connectors'),
  portfolio: () => call<Portfolio>('/api/dashboard/portfolio'),
  stats: () => call<Stats>('/api/dashboard/stats'),
  events: (range: string) => call<EventBuckets>(`/api/dashboard/events?range=${range}`),
  alarms: (q: { venue_id?: string; status?: string; severity?: string; limit?: number }) =>
    call<{ alarms: Alarm[]; total: number }>(`/api/alarms?${qs({ limit: 50, ...q })}`),
  alarmAction: (id: string, action: 'ack' | 'clear') =>
    call<{ id: string; status: AlarmStatus }>(`/api/alarms/${encodeURIComponent(id)}/${action}`, { method: 'POST' }),
};
