// Setup from the page (#/setup, #/venues/<id>/setup): venues, zones, integrations (secrets
// write-only), alarm thresholds, and rotating the key. Every 400 is shown beside the field it names.
// The zones and thresholds cards are in zones-card.ts and rules-card.ts.

import { api, ApiError, type Integration, type Venue, type VenueDetail } from './api.js';
import { clearStatus, fill, h, section, showError } from './dom.js';
import { form, REDACTED, type Field } from './forms.js';
import { rulesCard } from './rules-card.js';
import { timezoneList, venueBody, venueFields } from './venue-form.js';
import type { View } from './views.js';
import { zonesCard } from './zones-card.js';

// -------------------------------------------------------------------------------------- #/setup

export function setupView(onKeyRotated: (key: string) => void): View {
  const create = section('New venue', 'new-venue');
  const list = section('Your venues', 'setup-venues');
  const key = section('API key', 'api-key-card');
  const f = form({
    id: 'venue-form',
    fields: venueFields(),
    submit: 'Create venue',
    extra: [timezoneList()],
    onSubmit: async (x) => {
      const v = await api.createVenue(venueBody(x, false));
      location.hash = `#/venues/${v.id}/setup`;
      return 'Created.';
    },
  });
  f.root.querySelector('input[name=timezone]')?.setAttribute('list', 'timezones');
  fill(create.body, f.root);

  clearStatus(list.status, 'Loading…');
  api.venues().then(
    ({ data }) => {
      clearStatus(list.status, data.length ? '' : 'No venues yet: create the first one with the form.');
      fill(
        list.body,
        h(
          'ul',
          { class: 'venue-list' },
          ...data.map((v: Venue) =>
            h(
              'li',
              {},
              h('strong', {}, v.name),
              h('span', { class: 'muted' }, ` ${v.timezone} · ${v.zone_count} zone${v.zone_count === 1 ? '' : 's'} `),
              h('a', { href: `#/venues/${v.id}/setup` }, `Settings of ${v.name}`),
            ),
          ),
        ),
      );
    },
    (err) => showError(list.status, 'Could not load the venues', err),
  );

  const shown = h('div', { class: 'new-key', hidden: true });
  const rotate = h('button', { type: 'button', class: 'secondary' }, 'Rotate the key');
  rotate.addEventListener('click', () => {
    if (!confirm('Replace this API key? The current key stops working at once, for every client that uses it.')) return;
    rotate.disabled = true;
    clearStatus(key.status, 'Rotating…');
    api.rotateKey().then(
      (r) => {
        onKeyRotated(r.api_key);
        clearStatus(key.status, 'Rotated: this page now uses the new key. Copy it now; it is not shown again.');
        shown.hidden = false;
        fill(
          shown,
          h('label', { for: 'new-key-value' }, 'New API key'),
          h('input', {
            id: 'new-key-value',
            readonly: true,
            value: r.api_key,
            onfocus: (ev: Event) => (ev.target as HTMLInputElement).select(),
          }),
        );
        rotate.disabled = false;
      },
      (err) => {
        rotate.disabled = false;
        showError(key.status, 'Could not rotate the key', err);
      },
    );
  });
  fill(
    key.body,
    h('p', {}, 'Rotating gives a new key and refuses the current one at once: scripts and connectors that use it must get the new one.'),
    rotate,
    shown,
  );
  return {
    root: h(
      'div',
      {},
      h('p', { class: 'crumbs' }, h('a', { href: '#/' }, '← All venues')),
      h('h2', { class: 'venue-title' }, 'Setup'),
      h('div', { class: 'grid' }, create.root, list.root, key.root),
    ),
  };
}

// --------------------------------------------------------------------------- #/venues/<id>/setup

export function venueSetupView(venueId: string): View {
  const title = h('h2', { class: 'venue-title' }, 'Venue settings');
  const status = h('p', { class: 'status', role: 'status', 'aria-live': 'polite' }, 'Loading the venue…');
  const grid = h('div', { class: 'grid' });
  const root = h(
    'div',
    {},
    h('p', { class: 'crumbs' }, h('a', { href: '#/setup' }, '← Setup'), ' · ', h('a', { href: `#/venues/${venueId}` }, 'Venue dashboard')),
    title,
    status,
    grid,
  );
  api.venue(venueId).then(
    (v) => {
      title.textContent = `${v.name}: settings`;
      document.title = `${v.name} settings · Venue dashboard`;
      clearStatus(status);
      status.hidden = true;
      const next = h('p', { class: 'next-step', 'data-testid': 'next-step' });
      const steps = () => {
        const z = grid.querySelectorAll('#zones-card tbody tr').length;
        const i = grid.querySelectorAll('#integrations-card tbody tr').length;
        next.textContent = !z
          ? 'Next: add a zone (below), with its capacity.'
          : !i
            ? 'Next: connect an integration, so events arrive.'
            : '';
        next.hidden = !next.textContent;
      };
      fill(grid, next, venueCard(v), zonesCard(v.id, steps), integrationsCard(v.id, steps), rulesCard(v.id));
    },
    (err) => {
      title.textContent =
        err instanceof ApiError && (err.code === 'NOT_FOUND' || err.code === 'FORBIDDEN') ? 'Venue not available' : 'Venue settings';
      showError(status, 'Could not load the venue', err);
    },
  );
  return { root };
}

function venueCard(v: VenueDetail): HTMLElement {
  const s = section('Venue details', 'venue-details');
  const f = form({
    id: 'venue-edit',
    fields: venueFields(v),
    submit: 'Save venue',
    extra: [timezoneList()],
    onSubmit: async (x) => {
      const saved = await api.updateVenue(v.id, venueBody(x, true));
      return `Saved ${saved.name}.`;
    },
  });
  f.root.querySelector('input[name=timezone]')?.setAttribute('list', 'timezones');
  fill(s.body, f.root);
  return s.root;
}

// Config fields per connector type (docs/resources.md, "Config per connector type").
type ConfigField = {
  name: string;
  label: string;
  secret?: boolean;
  required?: boolean;
  list?: boolean;
  options?: string[];
  mode?: 'central' | 'ale';
  hint?: string;
};
export const CONNECTOR_FIELDS: Record<string, ConfigField[]> = {
  meraki: [
    { name: 'org_id', label: 'Organization id', required: true },
    { name: 'api_key', label: 'API key', secret: true, required: true },
    { name: 'webhook_secret', label: 'Scanning API secret', secret: true },
    { name: 'validator', label: 'Validator', hint: "As shown in Meraki's Location and Scanning page." },
  ],
  aruba: [
    { name: 'mode', label: 'Mode', required: true, options: ['central', 'ale'] },
    { name: 'base_url', label: 'Base URL (https://)', required: true },
    { name: 'customer_id', label: 'Customer id', required: true, mode: 'central' },
    { name: 'client_id', label: 'Client id', required: true, mode: 'central' },
    { name: 'client_secret', label: 'Client secret', secret: true, required: true, mode: 'central' },
    {
      name: 'streaming_key',
      label: 'Streaming key',
      secret: true,
      required: true,
      mode: 'central',
      hint: 'Expires every 7 days: replace it here.',
    },
    { name: 'username', label: 'Username', required: true, mode: 'ale' },
    { name: 'password', label: 'Password', secret: true, required: true, mode: 'ale' },
    { name: 'certificate_sha256', label: 'Certificate SHA-256', mode: 'ale' },
  ],
  unifi: [
    { name: 'controller_url', label: 'Controller URL (https://)', required: true },
    { name: 'username', label: 'Username', required: true },
    { name: 'password', label: 'Password', secret: true, required: true },
    { name: 'site', label: 'Site', hint: 'default: "default"' },
    { name: 'certificate_sha256', label: 'Certificate SHA-256' },
  ],
  mywifi: [
    { name: 'dashboard_subdomain', label: 'Dashboard subdomain', required: true },
    { name: 'app_secret', label: 'App secret', secret: true, required: true },
  ],
  square: [
    { name: 'location_id', label: 'Location id', required: true },
    { name: 'access_token', label: 'Access token', secret: true, required: true },
    { name: 'webhook_signature_key', label: 'Webhook signature key', secret: true, required: true },
    { name: 'notification_url', label: 'Notification URL (https://)', required: true },
    { name: 'environment', label: 'Environment', options: ['production', 'sandbox'] },
  ],
  density: [
    { name: 'api_token', label: 'API token', secret: true, required: true },
    { name: 'space_ids', label: 'Space ids', list: true, hint: 'Comma-separated, e.g. spc_123, spc_456.' },
    { name: 'webhook_header_name', label: 'Webhook header name' },
    { name: 'webhook_header_value', label: 'Webhook header value', secret: true },
  ],
  verkada: [
    { name: 'org_id', label: 'Organization id', required: true },
    { name: 'api_key', label: 'API key', secret: true, required: true },
    { name: 'webhook_secret', label: 'Webhook secret', secret: true },
    { name: 'region', label: 'Region', options: ['us', 'eu', 'au'] },
    { name: 'camera_ids', label: 'Camera ids', list: true, hint: 'Comma-separated; none: no polling.' },
  ],
};

function integrationsCard(venueId: string, changed: () => void): HTMLElement {
  const s = section('Integrations', 'integrations-card');
  const table = h('div', {});
  const editor = h('div', { class: 'editor' });
  let aruba: 'central' | 'ale' = 'central';
  /** The form for a connector type; `existing` makes it an edit (secrets shown "•••• set"). */
  const show = (type: string, existing?: Integration) => {
    const cfg = existing?.config ?? {};
    if (type === 'aruba') aruba = (cfg.mode as 'central' | 'ale') ?? aruba;
    const defs = (CONNECTOR_FIELDS[type] ?? []).filter((d) => !d.mode || d.mode === aruba);
    const fields: Field[] = [
      existing
        ? { name: 'connector_type', label: 'Connector', kind: 'select', options: [[type, type]], value: type }
        : {
            name: 'connector_type',
            label: 'Connector',
            kind: 'select',
            options: Object.keys(CONNECTOR_FIELDS).map((t): [string, string] => [t, t]),
            value: type,
            onChange: (t) => show(t),
          },
      ...defs.map((d): Field => {
        const name = `config.${d.name}`;
        const stored = cfg[d.name];
        if (d.secret) return { name, label: d.label, kind: 'secret', required: d.required, isSet: stored === REDACTED, hint: d.hint };
        if (d.options)
          return {
            name,
            label: d.label,
            kind: 'select',
            options: d.options.map((o): [string, string] => [o, o]),
            value: (stored as string) ?? (d.name === 'mode' ? aruba : d.options[0]),
            onChange:
              d.name === 'mode'
                ? (m) => {
                    aruba = m as 'central' | 'ale';
                    show(type, existing);
                  }
                : undefined,
          };
        return {
          name,
          label: d.label,
          required: d.required,
          value: Array.isArray(stored) ? stored.join(', ') : (stored as string | undefined),
          hint: d.hint,
        };
      }),
    ];
    const configOf = (x: Record<string, string>) => {
      const config: Record<string, unknown> = {};
      for (const d of defs) {
        const v = x[`config.${d.name}`];
        if (v === undefined || v === '') continue;
        config[d.name] = d.list ? v.split(/[\s,]+/).filter(Boolean) : v;
      }
      return config;
    };
    const f = form({
      id: existing ? 'integration-edit' : 'integration-form',
      fields,
      submit: existing ? 'Save integration' : 'Connect',
      extra: existing ? [h('button', { type: 'button', class: 'secondary', onclick: () => show('meraki') }, 'Cancel')] : [],
      onSubmit: async (x) => {
        if (existing) await api.updateIntegration(venueId, existing.id, { config: configOf(x) });
        else await api.createIntegration(venueId, { connector_type: type, config: configOf(x) });
        await load();
        show(type);
        return existing
          ? 'Saved; secrets left empty were kept.'
          : `Connected ${type}. It shows "Waiting for first data" until its first event.`;
      },
    });
    fill(
      editor,
      h('h3', {}, existing ? `Edit ${type} integration` : 'Connect an integration'),
      h(
        'p',
        { class: 'hint' },
        'Secrets are stored encrypted and never shown again: a stored one reads "•••• set"; type a new value to replace it.',
      ),
      f.root,
    );
  };
  const secretText = (i: Integration) => {
    const set = Object.entries(i.config)
      .filter(([, v]) => v === REDACTED)
      .map(([k]) => k);
    return set.length ? `${set.join(', ')}: •••• set` : '';
  };
  const load = () =>
    api.integrations(venueId).then(
      ({ data }) => {
        clearStatus(s.status, data.length ? '' : 'No integrations yet.');
        fill(
          table,
          data.length
            ? h(
                'div',
                { class: 'table-wrap' },
                h(
                  'table',
                  { class: 'integrations' },
                  h(
                    'thead',
                    {},
                    h(
                      'tr',
                      {},
                      h('th', { scope: 'col' }, 'Connector'),
                      h('th', { scope: 'col' }, 'Secrets'),
                      h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Actions')),
                    ),
                  ),
                  h(
                    'tbody',
                    {},
                    ...data.map((i) =>
                      h(
                        'tr',
                        { 'data-integration': i.id },
                        h('th', { scope: 'row' }, i.connector_type, !i.is_active && h('span', { class: 'muted' }, ' (paused)')),
                        h('td', { class: 'secrets' }, secretText(i)),
                        h(
                          'td',
                          {},
                          h(
                            'button',
                            { type: 'button', class: 'secondary', onclick: () => show(i.connector_type, i) },
                            `Edit ${i.connector_type}`,
                          ),
                        ),
                      ),
                    ),
                  ),
                ),
              )
            : null,
        );
        changed();
      },
      (err) => showError(s.status, 'Could not load the integrations', err),
    );
  clearStatus(s.status, 'Loading…');
  void load();
  show('meraki');
  fill(s.body, table, editor);
  return s.root;
}
