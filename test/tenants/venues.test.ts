import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type RunningApi } from '../support/env.js';
import { request, type RequestOptions } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';

let api: RunningApi;
beforeAll(async () => {
  api = await startApi();
});
afterAll(async () => {
  await api.close();
});

const call = (path: string, opts: RequestOptions = {}) => request(`${api.url}${path}`, opts);
const fields = (body: { details?: Array<{ field: string }> }) => (body.details ?? []).map((d) => d.field);
const isoString = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

async function expect400(res: Awaited<ReturnType<typeof call>>, field: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(400);
  expect(res.body.code).toBe('VALIDATION_ERROR');
  expect(
    fields(res.body).some((f) => f === field || res.body.details.some((d: { message: string }) => d.message.includes(field))),
    JSON.stringify(res.body),
  ).toBe(true);
}

describe('POST /api/venues', () => {
  let op: TestOperator;
  beforeAll(async () => {
    op = await newOperator(api, 'pro');
  });

  it('creates a venue and answers 201 with exactly the spec fields', async () => {
    const res = await call('/api/venues', {
      key: op.key,
      json: { name: 'Main Hall', timezone: 'Europe/Berlin', address: 'Street 1', lat: 52.52, lng: 13.4, hardware_type: 'meraki' },
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.any(String),
      name: 'Main Hall',
      timezone: 'Europe/Berlin',
      is_active: true,
      operator_id: op.id,
      created_at: isoString,
    });
    const { rows } = await api.services.db.query('SELECT address, lat, lng, hardware_type FROM venues WHERE id = $1', [res.body.id]);
    expect(rows[0]).toEqual({ address: 'Street 1', lat: 52.52, lng: 13.4, hardware_type: 'meraki' });
  });

  it('accepts every hardware_type: the seven connector types and other', async () => {
    for (const hardware_type of ['meraki', 'aruba', 'unifi', 'mywifi', 'square', 'density', 'verkada', 'other']) {
      const res = await call('/api/venues', { key: op.key, json: { name: hardware_type, timezone: 'UTC', hardware_type } });
      expect(res.status, hardware_type).toBe(201);
    }
  });

  it('accepts IANA names ICU knows, canonical or linked, and normalises the case of canonical ones', async () => {
    for (const [given, stored] of [
      ['UTC', 'UTC'],
      ['America/Argentina/Buenos_Aires', 'America/Argentina/Buenos_Aires'],
      ['Asia/Kolkata', 'Asia/Kolkata'],
      ['Etc/GMT+5', 'Etc/GMT+5'],
      ['europe/berlin', 'Europe/Berlin'],
    ]) {
      const res = await call('/api/venues', { key: op.key, json: { name: 'tz', timezone: given } });
      expect(res.status, given).toBe(201);
      expect(res.body.timezone).toBe(stored);
    }
  });

  it.each([
    ['name missing', { timezone: 'UTC' }, 'name'],
    ['name empty', { name: '  ', timezone: 'UTC' }, 'name'],
    ['name not a string', { name: 42, timezone: 'UTC' }, 'name'],
    ['timezone missing', { name: 'x' }, 'timezone'],
    ['timezone unknown', { name: 'x', timezone: 'Mars/Olympus_Mons' }, 'timezone'],
    ['timezone an offset', { name: 'x', timezone: '+01:00' }, 'timezone'],
    ['timezone an abbreviation ICU does not know', { name: 'x', timezone: 'CEST' }, 'timezone'],
    ['lat above 90', { name: 'x', timezone: 'UTC', lat: 90.5 }, 'lat'],
    ['lat below -90', { name: 'x', timezone: 'UTC', lat: -91 }, 'lat'],
    ['lat a string', { name: 'x', timezone: 'UTC', lat: '52.1' }, 'lat'],
    ['lng above 180', { name: 'x', timezone: 'UTC', lng: 180.01 }, 'lng'],
    ['lng below -180', { name: 'x', timezone: 'UTC', lng: -181 }, 'lng'],
    ['hardware_type unknown', { name: 'x', timezone: 'UTC', hardware_type: 'cisco' }, 'hardware_type'],
    ['address not a string', { name: 'x', timezone: 'UTC', address: 7 }, 'address'],
    ['operator_id given', { name: 'x', timezone: 'UTC', operator_id: '00000000-0000-4000-8000-000000000000' }, 'operator_id'],
    ['is_active given', { name: 'x', timezone: 'UTC', is_active: false }, 'is_active'],
    ['an unknown field', { name: 'x', timezone: 'UTC', colour: 'red' }, 'colour'],
  ])('rejects %s with 400 naming the field', async (_case, json, field) => {
    await expect400(await call('/api/venues', { key: op.key, json }), field);
  });

  it('rejects a missing body, malformed JSON and a non-JSON content type with 400', async () => {
    await expect400(await call('/api/venues', { key: op.key, method: 'POST' }), 'name');
    const bad = await call('/api/venues', { key: op.key, rawBody: '{"name":', headers: { 'content-type': 'application/json' } });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('VALIDATION_ERROR');
    const text = await call('/api/venues', { key: op.key, rawBody: 'name=x', headers: { 'content-type': 'text/plain' } });
    expect(text.status).toBe(400);
  });

  it('requires a bearer key', async () => {
    const res = await call('/api/venues', { json: { name: 'x', timezone: 'UTC' } });
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('UNAUTHORIZED');
  });
});

describe('plan venue limit', () => {
  it('Free allows one active venue: the second is 403 PLAN_LIMIT_REACHED; after deleting the first, creating works again', async () => {
    const op = await newOperator(api, 'free');
    const first = await newVenue(api, op.key);
    const second = await call('/api/venues', { key: op.key, json: { name: 'Second', timezone: 'UTC' } });
    expect(second.status).toBe(403);
    expect(second.body.code).toBe('PLAN_LIMIT_REACHED');
    expect(second.body.error).toMatch(/Free plan/);
    expect(second.body.error).toMatch(/at most 1 active venue/);
    expect(second.body.error).toMatch(/upgrade/);
    expect(second.body.details).toEqual({ plan: 'free', limit: 1, active: 1 });
    expect((await call(`/api/venues/${first.id}`, { key: op.key, method: 'DELETE' })).status).toBe(200);
    await newVenue(api, op.key, { name: 'Replacement' });
  });

  it('Team (starter) allows five', async () => {
    const op = await newOperator(api, 'starter');
    for (let i = 0; i < 5; i++) await newVenue(api, op.key, { name: `v${i}` });
    const sixth = await call('/api/venues', { key: op.key, json: { name: 'v6', timezone: 'UTC' } });
    expect(sixth.status).toBe(403);
    expect(sixth.body.code).toBe('PLAN_LIMIT_REACHED');
    expect(sixth.body.error).toMatch(/Team plan allows at most 5 active venues/);
  });

  it('holds under concurrent creations: exactly one of eight parallel requests wins on Free', async () => {
    const op = await newOperator(api, 'free');
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => call('/api/venues', { key: op.key, json: { name: `race${i}`, timezone: 'UTC' } })),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 403 && r.body.code === 'PLAN_LIMIT_REACHED')).toHaveLength(7);
    const { rows } = await api.services.db.query('SELECT count(*)::int AS n FROM venues WHERE operator_id = $1', [op.id]);
    expect(rows[0].n).toBe(1);
  });
});

describe('GET /api/venues', () => {
  let op: TestOperator;
  const ids: string[] = [];
  beforeAll(async () => {
    op = await newOperator(api, 'pro');
    for (let i = 0; i < 5; i++) ids.push((await newVenue(api, op.key, { name: `List ${i}` })).id);
  });

  it('lists only active venues, oldest first, with zone_count and last_event_at', async () => {
    await call(`/api/venues/${ids[0]}/zones`, { key: op.key, json: { slug: 'a', name: 'A', type: 'area' } });
    const doomed = await call(`/api/venues/${ids[0]}/zones`, { key: op.key, json: { slug: 'b', name: 'B', type: 'entrance' } });
    await call(`/api/venues/${ids[0]}/zones`, { key: op.key, json: { slug: 'c', name: 'C', type: 'exit' } });
    await call(`/api/venues/${ids[0]}/zones/${doomed.body.id}`, { key: op.key, method: 'DELETE' });
    await api.services.db.query(`UPDATE venues SET last_event_at = '2024-05-01T10:00:00Z' WHERE id = $1`, [ids[1]]);
    await call(`/api/venues/${ids[4]}`, { key: op.key, method: 'DELETE' });

    const res = await call('/api/venues', { key: op.key });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ total: 4, limit: 50, offset: 0 });
    expect(res.body.data.map((v: { id: string }) => v.id)).toEqual(ids.slice(0, 4));
    expect(res.body.data[0]).toEqual({
      id: ids[0],
      operator_id: op.id,
      name: 'List 0',
      timezone: 'Europe/Berlin',
      address: null,
      lat: null,
      lng: null,
      hardware_type: null,
      occupancy_reset_hour: 4,
      is_active: true,
      zone_count: 2,
      last_event_at: null,
      created_at: isoString,
      updated_at: isoString,
    });
    expect(res.body.data[1].zone_count).toBe(0);
    expect(res.body.data[1].last_event_at).toBe('2024-05-01T10:00:00.000Z');
  });

  it('pages with limit and offset; total counts all active venues', async () => {
    const page = await call('/api/venues?limit=2&offset=1', { key: op.key });
    expect(page.status).toBe(200);
    expect(page.body).toMatchObject({ total: 4, limit: 2, offset: 1 });
    expect(page.body.data.map((v: { id: string }) => v.id)).toEqual(ids.slice(1, 3));
    const past = await call('/api/venues?offset=10', { key: op.key });
    expect(past.body).toMatchObject({ data: [], total: 4, offset: 10 });
    const max = await call('/api/venues?limit=200', { key: op.key });
    expect(max.status).toBe(200);
    expect(max.body.limit).toBe(200);
  });

  it.each([
    ['limit=201', 'limit'],
    ['limit=0', 'limit'],
    ['limit=-1', 'limit'],
    ['limit=1.5', 'limit'],
    ['limit=ten', 'limit'],
    ['offset=-1', 'offset'],
    ['offset=0.5', 'offset'],
    ['offset=x', 'offset'],
  ])('rejects %s with 400 VALIDATION_ERROR naming the parameter (no clamping)', async (qs, field) => {
    const res = await call(`/api/venues?${qs}`, { key: op.key });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('VALIDATION_ERROR');
    expect(fields(res.body)).toContain(field);
  });
});

describe('GET /api/venues/:id', () => {
  it('returns the venue with its active zones and not deleted integrations', async () => {
    const op = await newOperator(api, 'pro');
    const venue = await newVenue(api, op.key, { address: 'Road 2', lat: 1.5, lng: -2.5, hardware_type: 'unifi' });
    const zone = (
      await call(`/api/venues/${venue.id}/zones`, { key: op.key, json: { slug: 'floor', name: 'Floor', type: 'area', capacity: 120 } })
    ).body;
    const gone = (await call(`/api/venues/${venue.id}/zones`, { key: op.key, json: { slug: 'gone', name: 'Gone', type: 'area' } })).body;
    await call(`/api/venues/${venue.id}/zones/${gone.id}`, { key: op.key, method: 'DELETE' });
    const meraki = { connector_type: 'meraki', config: { api_key: 'k-123', org_id: 'o1' } };
    const live = (await call(`/api/venues/${venue.id}/integrations`, { key: op.key, json: meraki })).body;
    const paused = (await call(`/api/venues/${venue.id}/integrations`, { key: op.key, json: meraki })).body;
    await call(`/api/venues/${venue.id}/integrations/${paused.id}`, { key: op.key, method: 'PUT', json: { is_active: false } });
    const removed = (await call(`/api/venues/${venue.id}/integrations`, { key: op.key, json: meraki })).body;
    await call(`/api/venues/${venue.id}/integrations/${removed.id}`, { key: op.key, method: 'DELETE' });

    const res = await call(`/api/venues/${venue.id}`, { key: op.key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: venue.id,
      operator_id: op.id,
      name: 'Test venue',
      timezone: 'Europe/Berlin',
      address: 'Road 2',
      lat: 1.5,
      lng: -2.5,
      hardware_type: 'unifi',
      occupancy_reset_hour: 4,
      is_active: true,
      created_at: venue.created_at,
      updated_at: isoString,
      zones: [{ id: zone.id, slug: 'floor', name: 'Floor', type: 'area', capacity: 120 }],
      integrations: [
        { id: live.id, connector_type: 'meraki', is_active: true, created_at: live.created_at },
        { id: paused.id, connector_type: 'meraki', is_active: false, created_at: paused.created_at },
      ],
    });
  });

  it('answers 404 for a venue that does not exist', async () => {
    const op = await newOperator(api);
    const res = await call('/api/venues/7d1f4f38-4c5e-4b8e-9a57-0c6a3c1f2b10', { key: op.key });
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('NOT_FOUND');
  });
});

describe('PUT /api/venues/:id', () => {
  let op: TestOperator;
  let venueId: string;
  beforeAll(async () => {
    op = await newOperator(api, 'pro');
    venueId = (await newVenue(api, op.key, { address: 'Old street', lat: 10, lng: 20, hardware_type: 'aruba' })).id;
  });

  it('changes only the fields sent and returns the venue with updated_at', async () => {
    const before = (await call(`/api/venues/${venueId}`, { key: op.key })).body;
    const res = await call(`/api/venues/${venueId}`, {
      key: op.key,
      method: 'PUT',
      json: { name: 'Renamed', timezone: 'America/New_York' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: venueId,
      operator_id: op.id,
      name: 'Renamed',
      timezone: 'America/New_York',
      address: 'Old street',
      lat: 10,
      lng: 20,
      hardware_type: 'aruba',
      occupancy_reset_hour: 4,
      is_active: true,
      created_at: before.created_at,
      updated_at: isoString,
    });
    expect(Date.parse(res.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(before.updated_at));
  });

  it('clears optional fields sent as null', async () => {
    const res = await call(`/api/venues/${venueId}`, {
      key: op.key,
      method: 'PUT',
      json: { address: null, lat: null, lng: null, hardware_type: null },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'Renamed', address: null, lat: null, lng: null, hardware_type: null });
  });

  it.each([
    ['operator_id', { operator_id: '00000000-0000-4000-8000-000000000000' }],
    ['id', { id: '00000000-0000-4000-8000-000000000000', name: 'x' }],
    ['is_active', { is_active: false }],
    ['created_at', { created_at: '2020-01-01T00:00:00Z' }],
    ['name', { name: '' }],
    ['name', { name: null }],
    ['timezone', { timezone: 'Not/AZone' }],
    ['lat', { lat: 100 }],
    ['lng', { lng: 'east' }],
    ['hardware_type', { hardware_type: 'zigbee' }],
    ['colour', { colour: 'red' }],
  ])('rejects a body with a bad %s with 400 naming it, changing nothing', async (field, json) => {
    const before = (await call(`/api/venues/${venueId}`, { key: op.key })).body;
    await expect400(await call(`/api/venues/${venueId}`, { key: op.key, method: 'PUT', json }), field);
    expect((await call(`/api/venues/${venueId}`, { key: op.key })).body).toEqual(before);
  });

  it('rejects an empty or missing body with 400', async () => {
    for (const opts of [{ json: {} }, {}]) {
      const res = await call(`/api/venues/${venueId}`, { key: op.key, method: 'PUT', ...opts });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('VALIDATION_ERROR');
      expect(res.body.details[0].message).toMatch(/at least one of name, timezone/);
    }
  });
});

describe('DELETE /api/venues/:id (soft delete)', () => {
  it('answers {id, is_active:false, deleted_at}; afterwards every path is 404 and the history is kept', async () => {
    const op = await newOperator(api, 'pro');
    const venue = await newVenue(api, op.key);
    const zone = (await call(`/api/venues/${venue.id}/zones`, { key: op.key, json: { slug: 'z', name: 'Z', type: 'area' } })).body;
    const integration = (
      await call(`/api/venues/${venue.id}/integrations`, {
        key: op.key,
        json: { connector_type: 'verkada', config: { org_id: 'o', api_key: 'vk' } },
      })
    ).body;

    const res = await call(`/api/venues/${venue.id}`, { key: op.key, method: 'DELETE' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: venue.id, is_active: false, deleted_at: isoString });

    const v = `/api/venues/${venue.id}`;
    const attempts: Array<[string, RequestOptions]> = [
      [v, {}],
      [v, { method: 'PUT', json: { name: 'x' } }],
      [v, { method: 'DELETE' }],
      [`${v}/zones`, {}],
      [`${v}/zones`, { json: { slug: 'n', name: 'N', type: 'area' } }],
      [`${v}/zones/${zone.id}`, {}],
      [`${v}/zones/${zone.id}`, { method: 'PUT', json: { name: 'x' } }],
      [`${v}/zones/${zone.id}`, { method: 'DELETE' }],
      [`${v}/integrations`, {}],
      [`${v}/integrations`, { json: { connector_type: 'verkada', config: { org_id: 'o', api_key: 'vk' } } }],
      [`${v}/integrations/${integration.id}`, {}],
      [`${v}/integrations/${integration.id}`, { method: 'PUT', json: { is_active: false } }],
      [`${v}/integrations/${integration.id}`, { method: 'DELETE' }],
    ];
    for (const [path, opts] of attempts) {
      const after = await call(path, { key: op.key, ...opts });
      expect(after.status, `${opts.method ?? (opts.json ? 'POST' : 'GET')} ${path}`).toBe(404);
      expect(after.body.code).toBe('NOT_FOUND');
    }
    expect((await call('/api/venues', { key: op.key })).body).toMatchObject({ data: [], total: 0 });

    const db = api.services.db;
    const row = (await db.query('SELECT is_active, deleted_at, name FROM venues WHERE id = $1', [venue.id])).rows[0];
    expect(row).toMatchObject({ is_active: false, name: 'Test venue' });
    expect(row.deleted_at.toISOString()).toBe(res.body.deleted_at);
    expect((await db.query('SELECT is_active FROM zones WHERE id = $1', [zone.id])).rows).toEqual([{ is_active: true }]);
    expect((await db.query('SELECT deleted_at FROM integrations WHERE id = $1', [integration.id])).rows).toEqual([{ deleted_at: null }]);
  });
});

describe('malformed ids', () => {
  it('answer 400 VALIDATION_ERROR naming the id on every venue path, never 500', async () => {
    const op = await newOperator(api, 'pro');
    const venue = await newVenue(api, op.key);
    const paths: Array<[string, RequestOptions, string]> = [
      ['/api/venues/not-a-uuid', {}, 'id'],
      ['/api/venues/123', { method: 'PUT', json: { name: 'x' } }, 'id'],
      ["/api/venues/1'; DROP TABLE venues; --", { method: 'DELETE' }, 'id'],
      ['/api/venues/7d1f4f38-4c5e-4b8e-9a57-0c6a3c1f2b1', {}, 'id'],
      ['/api/venues/nope/zones', {}, 'id'],
      ['/api/venues/nope/zones', { json: { slug: 'a', name: 'A', type: 'area' } }, 'id'],
      [`/api/venues/${venue.id}/zones/nope`, {}, 'zoneId'],
      [`/api/venues/${venue.id}/zones/nope`, { method: 'PUT', json: { name: 'x' } }, 'zoneId'],
      [`/api/venues/${venue.id}/zones/nope`, { method: 'DELETE' }, 'zoneId'],
      ['/api/venues/nope/integrations', {}, 'id'],
      [`/api/venues/${venue.id}/integrations/nope`, {}, 'integrationId'],
      [`/api/venues/${venue.id}/integrations/nope`, { method: 'PUT', json: { is_active: true } }, 'integrationId'],
      [`/api/venues/${venue.id}/integrations/nope`, { method: 'DELETE' }, 'integrationId'],
    ];
    for (const [path, opts, field] of paths) {
      const res = await call(encodeURI(path), { key: op.key, ...opts });
      expect(res.status, path).toBe(400);
      expect(res.body.code).toBe('VALIDATION_ERROR');
      expect(fields(res.body)).toContain(field);
    }
  });
});

describe('cross-tenant access to venues', () => {
  it("answers 403 to operator B for every path on A's venue and leaves A's venue unchanged", async () => {
    const a = await newOperator(api, 'pro');
    const b = await newOperator(api, 'pro');
    const venue = await newVenue(api, a.key, { name: 'A venue' });
    await newVenue(api, b.key, { name: 'B venue' });
    const before = (await call(`/api/venues/${venue.id}`, { key: a.key })).body;

    for (const opts of [{}, { method: 'PUT', json: { name: 'hijacked' } }, { method: 'DELETE' }] as RequestOptions[]) {
      const res = await call(`/api/venues/${venue.id}`, { key: b.key, ...opts });
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('FORBIDDEN');
    }
    expect((await call(`/api/venues/${venue.id}`, { key: a.key })).body).toEqual(before);

    const bList = (await call('/api/venues?limit=200', { key: b.key })).body;
    expect(bList.total).toBe(1);
    expect(bList.data.map((v: { name: string }) => v.name)).toEqual(['B venue']);
    expect(bList.data.every((v: { operator_id: string }) => v.operator_id === b.id)).toBe(true);
  });
});
