// The views: sign-in, the overview (venues, connector health) and one venue's dashboard. Each
// section loads on its own and shows its own errors in words, so one failing call never blanks the page.

import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { api, ApiError, type Alarm, type Occupancy, type Venue } from './api.js';
import { clearStatus, fill, fmtTime, h, picker, section, showError } from './dom.js';

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

// --------------------------------------------------------------------------------------- overview

export function overviewView(): HTMLElement {
  const venues = section('Venues', 'venues');
  const connectors = section('Connector health', 'connectors');
  clearStatus(venues.status, 'Loading venues…');
  api.venues().then(
    ({ data }) => {
      clearStatus(venues.status, data.length ? '' : 'This operator has no venues yet.');
      fill(venues.body, h('ul', { class: 'venue-list' }, ...data.map(venueLink)));
    },
    (err) => showError(venues.status, 'Could not load the venues', err),
  );
  clearStatus(connectors.status, 'Loading connector health…');
  api.connectors().then(
    ({ connectors: rows }) => {
      clearStatus(connectors.status, rows.length ? '' : 'No active integrations.');
      if (!rows.length) return;
      fill(
        connectors.body,
        h(
          'table',
          {},
          h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Connector'), h('th', { scope: 'col' }, 'Health'), h('th', { scope: 'col' }, 'Integrations'), h('th', { scope: 'col' }, 'Last sign of life'))),
          h('tbody', {}, ...rows.map((c) => h('tr', {}, h('td', {}, c.type), h('td', {}, h('span', { class: `pill ${c.status}` }, c.status)), h('td', { class: 'num' }, c.count), h('td', {}, fmtTime(c.lastEventAt))))),
        ),
      );
    },
    (err) => showError(connectors.status, 'Could not load connector health', err),
  );
  return h('div', { class: 'grid' }, venues.root, connectors.root);
}

const venueLink = (v: Venue) =>
  h(
    'li',
    {},
    h('a', { href: `#/venues/${v.id}`, class: 'venue-link' }, h('strong', {}, v.name)),
    h('span', { class: 'muted' }, ` ${v.timezone} · ${v.zone_count} zone${v.zone_count === 1 ? '' : 's'} · last event ${fmtTime(v.last_event_at)}`),
  );

// ------------------------------------------------------------------------------------------ venue

/** What the live socket feeds into an open venue view. */
export interface VenueView {
  root: HTMLElement;
  onOccupancy(zoneId: string | null, occupancy: number, time: string): void;
  onAlarm(alarm: Alarm): void;
  /** Refetches what a reconnect may have missed. */
  refresh(): void;
  dispose(): void;
}

export function venueView(venueId: string): VenueView {
  const title = h('h2', { class: 'venue-title' }, 'Venue');
  const occ = occupancySection(venueId);
  const alarms = alarmsSection(venueId);
  const chart = telemetrySection(venueId);
  const dwell = dwellSection(venueId);
  const loyalty = scoringSection(venueId);
  const heat = heatMapSection(venueId);
  api.venue(venueId).then(
    (v) => {
      title.textContent = v.name;
      document.title = `${v.name} · Venue dashboard`;
    },
    (err) => (title.textContent = err instanceof ApiError && (err.code === 'NOT_FOUND' || err.code === 'FORBIDDEN') ? 'Venue not available' : 'Venue'),
  );
  const root = h(
    'div',
    {},
    h('p', {}, h('a', { href: '#/' }, '← All venues')),
    title,
    h('div', { class: 'grid' }, occ.root, alarms.root, chart.root, dwell.root, loyalty.root, heat.root),
  );
  return {
    root,
    onOccupancy: occ.onOccupancy,
    onAlarm: alarms.onAlarm,
    refresh() {
      occ.load();
      alarms.load();
    },
    dispose() {
      chart.dispose();
      heat.dispose();
    },
  };
}

// Live occupancy per zone against capacity.
function occupancySection(venueId: string) {
  const s = section('Live occupancy', 'occupancy');
  let data: Occupancy | null = null;
  const render = () => {
    if (!data) return;
    const rows = [{ zone_id: 'venue', zone_name: 'Whole venue', zone_type: 'venue', ...data }, ...data.zones];
    fill(
      s.body,
      h(
        'table',
        { class: 'occupancy' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Zone'), h('th', { scope: 'col' }, 'People'), h('th', { scope: 'col' }, 'Capacity'), h('th', { scope: 'col' }, 'Load'), h('th', { scope: 'col' }, 'Updated'))),
        h(
          'tbody',
          {},
          ...rows.map((z) => {
            const pct = z.percent;
            const level = pct === null ? '' : pct >= 100 ? 'over' : pct >= 80 ? 'high' : '';
            return h(
              'tr',
              { 'data-zone': z.zone_id, class: level },
              h('th', { scope: 'row' }, z.zone_name, h('span', { class: 'muted' }, ` ${z.zone_type}`)),
              h('td', { class: 'num people' }, z.occupancy ?? '—'),
              h('td', { class: 'num' }, z.capacity ?? '—'),
              h(
                'td',
                {},
                pct === null
                  ? '—'
                  : h('span', { class: 'load' }, h('meter', { min: 0, max: 100, high: 80, optimum: 0, value: Math.min(pct, 100), 'aria-label': `${z.zone_name} load` }), ` ${pct.toFixed(0)} %`),
              ),
              h('td', { class: 'muted' }, fmtTime(z.updated_at)),
            );
          }),
        ),
      ),
    );
  };
  const load = () =>
    api.occupancy(venueId).then(
      (o) => {
        data = o;
        clearStatus(s.status, 'Live: figures change as people come and go.');
        render();
      },
      (err) => showError(s.status, 'Could not load occupancy', err),
    );
  clearStatus(s.status, 'Loading occupancy…');
  void load();
  return {
    root: s.root,
    load,
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
function alarmsSection(venueId: string) {
  const s = section('Alarms', 'alarms');
  const byId = new Map<string, Alarm>();
  const render = () => {
    const list = [...byId.values()].sort((a, b) => b.createdAt.localeCompare(a.createdAt));
    if (!list.length) return fill(s.body, h('p', { class: 'muted' }, 'No alarms for this venue.'));
    fill(
      s.body,
      h(
        'table',
        { class: 'alarms' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Severity'), h('th', { scope: 'col' }, 'Status'), h('th', { scope: 'col' }, 'Alarm'), h('th', { scope: 'col' }, 'Raised'), h('th', { scope: 'col' }, 'Actions'))),
        h(
          'tbody',
          {},
          ...list.map((a) =>
            h(
              'tr',
              { 'data-alarm': a.id, 'data-status': a.status },
              h('td', {}, h('span', { class: `pill ${a.severity.toLowerCase()}` }, a.severity)),
              h('td', { class: 'alarm-status' }, a.status),
              h('td', {}, a.message),
              h('td', { class: 'muted' }, fmtTime(a.createdAt)),
              h(
                'td',
                { class: 'actions' },
                a.status.endsWith('_UNACK') && h('button', { type: 'button', onclick: () => act(a, 'ack'), 'aria-label': `Acknowledge: ${a.message}` }, 'Acknowledge'),
                a.status.startsWith('ACTIVE') && h('button', { type: 'button', class: 'secondary', onclick: () => act(a, 'clear'), 'aria-label': `Clear: ${a.message}` }, 'Clear'),
              ),
            ),
          ),
        ),
      ),
    );
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
    api.alarms(venueId).then(
      ({ alarms, total }) => {
        for (const a of alarms) byId.set(a.id, a);
        clearStatus(s.status, total > alarms.length ? `The newest ${alarms.length} of ${total} alarms.` : '');
        render();
      },
      (err) => showError(s.status, 'Could not load the alarms', err),
    );
  void load();
  return {
    root: s.root,
    load,
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

function telemetrySection(venueId: string) {
  const s = section('Telemetry', 'telemetry');
  const q = { key: 'occupancy', range: '24h', interval: String(15 * MIN), agg: 'AVG' };
  const intervalPicker = () => picker('Interval', 'interval', INTERVALS, q.interval, (v) => ((q.interval = v), load()));
  let intervalEl = intervalPicker();
  const caption = h('p', { class: 'caption', 'data-testid': 'chart-caption' });
  const plotBox = h('div', { class: 'plot' });
  let plot: uPlot | null = null;
  let seq = 0;
  fill(
    s.controls,
    picker('Key', 'key', KEYS.map((k) => [k, k]), q.key, (v) => ((q.key = v), load())),
    picker('Range', 'range', RANGES.map(([v, l]) => [v, l]), q.range, (v) => {
      q.range = v;
      q.interval = String(RANGES.find((r) => r[0] === v)![3]);
      const next = intervalPicker();
      intervalEl.replaceWith(next);
      intervalEl = next;
      load();
    }),
    intervalEl,
    picker('Aggregation', 'agg', AGGS.map((a) => [a, a]), q.agg, (v) => ((q.agg = v), load())),
  );
  fill(s.body, caption, plotBox);
  const load = () => {
    const my = ++seq;
    const span = RANGES.find((r) => r[0] === q.range)![2];
    const interval = Number(q.interval);
    const endTs = Math.ceil(Date.now() / interval) * interval;
    const startTs = endTs - span;
    clearStatus(s.status, 'Loading…');
    api.telemetry(venueId, { key: q.key, startTs, endTs, interval, agg: q.agg }).then(
      (res) => {
        if (my !== seq) return;
        const points = res[q.key] ?? [];
        const label = RANGES.find((r) => r[0] === q.range)![1].toLowerCase();
        const every = INTERVALS.find((i) => i[0] === q.interval)![1];
        caption.textContent = `${q.key} · ${q.agg} per ${every} · ${label} · ${points.length} point${points.length === 1 ? '' : 's'}`;
        clearStatus(s.status, points.length ? '' : 'No data in this range.');
        plot?.destroy();
        plot = new uPlot(
          {
            width: Math.max(300, plotBox.clientWidth || 600),
            height: 220,
            scales: { x: { time: true, range: [startTs / 1000, endTs / 1000] } },
            series: [{}, { label: q.key, stroke: '#2563eb', fill: 'rgba(37,99,235,0.12)', width: 2, spanGaps: false }],
            axes: [{}, { size: 50 }],
            legend: { show: true },
          },
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

// Week heat map of predicted occupancy: 168 calls, fetched once the section is on screen, six at a time.
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const WEEK_ORDER = [1, 2, 3, 4, 5, 6, 0];
export const PREDICTION_CONCURRENCY = 6;

function heatMapSection(venueId: string) {
  const s = section('Expected occupancy by day and hour', 'predictions');
  const cells = new Map<string, HTMLTableCellElement>();
  const table = h(
    'table',
    { class: 'heat' },
    h('caption', { class: 'muted' }, 'Mean people present, venue-local time, from the last 28 days.'),
    h('thead', {}, h('tr', {}, h('td', {}), ...Array.from({ length: 24 }, (_, hour) => h('th', { scope: 'col' }, String(hour).padStart(2, '0'))))),
    h(
      'tbody',
      {},
      ...WEEK_ORDER.map((d) =>
        h(
          'tr',
          {},
          h('th', { scope: 'row' }, DAYS[d]!.slice(0, 3)),
          ...Array.from({ length: 24 }, (_, hour) => {
            const td = h('td', { 'aria-label': `${DAYS[d]} ${hour}:00: loading` }, '');
            cells.set(`${d}:${hour}`, td);
            return td;
          }),
        ),
      ),
    ),
  );
  fill(s.body, table);
  clearStatus(s.status, 'Loads when scrolled into view.');
  let cancelled = false;
  const load = async () => {
    const jobs = WEEK_ORDER.flatMap((d) => Array.from({ length: 24 }, (_, hour) => [d, hour] as const));
    const results: Array<{ d: number; hour: number; mean: number; samples: number }> = [];
    let failed: unknown = null;
    let done = 0;
    clearStatus(s.status, 'Loading 0 of 168…');
    const worker = async () => {
      for (let job = jobs.shift(); job && !cancelled && !failed; job = jobs.shift()) {
        const [d, hour] = job;
        try {
          const p = await api.prediction(venueId, d, hour);
          results.push({ d, hour, mean: p.mean, samples: p.sampleSize });
          const td = cells.get(`${d}:${hour}`)!;
          td.textContent = p.sampleSize ? String(Math.round(p.mean)) : '';
          td.setAttribute('aria-label', `${DAYS[d]} ${hour}:00: ${p.sampleSize ? `${p.mean.toFixed(1)} people expected` : 'no history'}`);
          td.title = td.getAttribute('aria-label')!;
          if (!cancelled) clearStatus(s.status, `Loading ${++done} of 168…`);
        } catch (err) {
          failed = err;
        }
      }
    };
    await Promise.all(Array.from({ length: PREDICTION_CONCURRENCY }, worker));
    if (cancelled) return;
    if (failed) return showError(s.status, 'Could not load the predictions', failed);
    const max = Math.max(1, ...results.map((r) => r.mean));
    for (const r of results) cells.get(`${r.d}:${r.hour}`)!.style.background = r.samples ? `rgba(37, 99, 235, ${(0.08 + 0.82 * (r.mean / max)).toFixed(2)})` : '';
    clearStatus(s.status, results.some((r) => r.samples) ? '' : 'No history yet: predictions need hourly occupancy of past weeks.');
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
    },
  };
}
