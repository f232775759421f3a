import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { billingPeriod, billingPeriodStart, countUsage, reserveIngestEvents } from '../../domain/limits/quotas.js';
import type { Operator } from '../../domain/tenants/operators.js';
import type { Plan } from '../../domain/tenants/plans.js';
import { startApi, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, type TestOperator } from '../support/tenants.js';

const d = (iso: string) => new Date(iso);
const iso = (date: Date) => date.toISOString();

describe('billingPeriod', () => {
  it('runs from the anchor day to the same day next month', () => {
    const p = billingPeriod(d('2025-03-10T08:00:00Z'), d('2025-05-20T00:00:00Z'));
    expect([iso(p.start), iso(p.end)]).toEqual(['2025-05-10T08:00:00.000Z', '2025-06-10T08:00:00.000Z']);
  });

  it('puts a 31st anchor on the last day of shorter months, and back on the 31st after them', () => {
    const anchor = d('2024-01-31T10:00:00Z');
    const cases: Array<[string, string, string]> = [
      ['2024-02-15T00:00:00Z', '2024-01-31T10:00:00.000Z', '2024-02-29T10:00:00.000Z'],
      ['2024-02-29T10:00:00Z', '2024-02-29T10:00:00.000Z', '2024-03-31T10:00:00.000Z'],
      ['2024-03-30T23:59:59Z', '2024-02-29T10:00:00.000Z', '2024-03-31T10:00:00.000Z'],
      ['2024-04-30T12:00:00Z', '2024-04-30T10:00:00.000Z', '2024-05-31T10:00:00.000Z'],
      ['2025-02-28T09:59:59Z', '2025-01-31T10:00:00.000Z', '2025-02-28T10:00:00.000Z'],
      ['2025-02-28T10:00:00Z', '2025-02-28T10:00:00.000Z', '2025-03-31T10:00:00.000Z'],
    ];
    for (const [now, start, end] of cases) {
      const p = billingPeriod(anchor, d(now));
      expect([iso(p.start), iso(p.end)], now).toEqual([start, end]);
    }
  });

  it('crosses the year end', () => {
    const anchor = d('2024-12-31T00:00:00Z');
    expect(iso(billingPeriodStart(anchor, d('2025-01-15T00:00:00Z')))).toBe('2024-12-31T00:00:00.000Z');
    expect(iso(billingPeriod(anchor, d('2025-01-15T00:00:00Z')).end)).toBe('2025-01-31T00:00:00.000Z');
    expect(iso(billingPeriodStart(anchor, d('2025-12-31T00:00:00Z')))).toBe('2025-12-31T00:00:00.000Z');
    const mid = d('2024-11-15T12:00:00Z');
    expect(iso(billingPeriodStart(mid, d('2025-01-10T00:00:00Z')))).toBe('2024-12-15T12:00:00.000Z');
    expect(iso(billingPeriod(mid, d('2025-01-10T00:00:00Z')).end)).toBe('2025-01-15T12:00:00.000Z');
  });

  it('respects the time of day and treats a clock before the anchor as the first period', () => {
    const anchor = d('2025-01-15T10:00:00Z');
    expect(iso(billingPeriodStart(anchor, d('2025-03-15T09:59:59Z')))).toBe('2025-02-15T10:00:00.000Z');
    expect(iso(billingPeriodStart(anchor, d('2025-03-15T10:00:00Z')))).toBe('2025-03-15T10:00:00.000Z');
    expect(iso(billingPeriodStart(anchor, d('2024-12-01T00:00:00Z')))).toBe('2025-01-15T10:00:00.000Z');
  });

  it('tiles time without gaps: start <= now < end, and each end is the next start', () => {
    for (const anchorIso of ['2024-01-31T23:30:00Z', '2024-02-29T00:00:00Z', '2023-08-30T05:00:00Z', '2024-12-31T12:00:00Z']) {
      const anchor = d(anchorIso);
      let start = anchor;
      for (let m = 0; m < 30; m++) {
        const p = billingPeriod(anchor, start);
        expect(p.start.getTime()).toBe(start.getTime());
        expect(p.end.getTime()).toBeGreaterThan(start.getTime());
        const inside = new Date((p.start.getTime() + p.end.getTime()) / 2);
        expect(billingPeriod(anchor, inside)).toEqual(p);
        expect(billingPeriodStart(anchor, new Date(p.end.getTime() - 1)).getTime()).toBe(p.start.getTime());
        start = p.end;
      }
    }
  });
});

let api: RunningApi;
beforeAll(async () => {
  api = await startApi();
});
afterAll(async () => {
  await api.close();
});

async function operatorOf(op: TestOperator): Promise<Operator> {
  const { rows } = await api.services.db.query(`SELECT id, plan, billing_anchor FROM operators WHERE id = $1`, [op.id]);
  return { id: rows[0].id, plan: rows[0].plan as Plan, billingAnchor: rows[0].billing_anchor };
}

/** Sets this billing period's API-call counter directly. */
async function setApiCalls(op: Operator, n: number): Promise<void> {
  await api.services.db.query(
    `INSERT INTO usage_counters (operator_id, period_start, api_calls) VALUES ($1, $2, $3)
     ON CONFLICT (operator_id, period_start) DO UPDATE SET api_calls = EXCLUDED.api_calls`,
    [op.id, billingPeriodStart(op.billingAnchor), n],
  );
}

const usage = async (key: string) => (await request(`${api.url}/api/usage`, { key })).body;
// GET /api/venues is an ordinary metered API call.
const metered = (key: string) => request(`${api.url}/api/venues`, { key });

describe('monthly API-call quota', () => {
  it('counts each metered call once, and not the usage and key endpoints', async () => {
    const op = await newOperator(api);
    expect((await usage(op.key)).apiCalls.used).toBe(0);
    for (let i = 0; i < 3; i++) expect((await metered(op.key)).status).toBe(200);
    await request(`${api.url}/api/keys`, { key: op.key });
    const report = await usage(op.key);
    expect(report.apiCalls).toEqual({ used: 3, quota: 500, remaining: 497, overage: 0, overQuota: 'refused' });
  });

  it('reports the period, plan and quotas', async () => {
    const op = await newOperator(api, 'starter');
    const operator = await operatorOf(op);
    const res = await request(`${api.url}/api/usage`, { key: op.key });
    expect(res.status).toBe(200);
    const period = billingPeriod(operator.billingAnchor);
    expect(res.body).toEqual({
      plan: 'starter',
      planName: 'Team',
      periodStart: iso(period.start),
      resetsAt: iso(period.end),
      apiCalls: { used: 0, quota: 10_000, remaining: 10_000, overage: 0, overQuota: 'billed' },
      mcpQueries: { used: 0, quota: 1_000, remaining: 1_000, overage: 0, overQuota: 'billed' },
      ingestEvents: { used: 0, quota: 100_000, remaining: 100_000, overage: 0, overQuota: 'billed', dropped: 0 },
      maxVenues: 5,
      retentionDays: 90,
    });
  });

  it('stops Free at 500 with 429 QUOTA_EXCEEDED, Retry-After to the period end, and does not count refused calls', async () => {
    const op = await newOperator(api);
    const operator = await operatorOf(op);
    await setApiCalls(operator, 499);
    expect((await metered(op.key)).status).toBe(200);
    const refused = await metered(op.key);
    expect(refused.status).toBe(429);
    const resetsAt = iso(billingPeriod(operator.billingAnchor).end);
    expect(refused.body).toEqual({
      error: expect.stringMatching(/quota of 500 API calls/),
      code: 'QUOTA_EXCEEDED',
      details: { quota: 500, used: 500, resetsAt },
    });
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(Math.abs(retryAfter - (Date.parse(resetsAt) - Date.now()) / 1000)).toBeLessThan(5);
    // Rate-limit headers are still there: the quota check runs after the rate limit.
    expect(refused.headers.get('ratelimit-limit')).toBe('1000');
    // The usage and key endpoints stay reachable over quota.
    const report = await usage(op.key);
    expect(report.apiCalls).toEqual({ used: 500, quota: 500, remaining: 0, overage: 0, overQuota: 'refused' });
    expect((await request(`${api.url}/api/keys`, { key: op.key })).status).toBe(200);
  });

  it('never lets concurrent calls past the Free quota', async () => {
    const op = await newOperator(api);
    await setApiCalls(await operatorOf(op), 495);
    const results = await Promise.all(Array.from({ length: 20 }, () => metered(op.key)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(5);
    expect(results.filter((r) => r.status === 429 && r.body.code === 'QUOTA_EXCEEDED')).toHaveLength(15);
    expect((await usage(op.key)).apiCalls.used).toBe(500);
  });

  it('lets Team and Business go over and counts the overage for billing', async () => {
    for (const [plan, quota] of [
      ['starter', 10_000],
      ['pro', 100_000],
    ] as const) {
      const op = await newOperator(api, plan);
      await setApiCalls(await operatorOf(op), quota);
      expect((await metered(op.key)).status).toBe(200);
      expect((await metered(op.key)).status).toBe(200);
      expect((await usage(op.key)).apiCalls).toEqual({ used: quota + 2, quota, remaining: 0, overage: 2, overQuota: 'billed' });
    }
  });

  it('gives Enterprise no quota but still counts', async () => {
    const op = await newOperator(api, 'enterprise');
    await setApiCalls(await operatorOf(op), 5_000_000);
    expect((await metered(op.key)).status).toBe(200);
    const report = await usage(op.key);
    expect(report.apiCalls).toEqual({ used: 5_000_001, quota: null, remaining: null, overage: 0, overQuota: 'unlimited' });
    expect(report.maxVenues).toBeNull();
  });
});

describe('MCP queries and ingest events', () => {
  it('refuses the 101st MCP query of the month on Free and counts on for Team', async () => {
    const free = await operatorOf(await newOperator(api));
    const team = await operatorOf(await newOperator(api, 'starter'));
    for (let i = 1; i <= 100; i++) expect(await countUsage(api.services.db, free, 'mcp_queries')).toBe(i);
    await expect(countUsage(api.services.db, free, 'mcp_queries')).rejects.toMatchObject({
      status: 429,
      code: 'QUOTA_EXCEEDED',
      message: expect.stringContaining('100 MCP queries'),
      details: { quota: 100, used: 100, resetsAt: expect.any(String) },
    });
    await api.services.db.query(`INSERT INTO usage_counters (operator_id, period_start, mcp_queries) VALUES ($1, $2, 1000)`, [
      team.id,
      billingPeriodStart(team.billingAnchor),
    ]);
    expect(await countUsage(api.services.db, team, 'mcp_queries')).toBe(1001);
  });

  it('reports dropped ingest events on Free', async () => {
    const op = await newOperator(api);
    const operator = await operatorOf(op);
    expect(await reserveIngestEvents(api.services.db, operator, 10_005)).toEqual({ granted: 10_000, dropped: 5 });
    expect((await usage(op.key)).ingestEvents).toEqual({
      used: 10_000,
      quota: 10_000,
      remaining: 0,
      overage: 0,
      overQuota: 'dropped',
      dropped: 5,
    });
  });
});
