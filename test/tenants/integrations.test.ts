import { randomBytes, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { request, type RequestOptions } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { keyringFromConfig, open, seal, SecretBoxError, type Envelope, type Keyring } from '../../lib/secret-box.js';
import { CONNECTORS, REDACTED_MARKER } from '../../domain/integrations/config-schemas.js';
import { createLogger } from '../../lib/logger.js';
import { resealIntegrationSecrets, secretContext } from '../../domain/integrations/integrations.js';

let api: RunningApi;
let op: TestOperator;
let keyring: Keyring;
beforeAll(async () => {
  api = await startApi();
  op = await newOperator(api, 'pro');
  keyring = keyringFromConfig(api.services.cfg);
});
afterAll(async () => {
  await api.close();
});

const call = (path: string, opts: RequestOptions = {}) => request(`${api.url}${path}`, opts);
const fields = (body: { details?: Array<{ field: string }> }) => (body.details ?? []).map((d) => d.field);
const isoString = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
const secret = (label: string) => `${label}-${randomUUID()}`;

async function addIntegration(venueId: string, json: Record<string, unknown>, key = op.key) {
  const res = await call(`/api/venues/${venueId}/integrations`, { key, json });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

async function storedRow(
  id: string,
): Promise<{ config: Record<string, unknown>; secrets: Record<string, Envelope>; deleted_at: Date | null }> {
  const { rows } = await api.services.db.query('SELECT config, secrets, deleted_at FROM integrations WHERE id = $1', [id]);
  return rows[0];
}

async function storedSecret(id: string, field: string, keys = keyring.keys): Promise<string> {
  const { secrets } = await storedRow(id);
  return open(secrets[field]!, keys, secretContext(id, field));
}

/** One valid config per connector type, with the secrets it carries and the defaults it gains. */
function fixtures() {
  const s = {
    meraki: { api_key: secret('meraki-key'), webhook_secret: secret('meraki-hook') },
    arubaCentral: { client_secret: secret('aruba-cs'), streaming_key: secret('aruba-sk') },
    arubaAle: { password: secret('aruba-pw') },
    unifi: { password: secret('unifi-pw') },
    mywifi: { app_secret: secret('mywifi') },
    square: { access_token: secret('sq-token'), webhook_signature_key: secret('sq-sig') },
    density: { api_token: secret('density'), webhook_header_value: secret('density-hdr') },
    verkada: { api_key: secret('verkada-key'), webhook_secret: secret('verkada-hook') },
  };
  return [
    { type: 'meraki', secrets: s.meraki, plain: { org_id: '549236' }, defaults: {} },
    {
      type: 'aruba',
      secrets: s.arubaCentral,
      plain: { mode: 'central', base_url: 'https://apigw-prod2.central.arubanetworks.com', customer_id: 'cust-1', client_id: 'client-1' },
      defaults: {},
    },
    {
      type: 'aruba',
      secrets: s.arubaAle,
      plain: { mode: 'ale', base_url: 'https://ale.example.com', username: 'svc' },
      defaults: { polling: true },
    },
    {
      type: 'unifi',
      secrets: s.unifi,
      plain: { controller_url: 'https://unifi.example.com:8443', username: 'svc' },
      defaults: { site: 'default', polling: true },
    },
    { type: 'mywifi', secrets: s.mywifi, plain: { dashboard_subdomain: 'acme-cafe' }, defaults: {} },
    {
      type: 'square',
      secrets: s.square,
      plain: { location_id: 'L8RZ2', notification_url: 'https://hooks.example.com/square' },
      defaults: { environment: 'production' },
    },
    {
      type: 'density',
      secrets: s.density,
      plain: { space_ids: ['spc_123', 'spc_456'], webhook_header_name: 'X-Density-Token' },
      defaults: {},
    },
    { type: 'verkada', secrets: s.verkada, plain: { org_id: 'org-9' }, defaults: { region: 'us' } },
  ] as const;
}

describe('POST /api/venues/:id/integrations', () => {
  let venueId: string;
  beforeAll(async () => {
    venueId = (await newVenue(api, op.key)).id;
  });

  it('creates an integration of every connector type; secrets are sealed, redacted in responses and absent from the row in plaintext', async () => {
    const venue = await newVenue(api, op.key);
    const all = fixtures();
    const created: Array<{ id: string; created_at: string }> = [];
    for (const f of all) {
      const res = await call(`/api/venues/${venue.id}/integrations`, {
        key: op.key,
        json: { connector_type: f.type, config: { ...f.plain, ...f.secrets } },
      });
      expect(res.status, `${f.type}: ${JSON.stringify(res.body)}`).toBe(201);
      expect(res.body).toEqual({
        id: expect.any(String),
        venue_id: venue.id,
        connector_type: f.type,
        is_active: true,
        created_at: isoString,
      });
      created.push(res.body);
    }

    const list = await call(`/api/venues/${venue.id}/integrations`, { key: op.key });
    expect(list.status).toBe(200);
    expect(list.body.total).toBe(all.length);
    list.body.data.forEach((item: Record<string, unknown>, i: number) => {
      const f = all[i]!;
      const redacted = Object.fromEntries(Object.keys(f.secrets).map((k) => [k, REDACTED_MARKER]));
      expect(item).toEqual({
        id: created[i]!.id,
        venue_id: venue.id,
        connector_type: f.type,
        is_active: true,
        config: { ...f.plain, ...f.defaults, ...redacted },
        created_at: created[i]!.created_at,
      });
    });

    const plaintexts = all.flatMap((f) => Object.values(f.secrets) as string[]);
    const { rows } = await api.services.db.query('SELECT config::text AS config, secrets::text AS secrets FROM integrations');
    const everything = rows.map((r) => r.config + r.secrets).join('\n');
    for (const p of plaintexts) expect(everything).not.toContain(p);
    expect(JSON.stringify(list.body)).not.toMatch(/meraki-key-|aruba-cs-|unifi-pw-|sq-token-|density-|verkada-key-|mywifi-/);

    for (const [i, f] of all.entries()) {
      const row = await storedRow(created[i]!.id);
      expect(Object.keys(row.secrets).sort()).toEqual(Object.keys(f.secrets).sort());
      expect(row.config).toEqual({ ...f.plain, ...f.defaults });
      for (const [field, value] of Object.entries(f.secrets)) {
        const env = row.secrets[field]!;
        expect(env).toEqual({ v: 1, kid: keyring.current.keyId, iv: expect.any(String), tag: expect.any(String), ct: expect.any(String) });
        expect(Buffer.from(env.iv, 'base64')).toHaveLength(12);
        expect(await storedSecret(created[i]!.id, field)).toBe(value);
      }
    }
  });

  it('omits optional secrets that were not sent', async () => {
    const venue = await newVenue(api, op.key);
    const created = await addIntegration(venue.id, { connector_type: 'meraki', config: { api_key: secret('k'), org_id: 'o' } });
    const res = await call(`/api/venues/${venue.id}/integrations/${created.id}`, { key: op.key });
    expect(res.body.config).toEqual({ org_id: 'o', api_key: REDACTED_MARKER });
  });

  it.each([
    ['connector_type missing', { config: { api_key: 'k', org_id: 'o' } }, 'connector_type'],
    ['connector_type unknown', { connector_type: 'cisco', config: {} }, 'connector_type'],
    ['config missing', { connector_type: 'meraki' }, 'config'],
    ['config not an object', { connector_type: 'meraki', config: 'api_key=k' }, 'config'],
    ['meraki without api_key', { connector_type: 'meraki', config: { org_id: 'o' } }, 'config.api_key'],
    ['meraki without org_id', { connector_type: 'meraki', config: { api_key: 'k' } }, 'config.org_id'],
    ['meraki with an empty api_key', { connector_type: 'meraki', config: { api_key: '', org_id: 'o' } }, 'config.api_key'],
    ['meraki with an unknown key', { connector_type: 'meraki', config: { api_key: 'k', org_id: 'o', network: 'n' } }, 'config'],
    [
      'meraki with the marker as api_key',
      { connector_type: 'meraki', config: { api_key: REDACTED_MARKER, org_id: 'o' } },
      'config.api_key',
    ],
    [
      'unifi with an http URL',
      { connector_type: 'unifi', config: { controller_url: 'http://u.example.com', username: 'u', password: 'p' } },
      'config.controller_url',
    ],
    [
      'unifi with a non-URL',
      { connector_type: 'unifi', config: { controller_url: 'unifi.local', username: 'u', password: 'p' } },
      'config.controller_url',
    ],
    [
      'unifi without password',
      { connector_type: 'unifi', config: { controller_url: 'https://u.example.com', username: 'u' } },
      'config.password',
    ],
    [
      'unifi without username',
      { connector_type: 'unifi', config: { controller_url: 'https://u.example.com', password: 'p' } },
      'config.username',
    ],
    [
      'unifi with a bad site',
      { connector_type: 'unifi', config: { controller_url: 'https://u.example.com', username: 'u', password: 'p', site: 'a/b' } },
      'config.site',
    ],
    [
      'aruba without mode',
      { connector_type: 'aruba', config: { base_url: 'https://a.example.com', username: 'u', password: 'p' } },
      'config.mode',
    ],
    [
      'aruba central without streaming_key',
      {
        connector_type: 'aruba',
        config: { mode: 'central', base_url: 'https://a.example.com', customer_id: 'c', client_id: 'i', client_secret: 's' },
      },
      'config.streaming_key',
    ],
    [
      'mywifi with a bad subdomain',
      { connector_type: 'mywifi', config: { dashboard_subdomain: 'Acme_Cafe', app_secret: 's' } },
      'config.dashboard_subdomain',
    ],
    [
      'square with an http notification_url',
      {
        connector_type: 'square',
        config: { location_id: 'L', access_token: 't', webhook_signature_key: 'k', notification_url: 'http://h.example.com' },
      },
      'config.notification_url',
    ],
    [
      'density with a header name but no value',
      { connector_type: 'density', config: { api_token: 't', webhook_header_name: 'X-T' } },
      'config.webhook_header_value',
    ],
    ['density with a bad space id', { connector_type: 'density', config: { api_token: 't', space_ids: ['room-1'] } }, 'config.space_ids.0'],
    ['verkada with an unknown region', { connector_type: 'verkada', config: { org_id: 'o', api_key: 'k', region: 'cn' } }, 'config.region'],
    ['an unknown top-level field', { connector_type: 'meraki', config: { api_key: 'k', org_id: 'o' }, is_active: false }, '(root)'],
  ])('rejects %s with 400 naming the field', async (_case, json, field) => {
    const res = await call(`/api/venues/${venueId}/integrations`, { key: op.key, json });
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.code).toBe('VALIDATION_ERROR');
    expect(fields(res.body)).toContain(field);
  });
});

describe('PUT /api/venues/:id/integrations/:integrationId', () => {
  let venueId: string;
  let id: string;
  let path: string;
  const apiKey = secret('api-key');
  const hook = secret('hook');
  beforeAll(async () => {
    venueId = (await newVenue(api, op.key)).id;
    id = (await addIntegration(venueId, { connector_type: 'meraki', config: { api_key: apiKey, org_id: 'org-1', webhook_secret: hook } }))
      .id;
    path = `/api/venues/${venueId}/integrations/${id}`;
  });

  it('keeps a secret sent as the marker (the stored envelope is untouched) and changes the plain fields', async () => {
    const before = await storedRow(id);
    const res = await call(path, {
      key: op.key,
      method: 'PUT',
      json: { config: { api_key: REDACTED_MARKER, org_id: 'org-2', webhook_secret: REDACTED_MARKER } },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({
      id,
      venue_id: venueId,
      connector_type: 'meraki',
      is_active: true,
      config: { org_id: 'org-2', api_key: REDACTED_MARKER, webhook_secret: REDACTED_MARKER },
      created_at: isoString,
      updated_at: isoString,
    });
    const after = await storedRow(id);
    expect(after.secrets).toEqual(before.secrets);
    expect(await storedSecret(id, 'api_key')).toBe(apiKey);
    expect(await storedSecret(id, 'webhook_secret')).toBe(hook);
  });

  it('replaces a secret sent with a new value, keeping the others', async () => {
    const newKey = secret('rotated-key');
    const res = await call(path, {
      key: op.key,
      method: 'PUT',
      json: { config: { api_key: newKey, org_id: 'org-2', webhook_secret: REDACTED_MARKER } },
    });
    expect(res.status).toBe(200);
    expect(res.body.config.api_key).toBe(REDACTED_MARKER);
    expect(await storedSecret(id, 'api_key')).toBe(newKey);
    expect(await storedSecret(id, 'webhook_secret')).toBe(hook);
    const { rows } = await api.services.db.query('SELECT config::text || secrets::text AS t FROM integrations WHERE id = $1', [id]);
    expect(rows[0].t).not.toContain(newKey);
  });

  it('treats config as the whole config: an optional secret left out is removed; the marker for a missing secret is a 400', async () => {
    const res = await call(path, { key: op.key, method: 'PUT', json: { config: { api_key: REDACTED_MARKER, org_id: 'org-3' } } });
    expect(res.status).toBe(200);
    expect(res.body.config).toEqual({ org_id: 'org-3', api_key: REDACTED_MARKER });
    expect(Object.keys((await storedRow(id)).secrets)).toEqual(['api_key']);
    const marker = await call(path, {
      key: op.key,
      method: 'PUT',
      json: { config: { api_key: REDACTED_MARKER, org_id: 'o', webhook_secret: REDACTED_MARKER } },
    });
    expect(marker.status).toBe(400);
    expect(fields(marker.body)).toEqual(['config.webhook_secret']);
  });

  it('pauses and resumes with is_active', async () => {
    const off = await call(path, { key: op.key, method: 'PUT', json: { is_active: false } });
    expect(off.status).toBe(200);
    expect(off.body.is_active).toBe(false);
    const list = (await call(`/api/venues/${venueId}/integrations`, { key: op.key })).body;
    expect(list.data.find((i: { id: string }) => i.id === id).is_active).toBe(false);
    const on = await call(path, { key: op.key, method: 'PUT', json: { is_active: true, connector_type: 'meraki' } });
    expect(on.body.is_active).toBe(true);
    expect(on.body.config.org_id).toBe('org-3');
  });

  it('rejects a change of connector_type, a config invalid for the type and empty bodies with 400, changing nothing', async () => {
    const before = await storedRow(id);
    const cases: Array<[unknown, string]> = [
      [{ connector_type: 'unifi', config: { controller_url: 'https://u.example.com', username: 'u', password: 'p' } }, 'connector_type'],
      [{ config: { org_id: 'o' } }, 'config.api_key'],
      [{ config: { api_key: 'k', org_id: 'o', extra: 1 } }, 'config'],
      [{ config: { controller_url: 'https://u.example.com', username: 'u', password: 'p' } }, 'config'],
      [{ config: 'x' }, 'config'],
      [{ is_active: 'no' }, 'is_active'],
      [{ venue_id: venueId, is_active: true }, 'venue_id'],
      [{}, '(root)'],
      [{ connector_type: 'meraki' }, '(root)'],
    ];
    for (const [json, field] of cases) {
      const res = await call(path, { key: op.key, method: 'PUT', json });
      expect(res.status, JSON.stringify(json)).toBe(400);
      expect(res.body.code).toBe('VALIDATION_ERROR');
      expect(fields(res.body), JSON.stringify(res.body)).toContain(field);
    }
    expect(await storedRow(id)).toEqual(before);
  });
});

describe('DELETE /api/venues/:id/integrations/:integrationId', () => {
  it('soft-deletes: later access is 404, the list drops it, the row stays with its plain config and its secrets are erased', async () => {
    const venue = await newVenue(api, op.key);
    const created = await addIntegration(venue.id, {
      connector_type: 'mywifi',
      config: { dashboard_subdomain: 'shop', app_secret: secret('app') },
    });
    const path = `/api/venues/${venue.id}/integrations/${created.id}`;
    const res = await call(path, { key: op.key, method: 'DELETE' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: created.id, is_active: false, deleted_at: isoString });
    for (const opts of [{}, { method: 'PUT', json: { is_active: true } }, { method: 'DELETE' }] as RequestOptions[]) {
      const after = await call(path, { key: op.key, ...opts });
      expect(after.status).toBe(404);
      expect(after.body.code).toBe('NOT_FOUND');
    }
    expect((await call(`/api/venues/${venue.id}/integrations`, { key: op.key })).body).toEqual({ data: [], total: 0 });
    const row = await storedRow(created.id);
    expect(row.config).toEqual({ dashboard_subdomain: 'shop' });
    expect(row.secrets).toEqual({});
    expect(row.deleted_at?.toISOString()).toBe(res.body.deleted_at);
  });
});

describe('cross-tenant access to integrations', () => {
  it("answers 403 to operator B on every integration path of A's venue, and A's integration is unchanged", async () => {
    const b = await newOperator(api, 'pro');
    const venue = await newVenue(api, op.key);
    const created = await addIntegration(venue.id, { connector_type: 'verkada', config: { org_id: 'a-org', api_key: secret('a-key') } });
    const before = { list: (await call(`/api/venues/${venue.id}/integrations`, { key: op.key })).body, row: await storedRow(created.id) };
    const base = `/api/venues/${venue.id}/integrations`;
    const attempts: Array<[string, RequestOptions]> = [
      [base, {}],
      [base, { json: { connector_type: 'verkada', config: { org_id: 'b', api_key: 'b' } } }],
      [`${base}/${created.id}`, {}],
      [`${base}/${created.id}`, { method: 'PUT', json: { is_active: false, config: { org_id: 'b', api_key: 'stolen' } } }],
      [`${base}/${created.id}`, { method: 'DELETE' }],
    ];
    for (const [path, opts] of attempts) {
      const res = await call(path, { key: b.key, ...opts });
      expect(res.status, `${opts.method ?? (opts.json ? 'POST' : 'GET')} ${path}`).toBe(403);
      expect(res.body.code).toBe('FORBIDDEN');
    }
    expect((await call(base, { key: op.key })).body).toEqual(before.list);
    expect(await storedRow(created.id)).toEqual(before.row);
    // and through B's own venue, A's integration does not exist
    const bVenue = await newVenue(api, b.key);
    expect((await call(`/api/venues/${bVenue.id}/integrations/${created.id}`, { key: b.key })).status).toBe(404);
  });
});

describe('secret envelopes', () => {
  const other = { keyId: 'other', key: randomBytes(32) };

  it('do not open when tampered with, moved to another row or field, or relabelled with another key id', async () => {
    const venue = await newVenue(api, op.key);
    const value = secret('tamper');
    const a = await addIntegration(venue.id, {
      connector_type: 'meraki',
      config: { api_key: value, org_id: 'o', webhook_secret: secret('w') },
    });
    const b = await addIntegration(venue.id, { connector_type: 'meraki', config: { api_key: secret('b'), org_id: 'o' } });
    const env = (await storedRow(a.id)).secrets.api_key!;
    const keys = { ...keyring.keys, other: other.key };
    expect(open(env, keys, secretContext(a.id, 'api_key'))).toBe(value);

    const ct = Buffer.from(env.ct, 'base64');
    ct[0]! ^= 1;
    const tag = Buffer.from(env.tag, 'base64');
    tag[5]! ^= 1;
    const bad: Array<[Envelope, string]> = [
      [{ ...env, ct: ct.toString('base64') }, secretContext(a.id, 'api_key')],
      [{ ...env, tag: tag.toString('base64') }, secretContext(a.id, 'api_key')],
      [{ ...env, iv: randomBytes(12).toString('base64') }, secretContext(a.id, 'api_key')],
      [env, secretContext(b.id, 'api_key')],
      [env, secretContext(a.id, 'webhook_secret')],
      [{ ...env, kid: 'other' }, secretContext(a.id, 'api_key')],
      [{ ...env, kid: 'missing' }, secretContext(a.id, 'api_key')],
    ];
    for (const [envelope, context] of bad) expect(() => open(envelope, keys, context)).toThrow(SecretBoxError);
  });

  it('seal uses a fresh nonce per value', () => {
    const one = seal('same', other, 'ctx');
    const two = seal('same', other, 'ctx');
    expect(one.iv).not.toBe(two.iv);
    expect(one.ct).not.toBe(two.ct);
    expect(open(two, { other: other.key }, 'ctx')).toBe('same');
  });
});

describe('connector secrets in logs', () => {
  it('are redacted by the logger under every secret field name of every connector type', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString('utf8'));
        done();
      },
    });
    const log = createLogger('redaction-test', 'info', sink);
    const names = [...new Set(Object.values(CONNECTORS).flatMap((c) => [...c.secrets]))];
    for (const name of names) log.info({ [name]: 'S3CRET', input: { [name]: 'S3CRET' }, body: { config: { [name]: 'S3CRET' } } }, name);
    expect(lines).toHaveLength(names.length);
    for (const line of lines) expect(line).not.toContain('S3CRET');
  });
});

describe('key rotation', () => {
  it('a new current key with the old one as previous: old envelopes still work, updates and the re-seal move them to the new key', async () => {
    const venue = await newVenue(api, op.key);
    const value = secret('rotating');
    const created = await addIntegration(venue.id, {
      connector_type: 'unifi',
      config: { controller_url: 'https://u.example.com', username: 'u', password: value },
    });
    const untouched = await addIntegration(venue.id, { connector_type: 'mywifi', config: { dashboard_subdomain: 'x', app_secret: value } });

    const newKey = randomBytes(32);
    const cfg = api.services.cfg;
    const rotatedCfg = testConfig({
      SECRETS_KEY: newKey.toString('base64'),
      SECRETS_KEY_ID: 'k-next',
      SECRETS_PREVIOUS_KEYS: `${cfg.SECRETS_KEY_ID}:${cfg.SECRETS_KEY}`,
    });
    const rotated = keyringFromConfig(rotatedCfg);
    expect(Object.keys(rotated.keys).sort()).toEqual([cfg.SECRETS_KEY_ID, 'k-next'].sort());

    const api2 = await startApi(rotatedCfg);
    try {
      const res = await request(`${api2.url}/api/venues/${venue.id}/integrations/${created.id}`, {
        key: op.key,
        method: 'PUT',
        json: { config: { controller_url: 'https://u2.example.com', username: 'u', password: REDACTED_MARKER } },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    } finally {
      await api2.close();
    }
    const kept = (await storedRow(created.id)).secrets.password!;
    expect(kept.kid).toBe('k-next');
    expect(open(kept, { 'k-next': newKey }, secretContext(created.id, 'password'))).toBe(value);
    expect((await storedRow(untouched.id)).secrets.app_secret!.kid).toBe(cfg.SECRETS_KEY_ID);

    try {
      expect(await resealIntegrationSecrets(api.services.db, rotated)).toBeGreaterThanOrEqual(1);
      const { rows } = await api.services.db.query(
        `SELECT count(*)::int AS n FROM integrations i, jsonb_each(i.secrets) e WHERE e.value->>'kid' <> 'k-next'`,
      );
      expect(rows[0].n).toBe(0);
      expect(await storedSecret(untouched.id, 'app_secret', { 'k-next': newKey })).toBe(value);
      expect(await resealIntegrationSecrets(api.services.db, rotated)).toBe(0);
    } finally {
      // Back to the run's key for the suites that follow.
      await resealIntegrationSecrets(api.services.db, { current: keyring.current, keys: rotated.keys });
    }
    expect(await storedSecret(untouched.id, 'app_secret')).toBe(value);
  });
});
