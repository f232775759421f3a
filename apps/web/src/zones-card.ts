// The venue settings' zones card: the venue's zones, a form to add one, and editing one in place.

import { api, type Zone } from './api.js';
import { clearStatus, fill, h, section, showError } from './dom.js';
import { form, numOrNull, type Field } from './forms.js';

const ZONE_TYPES: Array<[string, string]> = [
  ['area', 'Area (people inside)'],
  ['entrance', 'Entrance'],
  ['exit', 'Exit'],
  ['counter', 'Counter'],
];

/** `changed` runs after every load (the page's "next step" line counts the rows). */
export function zonesCard(venueId: string, changed: () => void): HTMLElement {
  const s = section('Zones', 'zones-card');
  const table = h('div', {});
  const editor = h('div', { class: 'editor' });
  const zoneFields = (z?: Zone): Field[] => [
    { name: 'name', label: 'Name', required: true, value: z?.name },
    {
      name: 'slug',
      label: 'Slug',
      required: true,
      value: z?.slug,
      hint: 'Lower-case letters and digits, words joined by "-": connectors send it as the zone.',
    },
    { name: 'type', label: 'Type', kind: 'select', options: ZONE_TYPES, value: z?.type ?? 'area' },
    {
      name: 'capacity',
      label: 'Capacity (people)',
      kind: 'number',
      value: z?.capacity,
      hint: 'Load and occupancy alarms need it; empty: not set.',
    },
  ];
  const body = (x: Record<string, string>) => ({ name: x.name, slug: x.slug, type: x.type, capacity: numOrNull(x.capacity) });
  const showCreate = () => {
    const f = form({
      id: 'zone-form',
      fields: zoneFields(),
      submit: 'Add zone',
      onSubmit: async (x) => {
        const z = await api.createZone(venueId, body(x));
        await load();
        showCreate();
        return `Added ${z.name}.`;
      },
    });
    fill(editor, h('h3', {}, 'Add a zone'), f.root);
  };
  const showEdit = (z: Zone) => {
    const f = form({
      id: 'zone-edit',
      fields: zoneFields(z),
      submit: 'Save zone',
      extra: [h('button', { type: 'button', class: 'secondary', onclick: showCreate }, 'Cancel')],
      onSubmit: async (x) => {
        await api.updateZone(venueId, z.id, body(x));
        await load();
        showCreate();
        return `Saved ${x.name}.`;
      },
    });
    fill(editor, h('h3', {}, `Edit zone ${z.name}`), f.root);
    f.root.querySelector('input')?.focus();
  };
  const load = () =>
    api.zones(venueId).then(
      ({ data }) => {
        clearStatus(s.status, data.length ? '' : 'No zones yet.');
        fill(
          table,
          data.length
            ? h(
                'div',
                { class: 'table-wrap' },
                h(
                  'table',
                  { class: 'zones' },
                  h(
                    'thead',
                    {},
                    h(
                      'tr',
                      {},
                      h('th', { scope: 'col' }, 'Zone'),
                      h('th', { scope: 'col' }, 'Type'),
                      h('th', { scope: 'col', class: 'num' }, 'Capacity'),
                      h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Actions')),
                    ),
                  ),
                  h(
                    'tbody',
                    {},
                    ...data.map((z) =>
                      h(
                        'tr',
                        { 'data-zone': z.id },
                        h('th', { scope: 'row' }, z.name, h('span', { class: 'muted sub' }, z.slug)),
                        h('td', {}, z.type),
                        h('td', { class: 'num' }, z.capacity ?? '—'),
                        h('td', {}, h('button', { type: 'button', class: 'secondary', onclick: () => showEdit(z) }, `Edit ${z.name}`)),
                      ),
                    ),
                  ),
                ),
              )
            : null,
        );
        changed();
      },
      (err) => showError(s.status, 'Could not load the zones', err),
    );
  clearStatus(s.status, 'Loading…');
  void load();
  showCreate();
  fill(s.body, table, editor);
  return s.root;
}
