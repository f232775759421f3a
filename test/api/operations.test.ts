import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATIONS } from '../../apps/api/operations/index.js';
import { koaPath, meteringOf, TAGS, type BearerContext } from '../../apps/api/operations/operation.js';
import { ResultBudget, toolsFrom } from '../../apps/api/mcp/tools.js';
import { authenticate } from '../../domain/tenants/operators.js';
import { AppError } from '../../lib/errors.js';
import { startApi, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, registeredRoutes, type TestOperator } from '../support/tenants.js';

let api: RunningApi;
let a: TestOperator;
let b: TestOperator;
beforeAll(async () => {
  api = await startApi();
  [a, b] = await Promise.all([newOperator(api, 'pro'), newOperator(api, 'pro')]);
});
afterAll(async () => {
  await api.close();
});

const contextOf = async (op: TestOperator): Promise<BearerContext> => ({
  deps: api.deps,
  log: api.services.log,
  operations: OPERATIONS,
  operator: await authenticate(api.services.db, op.key),
  apiKey: op.key,
});

describe('operation declarations', () => {
  it('declare every route once, each with a known tag, a unique id and the metering its kind needs', () => {
    // /mcp and the vendor webhooks are routes of their own (they read the raw body or speak JSON-RPC).
    const registered = registeredRoutes(api)
      .filter((r) => r.path !== '/mcp' && !r.path.startsWith('/hooks/'))
      .map((r) => `${r.method} ${r.path}`)
      .sort();
    expect(OPERATIONS.map((op) => `${op.method.toUpperCase()} ${koaPath(op.path)}`).sort()).toEqual(registered);
    expect(new Set(OPERATIONS.map((op) => op.id)).size).toBe(OPERATIONS.length);
    for (const op of OPERATIONS) {
      expect(Object.keys(TAGS), op.id).toContain(op.tag);
      expect(meteringOf(op) !== undefined, op.id).toBe(op.auth === 'bearer');
    }
  });
});

describe('MCP tools generated from the declarations', () => {
  const tools = toolsFrom(OPERATIONS);
  const tool = (name: string) => tools.find((t) => t.name === name)!;

  it('are the read operations marked as tools, with snake_case names, read-only annotations and output schemas', () => {
    const marked = OPERATIONS.filter((op) => op.tool);
    expect(tools.map((t) => t.name).sort()).toEqual(marked.map((op) => op.tool!.name).sort());
    for (const t of tools) {
      expect(t.name).toMatch(/^[a-z]+(_[a-z]+)*$/);
      expect(t.description.length, t.name).toBeGreaterThan(40);
      expect(t.annotations).toMatchObject({ readOnlyHint: true, idempotentHint: true });
      expect(t.outputSchema, t.name).toBeDefined();
    }
    expect(Object.keys(tool('get_venue').inputSchema.shape)).toEqual(['venue_id']);
    expect(Object.keys(tool('get_telemetry').inputSchema.shape).sort()).toEqual([
      'agg',
      'endTs',
      'fill',
      'interval',
      'keys',
      'startTs',
      'venue_id',
      'zoneId',
    ]);
  });

  it('answer what the REST route answers for the same caller', async () => {
    const venue = await newVenue(api, a.key, { name: 'Tool venue' });
    const ctx = await contextOf(a);
    const now = Date.now();
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['list_venues', { limit: 10 }, '/api/venues?limit=10'],
      ['get_venue', { venue_id: venue.id }, `/api/venues/${venue.id}`],
      [
        'get_telemetry',
        { venue_id: venue.id, keys: 'devices', startTs: now - 3_600_000, endTs: now },
        `/api/venues/${venue.id}/telemetry?keys=devices&startTs=${now - 3_600_000}&endTs=${now}`,
      ],
      ['get_dashboard_stats', {}, '/api/dashboard/stats'],
      ['get_dashboard_events', { range: '24h' }, '/api/dashboard/events?range=24h'],
    ];
    for (const [name, args, path] of cases) {
      const fromTool = JSON.parse(await tool(name).call(args, ctx)) as unknown;
      const rest = await request(`${api.url}${path}`, { key: a.key });
      expect(rest.status, path).toBe(200);
      // Dashboard buckets end with the current hour: equal unless the two calls straddle an hour.
      const same = (x: unknown) =>
        name === 'get_dashboard_events' ? { ...(x as object), events: (x as { events: unknown[] }).events.length } : x;
      expect(same(fromTool), name).toEqual(same(rest.body));
      expect(tool(name).outputSchema!.safeParse(fromTool).success, name).toBe(true);
    }
  });

  it('share one result budget among the calls of a request: what the arguments can take is set aside before any query', async () => {
    const venue = await newVenue(api, a.key, { name: 'Budget venue' });
    const ctx = await contextOf(a);
    const now = Date.now();
    // 20 one-minute buckets of one key can take 20 × 48 bytes: two fit in 2,048, a third does not.
    const args = { venue_id: venue.id, keys: 'co2', startTs: now - 1_200_000, endTs: now, interval: 60_000 };
    const budget = new ResultBudget(2048);
    const answers = await Promise.allSettled([1, 2, 3].map(() => tool('get_telemetry').call(args, ctx, budget)));
    expect(answers.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    const refused = (answers[2] as PromiseRejectedResult).reason as AppError;
    expect(refused.code).toBe('VALIDATION_ERROR');
    expect(refused.message).toMatch(
      /larger than the 128 bytes left of the 2048 that the tool results of one request share; send fewer calls per batch/,
    );
    // What the answers really took is all that stays spent.
    const spent = answers.slice(0, 2).reduce((n, r) => n + Buffer.byteLength((r as PromiseFulfilledResult<string>).value), 0);
    expect(budget.left).toBe(2048 - spent);
  });

  it('refuse bad arguments naming the tool’s own argument, and another operator’s venue with FORBIDDEN', async () => {
    const ctx = await contextOf(a);
    const bad = await tool('get_venue')
      .call({ venue_id: 'nope' }, ctx)
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(AppError);
    expect((bad as AppError).code).toBe('VALIDATION_ERROR');
    expect((bad as AppError).details).toEqual([{ field: 'venue_id', message: expect.any(String) }]);
    const limit = await tool('list_venues')
      .call({ limit: 201 }, ctx)
      .catch((e: unknown) => e);
    expect((limit as AppError).details).toEqual([{ field: 'limit', message: expect.stringContaining('200') }]);
    const theirs = await newVenue(api, b.key);
    const forbidden = await tool('get_venue')
      .call({ venue_id: theirs.id }, ctx)
      .catch((e: unknown) => e);
    expect((forbidden as AppError).code).toBe('FORBIDDEN');
    const missing = await tool('get_telemetry')
      .call({ venue_id: randomUUID(), keys: 'co2', startTs: 0, endTs: 1000 }, ctx)
      .catch((e: unknown) => e);
    expect((missing as AppError).code).toBe('NOT_FOUND');
  });
});
