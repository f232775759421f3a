import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type RunningApi } from '../support/env.js';
import { request, type RequestOptions } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';

let api: RunningApi;
let op: TestOperator;
beforeAll(async () => {
  api = await startApi();
  op = await newOperator(api, 'pro');
});
afterAll(async () => {
  await api.close();
});

const call = (path: string, opts: RequestOptions = {}) => request(`${api.url}${path}`, opts);
const fields = (body: { details?: Array<{ field: string }> }) => (body.details ?? []).map((d) => d.field);
const isoString = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
const zonesOf = (venueId: string, key = op.key) => call(`/api/venues/${venueId}/zones`, { key });
const addZone = async (venueId: string, json: Record<string, unknown>, key = op.key) => {
  const res = await call(`/api/venues/${venueId}/zones`, { key, json });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
};

describe('POST /api/venues/:id/zones', () => {
  let venueId: string;
  beforeAll(async () => {
    venueId = (await newVenue(api, op.key)).id;
  });

  it('creates a zone and answers 201 with the full zone; capacity is null when not set', async () => {
    const venue = await newVenue(api, op.key);
    const res = await call(`/api/venues/${venue.id}/zones`, {
      key: op.key,
      json: { slug: 'main-entrance', name: 'Main entrance', type: 'entrance' },
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.any(String),
      venue_id: venue.id,
      slug: 'main-entrance',
      name: 'Main entrance',
      type: 'entrance',
      capacity: null,
      is_active: true,
      created_at: isoString,
      updated_at: isoString,
    });
    for (const [slug, type, capacity] of [
      ['bar', 'counter', 0],
      ['floor-2', 'area', 250],
      ['exit-b', 'exit', 12.5],
    ] as const) {
      expect((await addZone(venue.id, { slug, name: slug, type, capacity })).capacity).toBe(capacity);
    }
  });

  it.each([
    ['slug missing', { name: 'A', type: 'area' }, 'slug'],
    ['slug with a space', { slug: 'main hall', name: 'A', type: 'area' }, 'slug'],
    ['slug upper case', { slug: 'Main', name: 'A', type: 'area' }, 'slug'],
    ['slug with a double hyphen', { slug: 'a--b', name: 'A', type: 'area' }, 'slug'],
    ['slug with a leading hyphen', { slug: '-a', name: 'A', type: 'area' }, 'slug'],
    ['slug with a slash', { slug: 'a/b', name: 'A', type: 'area' }, 'slug'],
    ['slug longer than 64', { slug: 'a'.repeat(65), name: 'A', type: 'area' }, 'slug'],
    ['name missing', { slug: 'a', type: 'area' }, 'name'],
    ['name empty', { slug: 'a', name: '', type: 'area' }, 'name'],
    ['type missing', { slug: 'a', name: 'A' }, 'type'],
    ['type unknown', { slug: 'a', name: 'A', type: 'lobby' }, 'type'],
    ['capacity negative', { slug: 'a', name: 'A', type: 'area', capacity: -1 }, 'capacity'],
    ['capacity a string', { slug: 'a', name: 'A', type: 'area', capacity: '10' }, 'capacity'],
    ['venue_id given', { slug: 'a', name: 'A', type: 'area', venue_id: '00000000-0000-4000-8000-000000000000' }, 'venue_id'],
  ])('rejects %s with 400 naming the field', async (_case, json, field) => {
    const res = await call(`/api/venues/${venueId}/zones`, { key: op.key, json });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('VALIDATION_ERROR');
    expect(fields(res.body)).toContain(field);
  });

  it('rejects an unknown field and an empty body with 400', async () => {
    const venue = await newVenue(api, op.key);
    const unknown = await call(`/api/venues/${venue.id}/zones`, {
      key: op.key,
      json: { slug: 'a', name: 'A', type: 'area', colour: 'red' },
    });
    expect(unknown.status).toBe(400);
    expect(JSON.stringify(unknown.body.details)).toContain('colour');
    const empty = await call(`/api/venues/${venue.id}/zones`, { key: op.key, method: 'POST' });
    expect(empty.status).toBe(400);
    expect(fields(empty.body)).toEqual(expect.arrayContaining(['slug', 'name', 'type']));
  });

  it('answers 409 CONFLICT naming the slug when the venue already has a live zone with it', async () => {
    const venue = await newVenue(api, op.key);
    const first = await addZone(venue.id, { slug: 'lobby', name: 'Lobby', type: 'area' });
    const dup = await call(`/api/venues/${venue.id}/zones`, { key: op.key, json: { slug: 'lobby', name: 'Other', type: 'exit' } });
    expect(dup.status).toBe(409);
    expect(dup.body.code).toBe('CONFLICT');
    expect(dup.body.error).toContain('"lobby"');
    // the same slug in another venue is fine
    const other = await newVenue(api, op.key);
    await addZone(other.id, { slug: 'lobby', name: 'Lobby', type: 'area' });
    // concurrent duplicates: exactly one wins
    const racing = await Promise.all(
      Array.from({ length: 6 }, () =>
        call(`/api/venues/${venue.id}/zones`, { key: op.key, json: { slug: 'race', name: 'R', type: 'area' } }),
      ),
    );
    expect(racing.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    // deleting frees the slug
    expect((await call(`/api/venues/${venue.id}/zones/${first.id}`, { key: op.key, method: 'DELETE' })).status).toBe(200);
    const again = await addZone(venue.id, { slug: 'lobby', name: 'New lobby', type: 'area' });
    expect(again.id).not.toBe(first.id);
  });
});

describe('GET /api/venues/:id/zones and /zones/:zoneId', () => {
  it('lists the active zones, oldest first, as {data, total}', async () => {
    const venue = await newVenue(api, op.key);
    const a = await addZone(venue.id, { slug: 'a', name: 'A', type: 'area', capacity: 10 });
    const b = await addZone(venue.id, { slug: 'b', name: 'B', type: 'entrance' });
    const c = await addZone(venue.id, { slug: 'c', name: 'C', type: 'counter' });
    await call(`/api/venues/${venue.id}/zones/${b.id}`, { key: op.key, method: 'DELETE' });
    const res = await zonesOf(venue.id);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: [
        { id: a.id, slug: 'a', name: 'A', type: 'area', capacity: 10, is_active: true },
        { id: c.id, slug: 'c', name: 'C', type: 'counter', capacity: null, is_active: true },
      ],
      total: 2,
    });
    const empty = await newVenue(api, op.key);
    expect((await zonesOf(empty.id)).body).toEqual({ data: [], total: 0 });
  });

  it('returns one zone', async () => {
    const venue = await newVenue(api, op.key);
    const zone = await addZone(venue.id, { slug: 'one', name: 'One', type: 'exit', capacity: 3 });
    const res = await call(`/api/venues/${venue.id}/zones/${zone.id}`, { key: op.key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(zone);
  });
});

describe('PUT /api/venues/:id/zones/:zoneId', () => {
  it('changes only the fields sent; capacity null clears it', async () => {
    const venue = await newVenue(api, op.key);
    const zone = await addZone(venue.id, { slug: 'old', name: 'Old', type: 'area', capacity: 40 });
    const res = await call(`/api/venues/${venue.id}/zones/${zone.id}`, { key: op.key, method: 'PUT', json: { slug: 'new', name: 'New' } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ...zone, slug: 'new', name: 'New', updated_at: isoString });
    const cleared = await call(`/api/venues/${venue.id}/zones/${zone.id}`, {
      key: op.key,
      method: 'PUT',
      json: { capacity: null, type: 'exit' },
    });
    expect(cleared.body).toMatchObject({ slug: 'new', name: 'New', type: 'exit', capacity: null });
    // the old slug is free again
    await addZone(venue.id, { slug: 'old', name: 'Old again', type: 'area' });
  });

  it('answers 409 when the new slug is taken and 400 for bad or empty bodies', async () => {
    const venue = await newVenue(api, op.key);
    await addZone(venue.id, { slug: 'taken', name: 'T', type: 'area' });
    const zone = await addZone(venue.id, { slug: 'mine', name: 'M', type: 'area' });
    const path = `/api/venues/${venue.id}/zones/${zone.id}`;
    const taken = await call(path, { key: op.key, method: 'PUT', json: { slug: 'taken' } });
    expect(taken.status).toBe(409);
    expect(taken.body.code).toBe('CONFLICT');
    expect(taken.body.error).toContain('"taken"');
    for (const [json, field] of [
      [{ slug: 'Bad Slug' }, 'slug'],
      [{ name: '' }, 'name'],
      [{ type: 'hall' }, 'type'],
      [{ capacity: -5 }, 'capacity'],
      [{ venue_id: venue.id }, 'venue_id'],
      [{ is_active: false }, 'is_active'],
    ] as const) {
      const res = await call(path, { key: op.key, method: 'PUT', json });
      expect(res.status, JSON.stringify(json)).toBe(400);
      expect(fields(res.body)).toContain(field);
    }
    for (const opts of [{ json: {} }, {}]) {
      const res = await call(path, { key: op.key, method: 'PUT', ...opts });
      expect(res.status).toBe(400);
      expect(res.body.details[0].message).toMatch(/at least one of slug, name, type, capacity/);
    }
    expect((await call(path, { key: op.key })).body).toMatchObject({ slug: 'mine', name: 'M', type: 'area', capacity: null });
  });
});

describe('DELETE /api/venues/:id/zones/:zoneId', () => {
  it('soft-deletes: {id, is_active:false, deleted_at}; later access is 404; the row is kept', async () => {
    const venue = await newVenue(api, op.key);
    const zone = await addZone(venue.id, { slug: 'temp', name: 'Temp', type: 'area' });
    const path = `/api/venues/${venue.id}/zones/${zone.id}`;
    const res = await call(path, { key: op.key, method: 'DELETE' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: zone.id, is_active: false, deleted_at: isoString });
    for (const opts of [{}, { method: 'PUT', json: { name: 'x' } }, { method: 'DELETE' }] as RequestOptions[]) {
      const after = await call(path, { key: op.key, ...opts });
      expect(after.status).toBe(404);
      expect(after.body.code).toBe('NOT_FOUND');
    }
    const { rows } = await api.services.db.query('SELECT slug, is_active, deleted_at FROM zones WHERE id = $1', [zone.id]);
    expect(rows[0]).toMatchObject({ slug: 'temp', is_active: false });
  });
});

describe('the zone → venue → operator chain', () => {
  it("answers 404 for a zone addressed through another of the operator's venues", async () => {
    const v1 = await newVenue(api, op.key);
    const v2 = await newVenue(api, op.key);
    const zone = await addZone(v1.id, { slug: 'z', name: 'Z', type: 'area' });
    const wrong = `/api/venues/${v2.id}/zones/${zone.id}`;
    for (const opts of [{}, { method: 'PUT', json: { name: 'moved' } }, { method: 'DELETE' }] as RequestOptions[]) {
      const res = await call(wrong, { key: op.key, ...opts });
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('NOT_FOUND');
    }
    expect((await call(`/api/venues/${v1.id}/zones/${zone.id}`, { key: op.key })).body).toEqual(zone);
  });

  it("answers 403 to operator B on every zone path of A's venue, and A's zones are unchanged", async () => {
    const b = await newOperator(api, 'pro');
    const venue = await newVenue(api, op.key);
    const zone = await addZone(venue.id, { slug: 'private', name: 'Private', type: 'area', capacity: 5 });
    const base = `/api/venues/${venue.id}/zones`;
    const attempts: Array<[string, RequestOptions]> = [
      [base, {}],
      [base, { json: { slug: 'intruder', name: 'X', type: 'area' } }],
      [`${base}/${zone.id}`, {}],
      [`${base}/${zone.id}`, { method: 'PUT', json: { name: 'hijacked', capacity: 0 } }],
      [`${base}/${zone.id}`, { method: 'DELETE' }],
    ];
    for (const [path, opts] of attempts) {
      const res = await call(path, { key: b.key, ...opts });
      expect(res.status, `${opts.method ?? (opts.json ? 'POST' : 'GET')} ${path}`).toBe(403);
      expect(res.body.code).toBe('FORBIDDEN');
    }
    expect((await zonesOf(venue.id)).body).toEqual({
      data: [{ id: zone.id, slug: 'private', name: 'Private', type: 'area', capacity: 5, is_active: true }],
      total: 1,
    });
    // B addressing A's zone through B's own venue finds nothing
    const bVenue = await newVenue(api, b.key);
    const res = await call(`/api/venues/${bVenue.id}/zones/${zone.id}`, { key: b.key, method: 'PUT', json: { name: 'hijacked' } });
    expect(res.status).toBe(404);
    expect((await call(`${base}/${zone.id}`, { key: op.key })).body.name).toBe('Private');
  });

  it('requires a bearer key', async () => {
    const venue = await newVenue(api, op.key);
    expect((await zonesOf(venue.id, '')).status).toBe(401);
  });
});
