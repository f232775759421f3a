// Words and times as the person reads them: human labels for the API's enums, every time with its
// zone (the venue's by default, the browser's at the person's choice), relative times for freshness.

import type { AlarmStatus, Health, Severity } from './api.js';
import { h } from './dom.js';

export const STATUS_LABEL: Record<AlarmStatus, string> = {
  ACTIVE_UNACK: 'Active, unacknowledged',
  ACTIVE_ACK: 'Active, acknowledged',
  CLEARED_UNACK: 'Cleared, unacknowledged',
  CLEARED_ACK: 'Cleared, acknowledged',
};
export const SEVERITIES: Severity[] = ['CRITICAL', 'MAJOR', 'MINOR', 'WARNING'];
export const SEVERITY_LABEL: Record<Severity, string> = { CRITICAL: 'Critical', MAJOR: 'Major', MINOR: 'Minor', WARNING: 'Warning' };
export const SEVERITY_RANK: Record<Severity, number> = { CRITICAL: 0, MAJOR: 1, MINOR: 2, WARNING: 3 };
const TYPE_LABEL: Record<string, string> = { zone_occupancy_high: 'Zone occupancy high', connector_unhealthy: 'Connector unhealthy' };
export const typeLabel = (t: string): string => TYPE_LABEL[t] ?? t.replace(/_/g, ' ').replace(/^./, (c) => c.toUpperCase());
export const HEALTH_LABEL: Record<Health, string> = {
  healthy: 'Healthy',
  degraded: 'Degraded',
  offline: 'Offline',
  waiting: 'Waiting for first data',
};
export const healthLabel = (s: string): string => HEALTH_LABEL[s as Health] ?? s;

// ------------------------------------------------------------------------------------ time zones

export const BROWSER_TZ = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
const TZ_STORAGE = 'venue-dashboard.times';
let mode: 'venue' | 'browser' = sessionStorage.getItem(TZ_STORAGE) === 'browser' ? 'browser' : 'venue';
export const timeMode = (): 'venue' | 'browser' => mode;
export function setTimeMode(m: 'venue' | 'browser'): void {
  mode = m;
  if (m === 'browser') sessionStorage.setItem(TZ_STORAGE, m);
  else sessionStorage.removeItem(TZ_STORAGE);
}
/** The zone times of a venue are shown in: the venue's, unless the person chose the browser's. */
export const zoneFor = (venueTz: string | null | undefined): string => (mode === 'browser' || !venueTz ? BROWSER_TZ : venueTz);

const formatters = new Map<string, Intl.DateTimeFormat>();
function formatter(tz: string, withDate: boolean): Intl.DateTimeFormat {
  const k = `${tz}|${withDate}`;
  let f = formatters.get(k);
  if (!f) {
    try {
      f = new Intl.DateTimeFormat('en-GB', {
        timeZone: tz,
        ...(withDate ? { day: 'numeric', month: 'short' } : {}),
        hour: '2-digit',
        minute: '2-digit',
        timeZoneName: 'short',
      });
    } catch {
      f = new Intl.DateTimeFormat('en-GB', {
        timeZone: 'UTC',
        ...(withDate ? { day: 'numeric', month: 'short' } : {}),
        hour: '2-digit',
        minute: '2-digit',
        timeZoneName: 'short',
      });
    }
    formatters.set(k, f);
  }
  return f;
}
/** "27 Nov, 10:15 CET": an instant in a zone, with the zone's short name. */
export const fmtAt = (iso: string | number | null | undefined, tz: string): string =>
  iso === null || iso === undefined ? '—' : formatter(tz, true).format(new Date(iso));

/** "just now", "3 min ago", "2 h ago", "4 d ago". */
export function relative(iso: string | number, now = Date.now()): string {
  const s = Math.round((now - new Date(iso).getTime()) / 1000);
  if (s < -60) return `in ${Math.round(-s / 60)} min`;
  if (s < 45) return 'just now';
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86_400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86_400)} d ago`;
}

/** A <time> with the absolute time in its zone; `fresh` adds "· 3 min ago", kept current. */
export function timeEl(iso: string | null | undefined, tz: string, fresh = false): HTMLElement | string {
  if (!iso) return '—';
  const abs = fmtAt(iso, tz);
  const el = h('time', { datetime: new Date(iso).toISOString(), title: `${abs} (${tz})` }, fresh ? `${relative(iso)} · ${abs}` : abs);
  if (fresh) {
    el.dataset.rel = iso;
    el.dataset.tz = tz;
  }
  return el;
}
// Relative times move on without a refetch.
setInterval(() => {
  for (const el of document.querySelectorAll<HTMLElement>('time[data-rel]'))
    el.textContent = `${relative(el.dataset.rel!)} · ${fmtAt(el.dataset.rel!, el.dataset.tz!)}`;
}, 30_000);

/** The label that says which zone a view's times are in. */
export const zoneNote = (tz: string): string => (mode === 'browser' ? `times in this browser's zone (${tz})` : `times venue-local (${tz})`);

export function fmtDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '—';
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  const hrs = Math.floor(seconds / 3600);
  return `${hrs} h ${Math.round((seconds - hrs * 3600) / 60)} min`;
}
export const fmtInt = (n: number): string => n.toLocaleString('en-GB');
/** "78 %" with a no-break space, so the figure and its sign never part. */
export const fmtPercent = (p: number): string => `${Math.round(p)}\u00a0%`;
