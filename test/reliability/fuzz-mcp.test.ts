import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import {
  checkProperty,
  junkHeaderValue,
  junkNumber,
  junkString,
  junkValue,
  leaksOf,
  newVictim,
  rawJunkBody,
  rawRequest,
  isEnvelope,
  type Victim,
} from './support.js';

const RUNS_PER_TOOL = Number(process.env.FUZZ_RUNS ?? 60);

let api: RunningApi;
let me: TestOperator;
let victim: Victim;
let myVenueId: string;
let client: Client;
let tools: Tool[];

beforeAll(async () => {
  api = await startApi(testConfig({ RATE_LIMITS_ENABLED: 'false' }));
  me = await newOperator(api, 'enterprise');
  victim = await newVictim(api);
  myVenueId = (await newVenue(api, me.key, { name: 'MCP fuzz' })).id;
  client = new Client({ name: 'fuzzer', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${me.key}` } } }),
  );
  tools = (await client.listTools()).tools;
});
afterAll(async () => {
  await client?.close().catch(() => undefined);
  await api.close();
});

const idArb = fc.constantFrom('mine', 'victim', 'zone', 'integration', 'alarm', 'operator').map(
  (w) =>
    ({
      mine: myVenueId,
      victim: victim.venueId,
      zone: victim.zoneId,
      integration: victim.integrationId,
      alarm: victim.alarmId,
      operator: victim.op.id,
    })[w]!,
);
const argValue = fc.oneof(
  { weight: 3, arbitrary: idArb },
  { weight: 3, arbitrary: junkValue },
  { weight: 1, arbitrary: junkNumber },
  { weight: 1, arbitrary: junkString },
  { weight: 1, arbitrary: fc.uuid() },
);

describe('fuzzing MCP tool arguments through the SDK client', () => {
  it('answers junk arguments on every tool with a result or a tool error naming a spec code, or a JSON-RPC error; never an internal error or another operator’s data', async () => {
    expect(tools.length).toBeGreaterThan(5);
    const outcomes = { ok: 0, toolError: 0, rpcError: 0 };
    for (const tool of tools) {
      const names = Object.keys((tool.inputSchema.properties as Record<string, unknown> | undefined) ?? {});
      const argsArb = fc.dictionary(
        fc.oneof(
          { weight: 4, arbitrary: fc.constantFrom(...names, 'venue_id') },
          { weight: 1, arbitrary: fc.constantFrom('__proto__', 'operator_id', 'constructor', '') },
        ),
        argValue,
        { maxKeys: 5 },
      );
      await checkProperty(
        fc.asyncProperty(argsArb, async (args) => {
          const sent = JSON.stringify(args);
          let answer: string;
          try {
            const result = (await client.callTool({ name: tool.name, arguments: args }, undefined, { timeout: 10_000 })) as CallToolResult;
            answer = JSON.stringify(result);
            if (result.isError) {
              outcomes.toolError++;
              const text = (result.content[0] as { text: string }).text;
              expect(text, `${tool.name} ${sent.slice(0, 300)}`).toMatch(
                /^(VALIDATION_ERROR|FORBIDDEN|NOT_FOUND|RATE_LIMITED|QUOTA_EXCEEDED): /,
              );
            } else {
              outcomes.ok++;
            }
          } catch (err) {
            expect(err, `${tool.name} ${sent.slice(0, 300)}: ${String(err)}`).toBeInstanceOf(McpError);
            expect((err as McpError).code, String(err)).not.toBe(-32603);
            outcomes.rpcError++;
            answer = String(err);
          }
          expect(leaksOf(victim, sent, answer), `${tool.name} ${sent.slice(0, 300)} → ${answer.slice(0, 300)}`).toEqual([]);
        }),
        RUNS_PER_TOOL,
      );
    }
    expect(outcomes.ok).toBeGreaterThan(0);
    expect(outcomes.toolError).toBeGreaterThan(0);
  });

  it('answers unknown tool names and junk names with a JSON-RPC error', async () => {
    await checkProperty(
      fc.asyncProperty(junkString, async (name) => {
        await expect(client.callTool({ name, arguments: {} }, undefined, { timeout: 10_000 })).rejects.toBeInstanceOf(McpError);
      }),
      40,
    );
  });

  it('answers junk JSON-RPC bodies and headers at /mcp without a 5xx, in the envelope or as JSON-RPC errors', async () => {
    const rpc = fc.record(
      {
        jsonrpc: fc.oneof(fc.constant('2.0'), junkValue),
        id: fc.oneof(fc.integer(), junkValue),
        method: fc.oneof(
          fc.constantFrom('tools/call', 'tools/list', 'initialize', 'ping', 'resources/list', 'notifications/initialized'),
          junkString,
        ),
        params: junkValue,
      },
      { requiredKeys: [] },
    );
    const body = fc.oneof(
      rpc.map((r) => Buffer.from(JSON.stringify(r))),
      fc.array(rpc, { maxLength: 3 }).map((r) => Buffer.from(JSON.stringify(r))),
      rawJunkBody,
    );
    await checkProperty(
      fc.asyncProperty(
        body,
        fc.constantFrom('POST', 'GET', 'DELETE'),
        fc.constantFrom('application/json, text/event-stream', 'application/json', 'text/html', '*/*'),
        junkHeaderValue,
        async (raw, method, accept, session) => {
          const res = await rawRequest(api.url, {
            method,
            path: '/mcp',
            headers: [
              ['Authorization', `Bearer ${me.key}`],
              ['Content-Type', 'application/json'],
              ['Accept', accept],
              ['Mcp-Session-Id', session],
            ],
            body: method === 'POST' ? raw : undefined,
          });
          expect(res.status, `${method} ${raw.toString('utf8').slice(0, 200)} → ${res.status} ${res.text.slice(0, 300)}`).toBeLessThan(500);
          if (res.status >= 400) {
            const rpcError = (() => {
              try {
                return typeof (JSON.parse(res.text) as { error?: { code?: unknown } }).error?.code === 'number';
              } catch {
                return false;
              }
            })();
            expect(isEnvelope(res.text) || rpcError, res.text.slice(0, 300)).toBe(true);
          }
          expect(leaksOf(victim, raw.toString('utf8'), res.text)).toEqual([]);
        },
      ),
      150,
    );
  });
});
