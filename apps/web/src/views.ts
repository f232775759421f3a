// The views: sign-in and one venue's dashboard (the portfolio and the alarm list are in
// portfolio.ts, setup in setup.ts). Each section loads on its own and shows its own errors in
// words, so one failing call never blanks the page.

import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { alarmTable, byNewest } from './alarms.js';
import { api, ApiError, type Alarm, type Occupancy, type VenueDetail, type WeekPrediction } from './api.js';
import { clearStatus, fill, h, picker, section, showError } from './dom.js';
import { fmtPercent, timeEl, zoneFor, zoneNote } from './format.js';
import type { LiveState } from './ws.js';

// ---------------------------------------------------------------------------------------- sign-in

/** A notice above the form: why the person is back here (an error) or that they signed out. */
export interface Notice {
  text: string;
  error: boolean;
}

export function signInView(onKey: (key: string, status: HTMLElement, button: HTMLButtonElement) => void, notice?: Notice): HTMLElement {
  const input = h('input', { id: 'api-key', name: 'api-key', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false', placeholder: 'vt_live_…' });
  const status = h('p', { class: notice?.error ? 'status error' : 'status', role: notice?.error ? 'alert' : 'status', 'aria-live': 'polite' }, notice?.text ?? '');
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
    h('p', {}, 'Paste an API key of your operator. It is kept in this browser tab only (session storage) and forgotten when you sign out or close the tab.'),
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
      fill(sub, `${zoneNote(tz)}${v.address ? ` · ${v.address}` : ''} · `, h('a', { href: `#/venues/${v.id}/setup` }, 'Settings: zones, integrations, alarm thresholds'));
      clearStatus(status);
      status.hidden = true;
      inner = venueSections(v, tz, grid, ctx);
      ctx.watch([v.id]);
    },
    (err) => {
      if (disposed) return;
      title.textContent = err instanceof ApiError && (err.code === 'NOT_FOUND' || err.code === 'FORBIDDEN') ? 'Venue not available' : 'Venue';
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
  const chart = telemetrySection(v.id, tz, v.zones.filter((z) => z.type === 'area' || z.type === 'counter'));
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

// Live occupancy per zone against capacity.
function occupancySection(venueId: string, tz: string) {
  const s = section('Live occupancy', 'occupancy');
  let data: Occupancy | null = null;
  let live: LiveState = { kind: 'connecting' };
  let failed = false;
  const showLive = () => {
    if (!data || failed) return;
    if (live.kind === 'live') clearStatus(s.status, 'Live: figures change as people come and go.');
    else {
      clearStatus(s.status, live.kind === 'stopped' ? `Live updates stopped (${live.why}): figures may be behind; reload the page.` : 'Live updates paused, reconnecting… figures may be behind.');
      s.status.classList.add('paused');
    }
    s.status.dataset.live = live.kind;
  };
  const render = () => {
    if (!data) return;
    const rows = [{ zone_id: 'venue', zone_name: 'Whole venue', zone_type: 'venue', ...data }, ...data.zones];
    fill(
      s.body,
      h(
        'div',
        { class: 'table-wrap' },
        h(
          'table',
          { class: 'occupancy' },
          h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Zone'), h('th', { scope: 'col', class: 'num' }, 'People'), h('th', { scope: 'col', class: 'num' }, 'Capacity'), h('th', { scope: 'col' }, 'Load'), h('th', { scope: 'col', class: 'updated' }, 'Updated'))),
          h(
            'tbody',
            {},
            ...rows.map((z) => {
              const pct = z.updated_at === null && !z.occupancy ? null : z.percent;
              const level = pct === null ? '' : pct >= 100 ? 'over' : pct >= 80 ? 'high' : '';
              return h(
                'tr',
                { 'data-zone': z.zone_id, class: level },
                h('th', { scope: 'row' }, z.zone_name, h('span', { class: 'muted zone-type' }, ` ${z.zone_type}`), h('span', { class: 'muted sub updated-inline' }, timeEl(z.updated_at, tz, true))),
                // Never counted (no figure yet, e.g. the whole venue of a place counted only per area): not a 0.
                z.updated_at === null && !z.occupancy
                  ? h('td', { class: 'num people', title: 'not counted yet' }, '—')
                  : h('td', { class: 'num people' }, z.occupancy ?? '—'),
                h('td', { class: 'num' }, z.capacity ?? '—'),
                h(
                  'td',
                  { class: 'load-cell' },
                  pct === null
                    ? '—'
                    : h('span', { class: 'load' }, h('meter', { min: 0, max: 100, high: 80, optimum: 0, value: Math.min(pct, 100), 'aria-label': `${z.zone_name} load` }), h('span', { class: 'pct' }, fmtPercent(pct))),
                ),
                h('td', { class: 'muted updated' }, z.updated_at ? timeEl(z.updated_at, tz, true) : 'not counted yet'),
              );
            }),
          ),
        ),
      ),
    );
  };
  const load = () =>
    api.occupancy(venueId).then(
      (o) => {
        data = o;
        failed = false;
        showLive();
        render();
      },
      (err) => {
        failed = true;
        showError(s.status, 'Could not load occupancy', err);
      },
    );
  clearStatus(s.status, 'Loading occupancy…');
  void load();
  return {
    root: s.root,
    load,
    onLiveState(state: LiveState) {
      live = state;
      showLive();
    },
    onOccupancy(zoneId: string | null, occupancy: number, time: string) {
      if (!data) return;
      const target = zoneId === null ? data : data.zones.find((z) => z.zone_id === zoneId);
      if (!target) return void load(); // a zone added since the page loaded
      target.occupancy = occupancy;
      target.updated_at = time;
      target.percent = target.capacity ? Math.round((occupancy / target.capacity) * 10_000) / 100 : null;
      render();
    },
  };
}

// Alarms of the venue, with acknowledge and clear.
function alarmsSection(venueId: string, tz: string) {
  const s = section('Alarms', 'alarms');
  const byId = new Map<string, Alarm>();
  let loaded = false;
  const render = () => {
    if (!loaded) return;
    const list = [...byId.values()].sort(byNewest);
    if (!list.length) return fill(s.body, h('p', { class: 'muted' }, 'No alarms for this venue.'));
    fill(s.body, alarmTable(list, { tzOf: () => tz, onAct: act }));
  };
  const act = (a: Alarm, action: 'ack' | 'clear') =>
    api.alarmAction(a.id, action).then(
      (r) => {
        const cur = byId.get(a.id);
        if (cur) byId.set(a.id, { ...cur, status: r.status });
        clearStatus(s.status, action === 'ack' ? 'Alarm acknowledged.' : 'Alarm cleared.');
        render();
      },
      (err) => showError(s.status, action === 'ack' ? 'Could not acknowledge the alarm' : 'Could not clear the alarm', err),
    );
  const load = () =>
    api.alarms({ venue_id: venueId, limit: 50 }).then(
      ({ alarms, total }) => {
        loaded = true;
        for (const a of alarms) byId.set(a.id, a);
        clearStatus(s.status, total > alarms.length ? `The newest ${alarms.length} of ${total} alarms (all of them: the Alarms page).` : '');
        render();
      },
      (err) => showError(s.status, 'Could not load the alarms', err),
    );
  clearStatus(s.status, 'Loading…');
  void load();
  // A new figure of a zone with an active alarm revises the alarm's details.latest, which is not
  // pushed (only severity changes are): fetched again once the rule has had time to apply it.
  let nudger: ReturnType<typeof setTimeout> | undefined;
  const nudge = (zoneId: string | null) => {
    if (![...byId.values()].some((a) => a.zoneId === zoneId && a.status.startsWith('ACTIVE'))) return;
    clearTimeout(nudger);
    nudger = setTimeout(() => void load(), 1500);
  };
  return {
    root: s.root,
    load,
    nudge,
    onAlarm(alarm: Alarm) {
      const cur = byId.get(alarm.id);
      // Pushes of one venue arrive in order, but an ack's own answer may come after its push.
      if (cur && cur.updatedAt > alarm.updatedAt) return;
      byId.set(alarm.id, alarm);
      render();
    },
  };
}

// Telemetry chart with key, range, interval and aggregation pickers.
const KEYS = ['occupancy', 'entries', 'exits', 'devices', 'temperature', 'co2', 'humidity', 'noise'];
/** What each key counts or measures: the y axis's unit. */
export const UNITS: Record<string, string> = { occupancy: 'people', entries: 'people', exits: 'people', devices: 'devices', temperature: '°C', co2: 'ppm', humidity: '% RH', noise: 'dB' };
/** Counters add up over a bucket: SUM; levels and readings: AVG. */
export const DEFAULT_AGG: Record<string, string> = { entries: 'SUM', exits: 'SUM' };
const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const RANGES: Array<[string, string, number, number]> = [
  // value, label, span, default interval
  ['1h', 'Last hour', HOUR, MIN],
  ['24h', 'Last 24 hours', DAY, 15 * MIN],
  ['7d', 'Last 7 days', 7 * DAY, HOUR],
  ['28d', 'Last 28 days', 28 * DAY, DAY],
];
const INTERVALS: Array<[string, string]> = [
  [String(MIN), '1 minute'],
  [String(5 * MIN), '5 minutes'],
  [String(15 * MIN), '15 minutes'],
  [String(HOUR), '1 hour'],
  [String(DAY), '1 day'],
];
const AGGS = ['AVG', 'MAX', 'MIN', 'SUM', 'COUNT'];

/** uPlot options for a time chart in a zone, with units on both axes. */
export function timeChartOptions(o: { width: number; tz: string; yLabel: string; series: uPlot.Series[]; range?: [number, number] }): uPlot.Options {
  const zoneName = new Intl.DateTimeFormat('en-GB', { timeZone: o.tz, timeZoneName: 'short' }).formatToParts(new Date()).find((p) => p.type === 'timeZoneName')?.value ?? o.tz;
  return {
    width: o.width,
    height: 220,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), o.tz),
    scales: { x: { time: true, ...(o.range ? { range: o.range } : {}) } },
    series: [{ label: `Time (${zoneName})` }, ...o.series],
    axes: [{ label: `Time (${o.tz})`, labelSize: 20, size: 40 }, { label: o.yLabel, labelSize: 20, size: 60 }],
    legend: { show: true },
  };
}

/** `zones`: the area and counter zones, whose occupancy history can be charted (zoneId, key occupancy only). */
function telemetrySection(venueId: string, tz: string, zones: VenueDetail['zones']) {
  const s = section('Telemetry', 'telemetry');
  const q = { key: 'occupancy', range: '24h', interval: String(15 * MIN), agg: 'AVG', zone: '' };
  const keyPicker = () =>
    picker('Key', 'key', KEYS.map((k) => [k, k]), q.key, (v) => {
      q.key = v;
      q.agg = DEFAULT_AGG[v] ?? 'AVG';
      if (v !== 'occupancy' && q.zone) {
        q.zone = '';
        swap('zone');
      }
      swap('agg');
      load();
    });
  const zonePicker = () =>
    picker('Zone', 'zone', [['', 'Whole venue'], ...zones.map((z): [string, string] => [z.id, z.name])], q.zone, (v) => {
      q.zone = v;
      if (v && q.key !== 'occupancy') {
        q.key = 'occupancy';
        q.agg = 'AVG';
        swap('key');
        swap('agg');
      }
      load();
    });
  const intervalPicker = () => picker('Interval', 'interval', INTERVALS, q.interval, (v) => ((q.interval = v), load()));
  const aggPicker = () => picker('Aggregation', 'agg', AGGS.map((a) => [a, a]), q.agg, (v) => ((q.agg = v), load()));
  const els: Record<'key' | 'zone' | 'agg' | 'interval', HTMLElement> = { key: keyPicker(), zone: zonePicker(), agg: aggPicker(), interval: intervalPicker() };
  const make = { key: keyPicker, zone: zonePicker, agg: aggPicker, interval: intervalPicker };
  /** Replaces a picker by a new one showing the current choice. */
  const swap = (which: keyof typeof els) => {
    const next = make[which]();
    els[which].replaceWith(next);
    els[which] = next;
  };
  const caption = h('p', { class: 'caption', 'data-testid': 'chart-caption' });
  const axes = h('p', { class: 'caption axes', 'data-testid': 'chart-axes' });
  const plotBox = h('div', { class: 'plot' });
  let plot: uPlot | null = null;
  let seq = 0;
  fill(
    s.controls,
    els.key,
    zones.length ? els.zone : null,
    picker('Range', 'range', RANGES.map(([v, l]) => [v, l]), q.range, (v) => {
      q.range = v;
      q.interval = String(RANGES.find((r) => r[0] === v)![3]);
      swap('interval');
      load();
    }),
    els.interval,
    els.agg,
  );
  fill(s.body, caption, plotBox, axes);
  const load = () => {
    const my = ++seq;
    const span = RANGES.find((r) => r[0] === q.range)![2];
    const interval = Number(q.interval);
    const endTs = Math.ceil(Date.now() / interval) * interval;
    const startTs = endTs - span;
    clearStatus(s.status, 'Loading…');
    api.telemetry(venueId, { key: q.key, startTs, endTs, interval, agg: q.agg, zoneId: q.zone || undefined }).then(
      (res) => {
        if (my !== seq) return;
        const points = res[q.key] ?? [];
        const label = RANGES.find((r) => r[0] === q.range)![1].toLowerCase();
        const every = INTERVALS.find((i) => i[0] === q.interval)![1];
        const zone = zones.find((z) => z.id === q.zone);
        caption.textContent = `${q.key}${zone ? ` of ${zone.name}` : ''} · ${q.agg} per ${every} · ${label} · ${points.length} point${points.length === 1 ? '' : 's'}`;
        clearStatus(s.status, points.length ? '' : 'No data in this range.');
        plot?.destroy();
        const unit = UNITS[q.key] ?? '';
        const yLabel = q.agg === 'COUNT' ? `${q.key} (readings per ${every})` : `${q.key} (${unit}${q.agg === 'SUM' ? ` per ${every}` : ''})`;
        axes.textContent = `Vertical axis: ${yLabel}; horizontal: time in ${tz}.`;
        plot = new uPlot(
          timeChartOptions({
            width: Math.max(240, plotBox.clientWidth || 600),
            tz,
            yLabel,
            range: [startTs / 1000, endTs / 1000],
            series: [{ label: `${q.key} (${unit})`, stroke: '#2563eb', fill: 'rgba(37,99,235,0.12)', width: 2, spanGaps: false }],
          }),
          [points.map((p) => p.ts / 1000), points.map((p) => p.value)],
          plotBox,
        );
      },
      (err) => {
        if (my !== seq) return;
        plot?.destroy();
        plot = null;
        caption.textContent = '';
        showError(s.status, 'Could not load telemetry', err);
      },
    );
  };
  load();
  return { root: s.root, dispose: () => plot?.destroy() };
}

/** Horizontal bars: [label, value, text]. */
function bars(rows: Array<[string, number, string]>, name: string): HTMLElement {
  const max = Math.max(1, ...rows.map((r) => r[1]));
  return h(
    'dl',
    { class: 'bars', 'aria-label': name },
    ...rows.flatMap(([label, value, text]) => [
      h('dt', {}, label),
      h('dd', {}, h('span', { class: 'bar', style: `width:${(value / max) * 100}%` }), h('span', { class: 'bar-text' }, text)),
    ]),
  );
}

// Dwell-time histogram of the whole venue and each zone.
function dwellSection(venueId: string) {
  const s = section('Dwell time', 'dwell');
  let range = '7d';
  const load = () => {
    clearStatus(s.status, 'Loading…');
    api.dwell(venueId, range).then(
      ({ zones }) => {
        clearStatus(s.status, zones.every((z) => z.buckets.every((b) => b.count === 0)) ? 'No visits in this range.' : '');
        fill(s.body, ...zones.map((z) => h('div', { class: 'dwell-zone' }, h('h3', {}, z.zone_name), bars(z.buckets.map((b) => [b.range, b.count, `${b.count} visits`]), `Dwell time, ${z.zone_name}`))));
      },
      (err) => showError(s.status, 'Could not load dwell times', err),
    );
  };
  fill(s.controls, picker('Visits started in', 'dwell-range', [['24h', 'Last 24 hours'], ['7d', 'Last 7 days'], ['30d', 'Last 30 days'], ['90d', 'Last 90 days']], range, (v) => ((range = v), load())));
  load();
  return { root: s.root };
}

// Loyalty segments.
function scoringSection(venueId: string) {
  const s = section('Visitor loyalty', 'loyalty');
  let range = '30d';
  const load = () => {
    clearStatus(s.status, 'Loading…');
    api.scoring(venueId, range).then(
      ({ segments, total }) => {
        clearStatus(s.status, `${total} unique device${total === 1 ? '' : 's'}.`);
        fill(s.body, bars(segments.map((g) => [g.name, g.count, `${g.count} (${g.percentage.toFixed(1)} %)`]), 'Loyalty segments'));
      },
      (err) => showError(s.status, 'Could not load loyalty segments', err),
    );
  };
  fill(s.controls, picker('Period', 'loyalty-range', [['7d', 'Last 7 days'], ['30d', 'Last 30 days'], ['90d', 'Last 90 days']], range, (v) => ((range = v), load())));
  load();
  return { root: s.root };
}

// Week heat map of predicted occupancy: one request (GET …/predictions/occupancy/week) once the
// section is on screen.
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const WEEK_ORDER = [1, 2, 3, 4, 5, 6, 0];
type Cell = { d: number; hour: number; mean: number; samples: number };
/** Narrow screens get the week turned on its side: hours down, seven days across. */
const NARROW = '(max-width: 640px)';

function heatMapSection(venueId: string) {
  const s = section('Expected occupancy by day and hour', 'predictions');
  let cells: Cell[] = [];
  let max = 1;
  const cellEl = (d: number, hour: number): HTMLTableCellElement => {
    const c = cells.find((x) => x.d === d && x.hour === hour);
    const label = `${DAYS[d]} ${String(hour).padStart(2, '0')}:00: ${!c ? 'loading' : c.samples ? `${c.mean.toFixed(1)} people expected` : 'no history'}`;
    const td = h('td', { 'aria-label': label, title: label }, c && c.samples ? String(Math.round(c.mean)) : '');
    if (c && c.samples) {
      const share = c.mean / max;
      td.style.background = `rgba(37, 99, 235, ${(0.08 + 0.82 * share).toFixed(2)})`;
      if (share > 0.55) td.classList.add('dark');
    }
    return td;
  };
  const render = () => {
    const narrow = matchMedia(NARROW).matches;
    const caption = h('caption', { class: 'muted' }, 'Mean people present, venue-local time, from the last 28 days.');
    const hours = Array.from({ length: 24 }, (_, hour) => hour);
    const table = narrow
      ? h(
          'table',
          { class: 'heat narrow' },
          caption,
          h('thead', {}, h('tr', {}, h('td', {}), ...WEEK_ORDER.map((d) => h('th', { scope: 'col', abbr: DAYS[d] }, DAYS[d]!.slice(0, 3))))),
          h('tbody', {}, ...hours.map((hour) => h('tr', {}, h('th', { scope: 'row' }, `${String(hour).padStart(2, '0')}:00`), ...WEEK_ORDER.map((d) => cellEl(d, hour))))),
        )
      : h(
          'table',
          { class: 'heat' },
          caption,
          h('thead', {}, h('tr', {}, h('td', {}), ...hours.map((hour) => h('th', { scope: 'col' }, String(hour).padStart(2, '0'))))),
          h('tbody', {}, ...WEEK_ORDER.map((d) => h('tr', {}, h('th', { scope: 'row', abbr: DAYS[d] }, DAYS[d]!.slice(0, 3)), ...hours.map((hour) => cellEl(d, hour))))),
        );
    fill(s.body, table);
  };
  render();
  const media = matchMedia(NARROW);
  media.addEventListener('change', render);
  clearStatus(s.status, 'Loads when scrolled into view.');
  let cancelled = false;
  const finish = () => {
    max = Math.max(1, ...cells.map((r) => r.mean));
    render();
    clearStatus(s.status, cells.some((r) => r.samples) ? '' : 'No history yet: predictions need hourly occupancy of past weeks.');
  };
  const load = async () => {
    clearStatus(s.status, 'Loading…');
    let week: WeekPrediction;
    try {
      week = await api.predictionWeek(venueId);
    } catch (err) {
      if (cancelled) return;
      return showError(s.status, 'Could not load the predictions', err);
    }
    if (cancelled) return;
    cells = week.cells.map((c) => ({ d: c.dayOfWeek, hour: c.hour, mean: c.mean, samples: c.sampleSize }));
    finish();
  };
  const observer = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) {
      observer.disconnect();
      void load();
    }
  });
  observer.observe(s.root);
  return {
    root: s.root,
    dispose() {
      cancelled = true;
      observer.disconnect();
      media.removeEventListener('change', render);
    },
  };
}
