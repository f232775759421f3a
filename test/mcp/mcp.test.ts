import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { OPERATIONS } from '../../apps/api/operations/index.js';
import { billingPeriodStart } from '../../domain/limits/quotas.js';
import { startApi, type RunningApi } from '../support/env.js';
import { freePort, startFrontDoor, type FrontDoor } from '../support/frontdoor.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';

let api: RunningApi;
/** Agents reach /mcp through the front door, as in production. */
let door: FrontDoor;
let pro: TestOperator;
let other: TestOperator;
const clients: Client[] = [];

beforeAll(async () => {
  api = await startApi();
  door = await startFrontDoor({ apiPort: Number(new URL(api.url).port), edgePort: await freePort() });
  [pro, other] = await Promise.all([newOperator(api, 'pro'), newOperator(api, 'pro')]);
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await door.close();
  await api.close();
});

async function connect(key: string): Promise<Client> {
  const client = new Client({ name: 'test-agent', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${door.url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

const text = (r: unknown) => ((r as CallToolResult).content[0] as { type: 'text'; text: string }).text;

describe('MCP at /mcp', () => {
  it('initializes with the Bearer key and lists every tool with its input and output schema, read-only', async () => {
    const client = await connect(pro.key);
    expect(client.getServerVersion()?.name).toBe('venue-telemetry');
    const { tools } = await client.listTools();
    const expected = OPERATIONS.filter((op) => op.tool)
      .map((op) => op.tool!.name)
      .sort();
    expect(tools.map((t) => t.name).sort()).toEqual(expected);
    for (const tool of tools) {
      expect(tool.inputSchema.type, tool.name).toBe('object');
      expect(tool.outputSchema?.type, tool.name).toBe('object');
      expect(tool.annotations).toMatchObject({ readOnlyHint: true, idempotentHint: true });
      expect(tool.description!.length).toBeGreaterThan(40);
    }
    expect(tools.find((t) => t.name === 'get_venue')!.inputSchema).toMatchObject({ required: ['venue_id'] });
  });

  it('answers each tool with what its REST counterpart answers: JSON text in the first content item and structured content', async () => {
    const client = await connect(pro.key);
    const venue = await newVenue(api, pro.key, { name: 'MCP venue' });
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['list_venues', {}, '/api/venues'],
      ['get_venue', { venue_id: venue.id }, `/api/venues/${venue.id}`],
      [
        'get_telemetry',
        { venue_id: venue.id, keys: 'devices,co2', startTs: 0, endTs: 3_600_000 * 24 * 10 },
        `/api/venues/${venue.id}/telemetry?keys=devices,co2&startTs=0&endTs=${3_600_000 * 24 * 10}`,
      ],
      ['get_dashboard_stats', {}, '/api/dashboard/stats'],
    ];
    for (const [name, args, path] of cases) {
      const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
      expect(result.isError, `${name}: ${text(result)}`).toBeFalsy();
      const rest = await request(`${api.url}${path}`, { key: pro.key });
      expect(JSON.parse(text(result)), name).toEqual(rest.body);
      expect(result.structuredContent, name).toEqual(rest.body);
    }
  });

  it('returns bad arguments, unknown and other operators’ venues as tool errors naming the spec code, never their data', async () => {
    const client = await connect(pro.key);
    const theirs = await newVenue(api, other.key, { name: 'Not yours' });
    const bad = (await client.callTool({ name: 'get_venue', arguments: { venue_id: 'nope' } })) as CallToolResult;
    expect(bad.isError).toBe(true);
    expect(text(bad)).toMatch(/^VALIDATION_ERROR: .*venue_id/);
    const limit = (await client.callTool({ name: 'list_venues', arguments: { limit: 500 } })) as CallToolResult;
    expect(text(limit)).toMatch(/^VALIDATION_ERROR: .*limit/);
    const forbidden = (await client.callTool({ name: 'get_venue', arguments: { venue_id: theirs.id } })) as CallToolResult;
    expect(forbidden.isError).toBe(true);
    expect(text(forbidden)).toMatch(/^FORBIDDEN: /);
    expect(text(forbidden)).not.toContain('Not yours');
    for (const name of ['get_telemetry']) {
      const r = (await client.callTool({
        name,
        arguments: { venue_id: theirs.id, keys: 'co2', startTs: 0, endTs: 1000 },
      })) as CallToolResult;
      expect(text(r), name).toMatch(/^FORBIDDEN: /);
    }
    const missing = (await client.callTool({
      name: 'get_venue',
      arguments: { venue_id: '00000000-0000-4000-8000-000000000000' },
    })) as CallToolResult;
    expect(text(missing)).toMatch(/^NOT_FOUND: /);
  });

  it('refuses a missing or rotated key with 401 in the envelope and WWW-Authenticate; GET and DELETE are 405', async () => {
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    };
    const headers = { accept: 'application/json, text/event-stream' };
    const none = await request(`${door.url}/mcp`, { json: init, headers });
    expect(none.status).toBe(401);
    expect(none.body).toMatchObject({ code: 'UNAUTHORIZED' });
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer /);
    const op = await newOperator(api, 'pro');
    const rotated = await request(`${api.url}/api/keys/rotate`, { method: 'POST', key: op.key });
    expect(rotated.status).toBe(200);
    const old = await request(`${door.url}/mcp`, { json: init, headers, key: op.key });
    expect(old.status).toBe(401);
    const fresh = await request(`${door.url}/mcp`, { json: init, headers, key: rotated.body.api_key });
    expect(fresh.status).toBe(200);
    for (const method of ['GET', 'DELETE']) {
      const res = await request(`${door.url}/mcp`, { method, key: rotated.body.api_key });
      expect(res.status, method).toBe(405);
      expect(res.headers.get('allow')).toContain('POST');
    }
  });

  it('counts each tool call against the monthly MCP quota: on Free, past 100 a tool error an agent can read', async () => {
    const free = await newOperator(api, 'free');
    const client = await connect(free.key);
    expect((await client.callTool({ name: 'get_dashboard_stats', arguments: {} })).isError).toBeFalsy();
    const usage = await request(`${api.url}/api/usage`, { key: free.key });
    expect(usage.body.mcpQueries).toMatchObject({ used: 1, quota: 100 });
    const { rows } = await api.services.db.query(`SELECT billing_anchor FROM operators WHERE id = $1`, [free.id]);
    await api.services.db.query(`UPDATE usage_counters SET mcp_queries = 100 WHERE operator_id = $1 AND period_start = $2`, [
      free.id,
      billingPeriodStart(rows[0].billing_anchor),
    ]);
    const over = (await client.callTool({ name: 'get_dashboard_stats', arguments: {} })) as CallToolResult;
    expect(over.isError).toBe(true);
    expect(text(over)).toMatch(/^QUOTA_EXCEEDED: .*100 MCP queries/);
    // Listing tools is not a query: an agent over quota can still discover what it could do.
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    // MCP queries are not API calls.
    expect((await request(`${api.url}/api/usage`, { key: free.key })).body.apiCalls.used).toBe(0);
  });
});
