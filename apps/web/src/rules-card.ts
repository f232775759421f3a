// The venue settings' occupancy alarm thresholds: save, or back to the platform defaults.

import { api, type AlarmRules } from './api.js';
import { clearStatus, fill, h, section, showError } from './dom.js';
import { form, numOrNull } from './forms.js';

export function rulesCard(venueId: string): HTMLElement {
  const s = section('Occupancy alarm thresholds', 'rules-card');
  const render = (r: AlarmRules) => {
    const o = r.zone_occupancy;
    const f = form({
      id: 'rules-form',
      fields: [
        { name: 'zone_occupancy.warning_percent', label: 'Warning from (% of capacity)', kind: 'number', value: o.warning_percent },
        { name: 'zone_occupancy.major_percent', label: 'Major from (%)', kind: 'number', value: o.major_percent },
        { name: 'zone_occupancy.critical_percent', label: 'Critical from (%)', kind: 'number', value: o.critical_percent },
        {
          name: 'zone_occupancy.hysteresis_points',
          label: 'Hysteresis (percentage points)',
          kind: 'number',
          value: o.hysteresis_points,
          hint: 'How far below a threshold a zone must fall to leave that level.',
        },
        {
          name: 'zone_occupancy.min_duration_seconds',
          label: 'Minimum duration (seconds)',
          kind: 'number',
          step: '1',
          value: o.min_duration_seconds,
          hint: 'How long a breach must last before an alarm (0: at once).',
        },
      ],
      submit: 'Save thresholds',
      extra: [
        h(
          'button',
          {
            type: 'button',
            class: 'secondary',
            onclick: () =>
              api.resetAlarmRules(venueId).then(
                (d) => (render(d), clearStatus(s.status, 'Back to the defaults.')),
                (err) => showError(s.status, 'Could not reset the thresholds', err),
              ),
          },
          'Back to defaults',
        ),
      ],
      onSubmit: async (x) => {
        const zone_occupancy: Record<string, unknown> = {};
        for (const k of Object.keys(o)) zone_occupancy[k] = numOrNull(x[`zone_occupancy.${k}`]);
        const saved = await api.setAlarmRules(venueId, { zone_occupancy });
        clearStatus(s.status, saved.is_default ? 'The platform defaults are in force.' : 'This venue’s own thresholds are in force.');
        return 'Saved: applies from the next occupancy update.';
      },
    });
    fill(s.body, f.root);
    clearStatus(s.status, r.is_default ? 'The platform defaults are in force.' : 'This venue’s own thresholds are in force.');
  };
  clearStatus(s.status, 'Loading…');
  api.alarmRules(venueId).then(render, (err) => showError(s.status, 'Could not load the thresholds', err));
  return s.root;
}
