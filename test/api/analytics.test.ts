import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startApi, type RunningApi } from '../support/env.js';
import { request, type JsonResponse } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';

/** The stream-derived endpoints over REST and MCP: declared shapes, validation, isolation (the figures themselves: test/processors/). */
let api: RunningApi;
let mine: TestOperator;
let theirs: TestOperator;
let venue: string;
let theirVenue: string;
let mcp: Client;

beforeAll(async () => {
  api = await startApi();
  [mine, theirs] = await Promise.all([newOperator(api, 'pro'), newOperator(api, 'pro')]);
  venue = (await newVenue(api, mine.key, { timezone: 'America/New_York', occupancy_reset_hour: 3 })).id;
  theirVenue = (await newVenue(api, theirs.key)).id;
  const zone = await request(`${api.url}/api/venues/${venue}/zones`, {
    key: mine.key,
    json: { slug: 'floor', name: 'Floor', type: 'area', capacity: 50 },
  });
  expect(zone.status).toBe(201);
  mcp = new Client({ name: 'analytics-test', version: '1' });
  await mcp.connect(
    new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${mine.key}` } } }),
  );
});
afterAll(async () => {
  await mcp.close();
  await api.close();
});

const paths = (id: string) => [
  `/api/venues/${id}/occupancy`,
  `/api/venues/${id}/dwell`,
  `/api/venues/${id}/visitors/scoring`,
  `/api/venues/${id}/predictions/occupancy?dayOfWeek=2&hour=12`,
];

describe('stream-derived endpoints', () => {
  it('answer a new venue with the spec shapes: every zone, all dwell buckets, all four segments, zeros without history', async () => {
    const [occupancy, dwell, scoring, prediction] = (await Promise.all(
      paths(venue).map((p) => request(`${api.url}${p}`, { key: mine.key })),
    )) as [JsonResponse, JsonResponse, JsonResponse, JsonResponse];
    expect(occupancy.status).toBe(200);
    expect(occupancy.body).toMatchObject({
      venue_id: venue,
      occupancy: 0,
      zones: [{ zone_name: 'Floor', zone_type: 'area', occupancy: 0, capacity: 50, percent: 0 }],
    });
    expect(dwell.body.zones.map((z: { zone_id: string; zone_name: string }) => z.zone_name)).toEqual(['Entire Venue', 'Floor']);
    expect(dwell.body.zones[0].zone_id).toBe('default');
    expect(dwell.body.zones[0].buckets.map((b: { range: string }) => b.range)).toEqual(['0-5m', '5-15m', '15-30m', '30-60m', '60m+']);
    expect(scoring.body).toEqual({
      segments: ['New', 'Returning', 'Regular', 'Loyal'].map((name) => ({ name, count: 0, percentage: 0 })),
      total: 0,
      range: '30d',
    });
    expect(prediction.body).toEqual({ dayOfWeek: 2, hour: 12, mean: 0, p25: 0, p75: 0, p95: 0, sampleSize: 0 });
    const connectors = await request(`${api.url}/api/dashboard/connectors`, { key: mine.key });
    expect(connectors.status).toBe(200);
    expect(connectors.body).toEqual({ connectors: [] });
    const read = await request(`${api.url}/api/venues/${venue}`, { key: mine.key });
    expect(read.body.occupancy_reset_hour).toBe(3);
  });

  it('validate their query: ranges, required and bounded prediction parameters, the reset hour', async () => {
    const bad: Array<[string, string]> = [
      [`/api/venues/${venue}/dwell?range=1y`, 'range'],
      [`/api/venues/${venue}/visitors/scoring?range=24h`, 'range'],
      [`/api/venues/${venue}/predictions/occupancy?hour=12`, 'dayOfWeek'],
      [`/api/venues/${venue}/predictions/occupancy?dayOfWeek=7&hour=12`, 'dayOfWeek'],
      [`/api/venues/${venue}/predictions/occupancy?dayOfWeek=1&hour=24`, 'hour'],
      [`/api/venues/${venue}/predictions/occupancy?dayOfWeek=1&hour=1e1`, 'hour'],
      [`/api/venues/not-a-uuid/occupancy`, 'id'],
    ];
    for (const [path, field] of bad) {
      const res = await request(`${api.url}${path}`, { key: mine.key });
      expect(res.status, path).toBe(400);
      expect(
        res.body.details.map((d: { field: string }) => d.field),
        path,
      ).toContain(field);
    }
    const put = await request(`${api.url}/api/venues/${venue}`, { method: 'PUT', key: mine.key, json: { occupancy_reset_hour: 24 } });
    expect(put.status).toBe(400);
    expect(put.body.details[0].field).toBe('occupancy_reset_hour');
  });

  it('refuse another operator’s venue with 403 and an unknown one with 404, over REST and MCP', async () => {
    for (const path of paths(theirVenue)) expect((await request(`${api.url}${path}`, { key: mine.key })).status, path).toBe(403);
    for (const path of paths(randomUUID())) expect((await request(`${api.url}${path}`, { key: mine.key })).status, path).toBe(404);
    const tools: Array<[string, Record<string, unknown>]> = [
      ['get_occupancy', {}],
      ['get_dwell', { range: '7d' }],
      ['get_visitor_scoring', {}],
      ['predict_occupancy', { dayOfWeek: 1, hour: 9 }],
    ];
    for (const [name, args] of tools) {
      const r = (await mcp.callTool({ name, arguments: { venue_id: theirVenue, ...args } })) as CallToolResult;
      expect(r.isError, name).toBe(true);
      expect((r.content[0] as { text: string }).text, name).toMatch(/^FORBIDDEN: /);
    }
  });

  it('answer the MCP tools with what REST answers', async () => {
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['get_occupancy', { venue_id: venue }, `/api/venues/${venue}/occupancy`],
      ['get_dwell', { venue_id: venue, range: '30d' }, `/api/venues/${venue}/dwell?range=30d`],
      ['get_visitor_scoring', { venue_id: venue, range: '7d' }, `/api/venues/${venue}/visitors/scoring?range=7d`],
      ['predict_occupancy', { venue_id: venue, dayOfWeek: 0, hour: 23 }, `/api/venues/${venue}/predictions/occupancy?dayOfWeek=0&hour=23`],
      ['get_connector_health', {}, '/api/dashboard/connectors'],
    ];
    for (const [name, args, path] of cases) {
      const r = (await mcp.callTool({ name, arguments: args })) as CallToolResult;
      expect(r.isError, name).toBeFalsy();
      expect(r.structuredContent, name).toEqual((await request(`${api.url}${path}`, { key: mine.key })).body);
    }
  });
});
