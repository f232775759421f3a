// The alarm list (#/alarms): every venue's alarms, filtered, sorted, acknowledged in bulk.

import { acknowledgeAll, alarmTable, byNewest, bySeverity } from './alarms.js';
import { api, type Alarm, type Venue } from './api.js';
import { clearStatus, fill, h, picker, section, showError } from './dom.js';
import { SEVERITIES, SEVERITY_LABEL, zoneFor } from './format.js';
import type { View, ViewContext } from './views.js';

// ------------------------------------------------------------------------------------ alarm list

export function alarmListView(ctx: ViewContext, initialVenue: string | null): View {
  const s = section('Alarms, all venues', 'alarm-list');
  s.root.classList.add('wide');
  const f = { active: true, severity: '', venue: initialVenue ?? '', sort: 'newest' };
  const byId = new Map<string, Alarm>();
  const selected = new Set<string>();
  let venues: Venue[] = [];
  let loaded = false;
  let seq = 0;
  const summary = h('p', { class: 'status summary', role: 'status', 'aria-live': 'polite', 'data-testid': 'bulk-summary' });
  const ackButton = h('button', { type: 'button', disabled: true, onclick: () => void bulkAck() }, 'Acknowledge selected');
  const venueSelect = h('span', {});
  const tzOf = (a: Alarm) => zoneFor(venues.find((v) => v.id === a.venueId)?.timezone);
  const venueOf = (a: Alarm) => venues.find((v) => v.id === a.venueId)?.name ?? null;

  const shown = () =>
    [...byId.values()]
      .filter(
        (a) =>
          (!f.active || a.status.startsWith('ACTIVE')) && (!f.severity || a.severity === f.severity) && (!f.venue || a.venueId === f.venue),
      )
      .sort(f.sort === 'severity' ? bySeverity : byNewest);
  const updateButton = () => {
    const n = [...selected].filter((id) => byId.get(id)?.status.endsWith('_UNACK')).length;
    ackButton.disabled = n === 0;
    ackButton.textContent = n ? `Acknowledge selected (${n})` : 'Acknowledge selected';
  };
  const render = () => {
    if (!loaded) return;
    const list = shown();
    for (const id of [...selected]) if (!list.some((a) => a.id === id && a.status.endsWith('_UNACK'))) selected.delete(id);
    updateButton();
    if (!list.length)
      return fill(
        s.body,
        h('p', { class: 'muted' }, f.active ? 'No active alarms match these filters.' : 'No alarms match these filters.'),
      );
    fill(s.body, alarmTable(list, { tzOf, venueOf, selected, onSelect: updateButton, onAct: act }));
  };
  const act = (a: Alarm, action: 'ack' | 'clear') =>
    api.alarmAction(a.id, action).then(
      (r) => {
        const cur = byId.get(a.id);
        if (cur) byId.set(a.id, { ...cur, status: r.status, updatedAt: new Date().toISOString() });
        clearStatus(summary, action === 'ack' ? 'Alarm acknowledged.' : 'Alarm cleared.');
        render();
      },
      (err) => showError(summary, action === 'ack' ? 'Could not acknowledge the alarm' : 'Could not clear the alarm', err),
    );
  const bulkAck = async () => {
    const ids = [...selected];
    ackButton.disabled = true;
    clearStatus(summary, `Acknowledging ${ids.length}…`);
    const r = await acknowledgeAll(ids);
    for (const [id, status] of r.statuses) {
      const cur = byId.get(id);
      if (cur && status) byId.set(id, { ...cur, status });
      selected.delete(id);
    }
    if (r.failed) showError(summary, 'Bulk acknowledge', new Error(r.summary));
    else clearStatus(summary, `${r.summary}.`);
    render();
    // An alarm that was already acknowledged by someone else: its true state.
    if ([...r.statuses.values()].some((x) => x === null)) void load();
  };
  const load = () => {
    const my = ++seq;
    clearStatus(s.status, 'Loading…');
    const base = { severity: f.severity || undefined, venue_id: f.venue || undefined, limit: 200 };
    const asks = f.active
      ? [api.alarms({ ...base, status: 'ACTIVE_UNACK' }), api.alarms({ ...base, status: 'ACTIVE_ACK' })]
      : [api.alarms(base)];
    return Promise.all(asks).then(
      (pages) => {
        if (my !== seq) return;
        loaded = true;
        byId.clear();
        for (const p of pages) for (const a of p.alarms) byId.set(a.id, a);
        const total = pages.reduce((n, p) => n + p.total, 0);
        const got = pages.reduce((n, p) => n + p.alarms.length, 0);
        clearStatus(s.status, total > got ? `The newest ${got} of ${total} matching alarms.` : `${total} alarm${total === 1 ? '' : 's'}.`);
        render();
      },
      (err) => {
        if (my === seq) showError(s.status, 'Could not load the alarms', err);
      },
    );
  };
  const venuePicker = () =>
    picker('Venue', 'venue', [['', 'All venues'], ...venues.map((v): [string, string] => [v.id, v.name])], f.venue, (v) => {
      f.venue = v;
      void load();
    });
  fill(venueSelect, venuePicker());
  fill(
    s.controls,
    h(
      'label',
      { class: 'check' },
      h('input', {
        type: 'checkbox',
        name: 'active',
        checked: f.active,
        onchange: (ev: Event) => {
          f.active = (ev.target as HTMLInputElement).checked;
          void load();
        },
      }),
      ' Active only',
    ),
    picker(
      'Severity',
      'severity',
      [['', 'All severities'], ...SEVERITIES.map((x): [string, string] => [x, SEVERITY_LABEL[x]])],
      f.severity,
      (v) => {
        f.severity = v;
        void load();
      },
    ),
    venueSelect,
    picker(
      'Sort',
      'sort',
      [
        ['newest', 'Newest first'],
        ['severity', 'Most severe first'],
      ],
      f.sort,
      (v) => {
        f.sort = v;
        render();
      },
    ),
    ackButton,
  );
  s.status.after(summary);
  api.venues().then(
    ({ data }) => {
      venues = data;
      fill(venueSelect, venuePicker());
      ctx.watch(data.map((v) => v.id));
      render();
    },
    (err) => showError(summary, 'Could not load the venue names', err),
  );
  void load();
  return {
    root: h('div', { class: 'grid' }, s.root),
    onAlarm(alarm) {
      const cur = byId.get(alarm.id);
      if (cur && cur.updatedAt > alarm.updatedAt) return;
      byId.set(alarm.id, alarm);
      render();
    },
    refresh: () => void load(),
  };
}
