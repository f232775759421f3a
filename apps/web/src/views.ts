// The views: sign-in and one venue's dashboard (the portfolio and the alarm list are in
// portfolio.ts, setup in setup.ts). The venue's sections are in venue-live.ts, telemetry.ts and
// venue-figures.ts. Each section loads on its own and shows its own errors in words, so one
// failing call never blanks the page.

import { api, ApiError, type Alarm, type VenueDetail } from './api.js';
import { clearStatus, fill, h, showError } from './dom.js';
import { zoneFor, zoneNote } from './format.js';
import { telemetrySection } from './telemetry.js';
import { dwellSection, heatMapSection, scoringSection } from './venue-figures.js';
import { alarmsSection, occupancySection } from './venue-live.js';
import type { LiveState } from './ws.js';

export { timeChartOptions } from './telemetry.js';

// ---------------------------------------------------------------------------------------- sign-in

/** A notice above the form: why the person is back here (an error) or that they signed out. */
export interface Notice {
  text: string;
  error: boolean;
}

export function signInView(onKey: (key: string, status: HTMLElement, button: HTMLButtonElement) => void, notice?: Notice): HTMLElement {
  const input = h('input', {
    id: 'api-key',
    name: 'api-key',
    type: 'password',
    autocomplete: 'off',
    required: true,
    spellcheck: 'false',
    placeholder: 'vt_live_…',
  });
  const status = h(
    'p',
    { class: notice?.error ? 'status error' : 'status', role: notice?.error ? 'alert' : 'status', 'aria-live': 'polite' },
    notice?.text ?? '',
  );
  const button = h('button', { type: 'submit' }, 'Sign in');
  const form = h(
    'form',
    {
      class: 'card sign-in',
      'aria-labelledby': 'sign-in-h',
      onsubmit: (ev: Event) => {
        ev.preventDefault();
        const key = input.value.trim();
        if (key) onKey(key, status, button);
      },
    },
    h('h2', { id: 'sign-in-h' }, 'Sign in'),
    h(
      'p',
      {},
      'Paste an API key of your operator. It is kept in this browser tab only (session storage) and forgotten when you sign out or close the tab.',
    ),
    h('label', { for: 'api-key' }, 'API key'),
    input,
    button,
    status,
  );
  queueMicrotask(() => input.focus());
  return form;
}

// ------------------------------------------------------------------------------------------ views

/** What main.ts wires to a view: the live stream's figures and state, and the venues to watch. */
export interface View {
  root: HTMLElement;
  onOccupancy?(venueId: string, zoneId: string | null, occupancy: number, time: string): void;
  onAlarm?(alarm: Alarm): void;
  /** Refetches what a reconnect may have missed. */
  refresh?(venueId: string): void;
  onLiveState?(state: LiveState): void;
  dispose?(): void;
}
export interface ViewContext {
  /** Subscribes the live stream to these venues (replacing the previous ones). */
  watch(venueIds: string[]): void;
  /** The current live state (a view opened while the stream is down shows it at once). */
  liveState(): LiveState;
}

// ------------------------------------------------------------------------------------------ venue

/** One venue: loaded first (its time zone frames every figure); an unknown one is ONE error. */
export function venueView(venueId: string, ctx: ViewContext): View {
  const title = h('h2', { class: 'venue-title' }, 'Venue');
  const sub = h('p', { class: 'venue-sub muted' });
  const status = h('p', { class: 'status', role: 'status', 'aria-live': 'polite' }, 'Loading the venue…');
  const grid = h('div', { class: 'grid' });
  const root = h('div', {}, h('p', { class: 'crumbs' }, h('a', { href: '#/' }, '← All venues')), title, sub, status, grid);
  let inner: Required<Omit<View, 'root'>> | null = null;
  let disposed = false;
  api.venue(venueId).then(
    (v) => {
      if (disposed) return;
      title.textContent = v.name;
      document.title = `${v.name} · Venue dashboard`;
      const tz = zoneFor(v.timezone);
      fill(
        sub,
        `${zoneNote(tz)}${v.address ? ` · ${v.address}` : ''} · `,
        h('a', { href: `#/venues/${v.id}/setup` }, 'Settings: zones, integrations, alarm thresholds'),
      );
      clearStatus(status);
      status.hidden = true;
      inner = venueSections(v, tz, grid, ctx);
      ctx.watch([v.id]);
    },
    (err) => {
      if (disposed) return;
      title.textContent =
        err instanceof ApiError && (err.code === 'NOT_FOUND' || err.code === 'FORBIDDEN') ? 'Venue not available' : 'Venue';
      showError(status, 'Could not load the venue', err);
    },
  );
  return {
    root,
    onOccupancy: (id, zoneId, occupancy, time) => inner?.onOccupancy(id, zoneId, occupancy, time),
    onAlarm: (a) => inner?.onAlarm(a),
    refresh: (id) => inner?.refresh(id),
    onLiveState: (s) => inner?.onLiveState(s),
    dispose() {
      disposed = true;
      inner?.dispose();
    },
  };
}

function venueSections(v: VenueDetail, tz: string, grid: HTMLElement, ctx: ViewContext): Required<Omit<View, 'root'>> {
  const occ = occupancySection(v.id, tz);
  const alarms = alarmsSection(v.id, tz);
  const chart = telemetrySection(
    v.id,
    tz,
    v.zones.filter((z) => z.type === 'area' || z.type === 'counter'),
  );
  const dwell = dwellSection(v.id);
  const loyalty = scoringSection(v.id);
  const heat = heatMapSection(v.id);
  fill(grid, occ.root, alarms.root, chart.root, dwell.root, loyalty.root, heat.root);
  occ.onLiveState(ctx.liveState());
  return {
    onOccupancy: (_id, zoneId, occupancy, time) => {
      occ.onOccupancy(zoneId, occupancy, time);
      alarms.nudge(zoneId);
    },
    onAlarm: alarms.onAlarm,
    refresh() {
      void occ.load();
      void alarms.load();
    },
    onLiveState: occ.onLiveState,
    dispose() {
      chart.dispose();
      heat.dispose();
    },
  };
}
