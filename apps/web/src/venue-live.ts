// The venue view's live sections: occupancy per zone against capacity (updated by the stream's
// pushes) and the venue's alarms (acknowledge, clear; pushes add and update rows).

import { alarmTable, byNewest } from './alarms.js';
import { api, type Alarm, type Occupancy } from './api.js';
import { clearStatus, fill, h, section, showError } from './dom.js';
import { fmtPercent, timeEl } from './format.js';
import type { LiveState } from './ws.js';

// Live occupancy per zone against capacity.
export function occupancySection(venueId: string, tz: string) {
  const s = section('Live occupancy', 'occupancy');
  let data: Occupancy | null = null;
  let live: LiveState = { kind: 'connecting' };
  let failed = false;
  const showLive = () => {
    if (!data || failed) return;
    if (live.kind === 'live') clearStatus(s.status, 'Live: figures change as people come and go.');
    else {
      clearStatus(
        s.status,
        live.kind === 'stopped'
          ? `Live updates stopped (${live.why}): figures may be behind; reload the page.`
          : 'Live updates paused, reconnecting… figures may be behind.',
      );
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
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', { scope: 'col' }, 'Zone'),
              h('th', { scope: 'col', class: 'num' }, 'People'),
              h('th', { scope: 'col', class: 'num' }, 'Capacity'),
              h('th', { scope: 'col' }, 'Load'),
              h('th', { scope: 'col', class: 'updated' }, 'Updated'),
            ),
          ),
          h(
            'tbody',
            {},
            ...rows.map((z) => {
              const pct = z.updated_at === null && !z.occupancy ? null : z.percent;
              const level = pct === null ? '' : pct >= 100 ? 'over' : pct >= 80 ? 'high' : '';
              return h(
                'tr',
                { 'data-zone': z.zone_id, class: level },
                h(
                  'th',
                  { scope: 'row' },
                  z.zone_name,
                  h('span', { class: 'muted zone-type' }, ` ${z.zone_type}`),
                  h('span', { class: 'muted sub updated-inline' }, timeEl(z.updated_at, tz, true)),
                ),
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
                    : h(
                        'span',
                        { class: 'load' },
                        h('meter', {
                          min: 0,
                          max: 100,
                          high: 80,
                          optimum: 0,
                          value: Math.min(pct, 100),
                          'aria-label': `${z.zone_name} load`,
                        }),
                        h('span', { class: 'pct' }, fmtPercent(pct)),
                      ),
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
export function alarmsSection(venueId: string, tz: string) {
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
        clearStatus(
          s.status,
          total > alarms.length ? `The newest ${alarms.length} of ${total} alarms (all of them: the Alarms page).` : '',
        );
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
