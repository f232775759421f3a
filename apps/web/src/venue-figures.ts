// The venue view's figures of the past and the expected: dwell-time histogram, loyalty segments,
// and the week heat map of predicted occupancy.

import { api, type WeekPrediction } from './api.js';
import { clearStatus, fill, h, picker, section, showError } from './dom.js';

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
export function dwellSection(venueId: string) {
  const s = section('Dwell time', 'dwell');
  let range = '7d';
  const load = () => {
    clearStatus(s.status, 'Loading…');
    api.dwell(venueId, range).then(
      ({ zones }) => {
        clearStatus(s.status, zones.every((z) => z.buckets.every((b) => b.count === 0)) ? 'No visits in this range.' : '');
        fill(
          s.body,
          ...zones.map((z) =>
            h(
              'div',
              { class: 'dwell-zone' },
              h('h3', {}, z.zone_name),
              bars(
                z.buckets.map((b) => [b.range, b.count, `${b.count} visits`]),
                `Dwell time, ${z.zone_name}`,
              ),
            ),
          ),
        );
      },
      (err) => showError(s.status, 'Could not load dwell times', err),
    );
  };
  fill(
    s.controls,
    picker(
      'Visits started in',
      'dwell-range',
      [
        ['24h', 'Last 24 hours'],
        ['7d', 'Last 7 days'],
        ['30d', 'Last 30 days'],
        ['90d', 'Last 90 days'],
      ],
      range,
      (v) => ((range = v), load()),
    ),
  );
  load();
  return { root: s.root };
}

// Loyalty segments.
export function scoringSection(venueId: string) {
  const s = section('Visitor loyalty', 'loyalty');
  let range = '30d';
  const load = () => {
    clearStatus(s.status, 'Loading…');
    api.scoring(venueId, range).then(
      ({ segments, total }) => {
        clearStatus(s.status, `${total} unique device${total === 1 ? '' : 's'}.`);
        fill(
          s.body,
          bars(
            segments.map((g) => [g.name, g.count, `${g.count} (${g.percentage.toFixed(1)} %)`]),
            'Loyalty segments',
          ),
        );
      },
      (err) => showError(s.status, 'Could not load loyalty segments', err),
    );
  };
  fill(
    s.controls,
    picker(
      'Period',
      'loyalty-range',
      [
        ['7d', 'Last 7 days'],
        ['30d', 'Last 30 days'],
        ['90d', 'Last 90 days'],
      ],
      range,
      (v) => ((range = v), load()),
    ),
  );
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

export function heatMapSection(venueId: string) {
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
          h(
            'thead',
            {},
            h('tr', {}, h('td', {}), ...WEEK_ORDER.map((d) => h('th', { scope: 'col', abbr: DAYS[d] }, DAYS[d]!.slice(0, 3)))),
          ),
          h(
            'tbody',
            {},
            ...hours.map((hour) =>
              h('tr', {}, h('th', { scope: 'row' }, `${String(hour).padStart(2, '0')}:00`), ...WEEK_ORDER.map((d) => cellEl(d, hour))),
            ),
          ),
        )
      : h(
          'table',
          { class: 'heat' },
          caption,
          h('thead', {}, h('tr', {}, h('td', {}), ...hours.map((hour) => h('th', { scope: 'col' }, String(hour).padStart(2, '0'))))),
          h(
            'tbody',
            {},
            ...WEEK_ORDER.map((d) =>
              h('tr', {}, h('th', { scope: 'row', abbr: DAYS[d] }, DAYS[d]!.slice(0, 3)), ...hours.map((hour) => cellEl(d, hour))),
            ),
          ),
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
