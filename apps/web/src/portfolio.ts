// The portfolio (#/): every venue with live occupancy against capacity, active alarms by severity,
// connector health, today's events and dwell, what needs attention first; the operator's totals and
// event volume.

import uPlot from 'uplot';
import { api, type Health, type PortfolioVenue } from './api.js';
import { clearStatus, fill, h, picker, section, showError } from './dom.js';
import { fmtDuration, fmtInt, fmtPercent, HEALTH_LABEL, SEVERITIES, SEVERITY_LABEL, timeEl, zoneFor } from './format.js';
import { timeChartOptions, type View, type ViewContext } from './views.js';

const HEALTHS: Health[] = ['offline', 'degraded', 'waiting', 'healthy'];

// ------------------------------------------------------------------------------------- portfolio

export function portfolioView(ctx: ViewContext): View {
  const venues = section('Venues', 'portfolio');
  const stats = section('Last 24 hours, all venues', 'stats');
  const events = section('Event volume, all venues', 'events');
  const connectors = section('Connector health by type', 'connectors');
  const root = h('div', { class: 'grid' }, stats.root, venues.root, events.root, connectors.root);
  venues.root.classList.add('wide');
  stats.root.classList.add('wide');
  let rows: PortfolioVenue[] = [];
  const livePushed = new Map<string, { value: number; updated_at: string }>();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let eventsChart: uPlot | null = null;

  const renderVenues = () => {
    if (!rows.length) {
      fill(venues.body, onboarding());
      return;
    }
    fill(
      venues.body,
      h(
        'div',
        { class: 'table-wrap' },
        h(
          'table',
          { class: 'portfolio' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', { scope: 'col' }, 'Venue'),
              h('th', { scope: 'col' }, 'Occupancy now'),
              h('th', { scope: 'col', class: 'wide-only' }, 'Active alarms'),
              h('th', { scope: 'col', class: 'wide-only' }, 'Connectors'),
              h('th', { scope: 'col', class: 'wide-only' }, 'Today'),
            ),
          ),
          h('tbody', {}, ...rows.map(venueRow)),
        ),
      ),
    );
  };
  const load = () =>
    api.portfolio().then(
      (p) => {
        // A pushed figure may be newer than the stored one the answer was read from: keep it.
        for (const v of p.venues) {
          const pushed = livePushed.get(v.id);
          if (pushed && (!v.occupancy.updated_at || pushed.updated_at > v.occupancy.updated_at))
            v.occupancy = withFigure(v, pushed.value, pushed.updated_at);
        }
        rows = p.venues;
        clearStatus(
          venues.status,
          rows.length
            ? `${rows.length} venue${rows.length === 1 ? '' : 's'}, what needs attention first. Occupancy is live; the rest refreshes every minute.`
            : '',
        );
        renderVenues();
        ctx.watch(rows.map((v) => v.id));
      },
      (err) => showError(venues.status, 'Could not load the venues', err),
    );
  const soon = () => {
    clearTimeout(timer);
    timer = setTimeout(() => void load(), 1000);
  };

  clearStatus(venues.status, 'Loading venues…');
  void load();
  const poll = setInterval(() => void load(), 60_000);

  clearStatus(stats.status, 'Loading…');
  api.stats().then(
    (s) => {
      clearStatus(stats.status);
      fill(
        stats.body,
        h(
          'dl',
          { class: 'tiles' },
          tile('Active venues', fmtInt(s.venueCount)),
          tile('Events', fmtInt(s.events24h)),
          tile('Active integrations', fmtInt(s.activeIntegrations)),
          tile('Average dwell', s.avgDwellSeconds ? fmtDuration(s.avgDwellSeconds) : '—'),
        ),
      );
    },
    (err) => showError(stats.status, 'Could not load the totals', err),
  );

  let range = '7d';
  const plotBox = h('div', { class: 'plot' });
  const caption = h('p', { class: 'caption', 'data-testid': 'events-caption' });
  fill(events.body, caption, plotBox);
  const loadEvents = () => {
    clearStatus(events.status, 'Loading…');
    api.events(range).then(
      (res) => {
        const per = range === '24h' ? 'hour' : 'day';
        const total = res.events.reduce((n, b) => n + b.events, 0);
        caption.textContent = `Events, entries and exits per UTC ${per} · total ${fmtInt(total)} events`;
        clearStatus(events.status, total ? '' : 'No events in this range.');
        eventsChart?.destroy();
        eventsChart = new uPlot(
          timeChartOptions({
            width: Math.max(240, plotBox.clientWidth || 500),
            tz: 'UTC',
            yLabel: `count per ${per}`,
            series: [
              { label: 'events', stroke: '#2563eb', width: 2 },
              { label: 'entries (people)', stroke: '#15803d', width: 2 },
              { label: 'exits (people)', stroke: '#b45309', width: 2 },
            ],
          }),
          [
            res.events.map((b) => b.ts / 1000),
            res.events.map((b) => b.events),
            res.events.map((b) => b.entries),
            res.events.map((b) => b.exits),
          ],
          plotBox,
        );
      },
      (err) => showError(events.status, 'Could not load the event volume', err),
    );
  };
  fill(
    events.controls,
    picker(
      'Range',
      'events-range',
      [
        ['24h', 'Last 24 hours'],
        ['7d', 'Last 7 days'],
        ['30d', 'Last 30 days'],
        ['90d', 'Last 90 days'],
      ],
      range,
      (v) => ((range = v), loadEvents()),
    ),
  );
  loadEvents();

  clearStatus(connectors.status, 'Loading connector health…');
  api.connectors().then(
    ({ connectors: list }) => {
      clearStatus(connectors.status, list.length ? '' : 'No active integrations.');
      if (!list.length) return;
      fill(
        connectors.body,
        h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            {},
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                h('th', { scope: 'col' }, 'Connector'),
                h('th', { scope: 'col' }, 'Health'),
                h('th', { scope: 'col', class: 'num' }, 'Integrations'),
                h('th', { scope: 'col' }, 'Last sign of life'),
              ),
            ),
            h(
              'tbody',
              {},
              ...list.map((c) =>
                h(
                  'tr',
                  {},
                  h('td', {}, c.type),
                  h('td', {}, h('span', { class: `pill ${c.status}` }, HEALTH_LABEL[c.status] ?? c.status)),
                  h('td', { class: 'num' }, c.count),
                  h('td', {}, timeEl(c.lastEventAt, zoneFor(null), true)),
                ),
              ),
            ),
          ),
        ),
      );
    },
    (err) => showError(connectors.status, 'Could not load connector health', err),
  );

  return {
    root,
    onOccupancy(venueId, zoneId, occupancy, time) {
      if (zoneId !== null) return;
      livePushed.set(venueId, { value: occupancy, updated_at: time });
      const v = rows.find((r) => r.id === venueId);
      if (!v) return;
      v.occupancy = withFigure(v, occupancy, time);
      renderVenues();
    },
    onAlarm: soon,
    refresh: soon,
    dispose() {
      clearTimeout(timer);
      clearInterval(poll);
      eventsChart?.destroy();
    },
  };
}

const withFigure = (v: PortfolioVenue, value: number, time: string): PortfolioVenue['occupancy'] => ({
  ...v.occupancy,
  value,
  updated_at: time,
  percent: v.occupancy.capacity ? Math.round((value / v.occupancy.capacity) * 1000) / 10 : null,
});

const tile = (label: string, value: string) => h('div', { class: 'tile' }, h('dt', {}, label), h('dd', {}, value));

function venueRow(v: PortfolioVenue): HTMLElement {
  const o = v.occupancy;
  const pct = o.percent;
  const level = pct === null ? '' : pct >= 100 ? 'over' : pct >= 80 ? 'high' : '';
  const alarms = SEVERITIES.filter((s) => v.alarms[s] > 0);
  const tz = zoneFor(v.timezone);
  return h(
    'tr',
    { 'data-venue': v.id, class: level },
    h(
      'th',
      { scope: 'row' },
      h('a', { href: `#/venues/${v.id}`, class: 'venue-link' }, v.name),
      h('span', { class: 'muted sub' }, `${v.timezone} · ${v.local_day}`),
      // On a phone the last three columns are folded in here (style.css).
      h(
        'span',
        { class: 'fold' },
        ...alarms.map((s) => h('span', { class: `pill ${s.toLowerCase()}` }, `${v.alarms[s]} ${SEVERITY_LABEL[s]}`)),
        ...HEALTHS.filter((s) => v.connectors[s] > 0).map((s) =>
          h('span', { class: `pill ${s}` }, `${v.connectors[s]} ${HEALTH_LABEL[s]}`),
        ),
        h('span', { class: 'muted sub' }, `today ${fmtInt(v.events_today)} events · dwell ${fmtDuration(v.avg_dwell_seconds_today)}`),
      ),
    ),
    h(
      'td',
      { class: 'occ' },
      h('span', { class: 'people' }, String(o.value)),
      o.capacity !== null ? h('span', { class: 'muted' }, ` of ${o.capacity}`) : null,
      pct !== null &&
        h(
          'span',
          { class: 'load' },
          h('meter', { min: 0, max: 100, high: 80, optimum: 0, value: Math.min(pct, 100), 'aria-label': `${v.name} load` }),
          h('span', { class: 'pct' }, fmtPercent(pct)),
        ),
      h('span', { class: 'muted sub' }, o.updated_at ? timeEl(o.updated_at, tz, true) : 'no count yet'),
    ),
    h(
      'td',
      { class: 'alarm-counts wide-only' },
      alarms.length
        ? h(
            'a',
            {
              href: `#/alarms?venue=${v.id}`,
              class: 'pills',
              'aria-label': `Active alarms: ${alarms.map((s) => `${v.alarms[s]} ${SEVERITY_LABEL[s].toLowerCase()}`).join(', ')}`,
            },
            ...alarms.map((s) =>
              h('span', { class: `pill ${s.toLowerCase()}`, 'data-severity': s }, `${v.alarms[s]} ${SEVERITY_LABEL[s]}`),
            ),
          )
        : h('span', { class: 'muted' }, 'none'),
    ),
    h(
      'td',
      { class: 'health wide-only' },
      HEALTHS.some((s) => v.connectors[s] > 0)
        ? h(
            'span',
            { class: 'pills' },
            ...HEALTHS.filter((s) => v.connectors[s] > 0).map((s) =>
              h('span', { class: `pill ${s}`, 'data-health': s }, `${v.connectors[s]} ${HEALTH_LABEL[s]}`),
            ),
          )
        : h('a', { href: `#/venues/${v.id}/setup` }, 'no integration: add one'),
    ),
    h(
      'td',
      { class: 'today wide-only' },
      h('span', {}, `${fmtInt(v.events_today)} events`),
      h('span', { class: 'muted sub' }, `dwell ${fmtDuration(v.avg_dwell_seconds_today)}`),
    ),
  );
}

/** What a new operator sees: the way to a first venue and a first integration. */
function onboarding(): HTMLElement {
  return h(
    'div',
    { class: 'onboarding' },
    h('p', {}, h('strong', {}, 'No venues yet. Three steps to your first figures:')),
    h(
      'ol',
      {},
      h('li', {}, h('a', { href: '#/setup' }, 'Create a venue'), ': its name and time zone (every time on this page is shown in it).'),
      h('li', {}, 'Add its zones: an area, an entrance… with a capacity, so load and occupancy alarms work.'),
      h('li', {}, 'Connect an integration (Meraki, Density, …): its credentials are stored encrypted and never shown again.'),
    ),
    h('p', {}, h('a', { href: '#/setup', class: 'button' }, 'Create your first venue')),
  );
}
