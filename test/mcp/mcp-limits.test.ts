import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';

// The protocol's JSON bodies, read field by field in the assertions.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;

let api: RunningApi;
let op: TestOperator;
let venueId: string;

beforeAll(async () => {
  // A small result cap, so a list of a few venues goes over it.
  api = await startApi(testConfig({ MCP_MAX_RESULT_BYTES: '2048' }));
  op = await newOperator(api, 'pro');
  venueId = (await newVenue(api, op.key, { name: 'Batch venue' })).id;
});
afterAll(async () => {
  await api?.close();
});

/** One POST /mcp as an agent's HTTP client sends it, without the SDK (which never batches). */
async function post(body: unknown, version?: string): Promise<{ status: number; remaining: number; body: Any }> {
  const res = await fetch(`${api.url}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${op.key}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(version ? { 'mcp-protocol-version': version } : {}),
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, remaining: Number(res.headers.get('ratelimit-remaining')), body: await res.json() };
}

const mcpQueries = async (): Promise<number> => {
  const { rows } = await api.services.db.query<{ n: string }>(
    'SELECT coalesce(sum(mcp_queries), 0) AS n FROM usage_counters WHERE operator_id = $1',
    [op.id],
  );
  return Number(rows[0]!.n);
};

const call = (id: number, name: string, args: Record<string, unknown>) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args },
});

describe('MCP batches and result size', () => {
  it('refuses a JSON-RPC batch in protocol versions without batches (2025-06-18 on), before counting or running anything', async () => {
    const batch = [call(1, 'get_venue', { venue_id: venueId }), call(2, 'get_venue', { venue_id: venueId })];
    for (const version of ['2025-06-18', '2025-11-25']) {
      const res = await post(batch, version);
      expect(res.status, version).toBe(400);
      expect(res.body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } });
      expect(res.body.error.message).toMatch(new RegExp(`not part of MCP protocol version ${version}; send one message per request`));
    }
    expect(await mcpQueries()).toBe(0);
  });

  it('counts every message of a 2025-03-26 batch against the rate limit and the MCP quota, as if each came alone', async () => {
    const before = await mcpQueries();
    const single = await post(call(1, 'list_alarms', { limit: 1 }), '2025-03-26');
    expect(single.status).toBe(200);
    const batch = Array.from({ length: 10 }, (_, i) => call(i + 1, 'list_alarms', { limit: 1 }));
    // Without the header the server assumes 2025-03-26, as the specification says.
    const res = await post(batch);
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(10);
    for (const answer of res.body) expect(answer.result.isError, JSON.stringify(answer)).toBeFalsy();
    expect(single.remaining - res.remaining).toBe(10);
    expect((await mcpQueries()) - before).toBe(11);
  });

  it('answers a result larger than the cap with a tool error saying how to narrow the question', async () => {
    for (let i = 0; i < 12; i++) await newVenue(api, op.key, { name: `Venue with a long enough name number ${i}` });
    const client = new Client({ name: 'limits-agent', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${op.key}` } } }),
    );
    try {
      const big = (await client.callTool({ name: 'list_venues', arguments: { limit: 50 } })) as CallToolResult;
      expect(big.isError).toBe(true);
      expect((big.content[0] as { text: string }).text).toMatch(
        /^VALIDATION_ERROR: the answer is larger than 2048 bytes.*shorter time range, fewer keys or a coarser interval/,
      );
      // A telemetry call whose buckets alone can outgrow the cap is refused before any query.
      const now = Date.now();
      const hour = (await client.callTool({
        name: 'get_telemetry',
        arguments: { venue_id: venueId, keys: 'co2', startTs: now - 3_600_000, endTs: now, interval: 60_000 },
      })) as CallToolResult;
      expect(hour.isError).toBe(true);
      expect((hour.content[0] as { text: string }).text).toMatch(/^VALIDATION_ERROR: the answer can be larger than 2048 bytes/);
      const minutes = (await client.callTool({
        name: 'get_telemetry',
        arguments: { venue_id: venueId, keys: 'co2', startTs: now - 1_200_000, endTs: now, interval: 60_000 },
      })) as CallToolResult;
      expect(minutes.isError, JSON.stringify(minutes.content)).toBeFalsy();
      const small = (await client.callTool({ name: 'list_venues', arguments: { limit: 2 } })) as CallToolResult;
      expect(small.isError).toBeFalsy();
      expect((small.structuredContent as { data: unknown[] }).data).toHaveLength(2);
    } finally {
      await client.close();
    }
  });

  it('lists numbers as integers with their bounds and nullable fields as anyOf branches', async () => {
    const res = await post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, '2025-06-18');
    const tools = res.body.result.tools as Array<{ name: string; inputSchema: Any; outputSchema?: Any }>;
    const input = (name: string) => tools.find((t) => t.name === name)!.inputSchema.properties;
    expect(input('list_venues').limit).toMatchObject({ type: 'integer', minimum: 1, maximum: 200 });
    expect(input('list_alarms').offset).toMatchObject({ type: 'integer', minimum: 0 });
    expect(input('get_telemetry').startTs).toMatchObject({ type: 'integer' });
    expect(input('predict_occupancy').hour).toMatchObject({ type: 'integer', minimum: 0, maximum: 23 });
    const listed = JSON.stringify(tools);
    expect(listed).not.toMatch(/"type":\[/);
    expect(listed).not.toMatch(/"pattern":"\^\\\\d\{1,16\}\$"/);
    expect(listed).toMatch(/"anyOf":\[\{[^\]]*\},\{"type":"null"\}\]/);
  });
});
