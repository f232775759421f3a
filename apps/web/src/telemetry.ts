// Charts: the uPlot options every time chart shares (units on both axes, times in a zone) and the
// venue view's telemetry chart with its key, zone, range, interval and aggregation pickers.

import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { api, type VenueDetail } from './api.js';
import { clearStatus, fill, h, picker, section, showError } from './dom.js';

const KEYS = ['occupancy', 'entries', 'exits', 'devices', 'temperature', 'co2', 'humidity', 'noise'];
/** What each key counts or measures: the y axis's unit. */
export const UNITS: Record<string, string> = {
  occupancy: 'people',
  entries: 'people',
  exits: 'people',
  devices: 'devices',
  temperature: '°C',
  co2: 'ppm',
  humidity: '% RH',
  noise: 'dB',
};
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
export function timeChartOptions(o: {
  width: number;
  tz: string;
  yLabel: string;
  series: uPlot.Series[];
  range?: [number, number];
}): uPlot.Options {
  const zoneName =
    new Intl.DateTimeFormat('en-GB', { timeZone: o.tz, timeZoneName: 'short' })
      .formatToParts(new Date())
      .find((p) => p.type === 'timeZoneName')?.value ?? o.tz;
  return {
    width: o.width,
    height: 220,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), o.tz),
    scales: { x: { time: true, ...(o.range ? { range: o.range } : {}) } },
    series: [{ label: `Time (${zoneName})` }, ...o.series],
    axes: [
      { label: `Time (${o.tz})`, labelSize: 20, size: 40 },
      { label: o.yLabel, labelSize: 20, size: 60 },
    ],
    legend: { show: true },
  };
}

/** `zones`: the area and counter zones, whose occupancy history can be charted (zoneId, key occupancy only). */
export function telemetrySection(venueId: string, tz: string, zones: VenueDetail['zones']) {
  const s = section('Telemetry', 'telemetry');
  const q = { key: 'occupancy', range: '24h', interval: String(15 * MIN), agg: 'AVG', zone: '' };
  const keyPicker = () =>
    picker(
      'Key',
      'key',
      KEYS.map((k) => [k, k]),
      q.key,
      (v) => {
        q.key = v;
        q.agg = DEFAULT_AGG[v] ?? 'AVG';
        if (v !== 'occupancy' && q.zone) {
          q.zone = '';
          swap('zone');
        }
        swap('agg');
        load();
      },
    );
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
  const aggPicker = () =>
    picker(
      'Aggregation',
      'agg',
      AGGS.map((a) => [a, a]),
      q.agg,
      (v) => ((q.agg = v), load()),
    );
  const els: Record<'key' | 'zone' | 'agg' | 'interval', HTMLElement> = {
    key: keyPicker(),
    zone: zonePicker(),
    agg: aggPicker(),
    interval: intervalPicker(),
  };
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
    picker(
      'Range',
      'range',
      RANGES.map(([v, l]) => [v, l]),
      q.range,
      (v) => {
        q.range = v;
        q.interval = String(RANGES.find((r) => r[0] === v)![3]);
        swap('interval');
        load();
      },
    ),
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
        const yLabel =
          q.agg === 'COUNT' ? `${q.key} (readings per ${every})` : `${q.key} (${unit}${q.agg === 'SUM' ? ` per ${every}` : ''})`;
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
