import { exec, one, sql, transaction, type Db, type Queryable } from '../client.js';

export type UsageCounter = 'api_calls' | 'mcp_queries';

export interface UsageRow {
  api_calls: number;
  mcp_queries: number;
  ingest_events: number;
  ingest_dropped: number;
}

/**
 * Adds to one counter and returns the new value, in one statement. With a `cap` the row is left
 * alone once the counter has reached it and `undefined` comes back: the caller refuses the call,
 * so refused calls are never counted.
 */
export async function addUsage(
  db: Queryable,
  operatorId: string,
  periodStart: Date,
  counter: UsageCounter,
  n: number,
  cap: number | null = null,
): Promise<number | undefined> {
  // The column name comes from a closed union, never from input.
  const column = counter === 'api_calls' ? 'api_calls' : 'mcp_queries';
  const stmt = sql`INSERT INTO usage_counters (operator_id, period_start, COLUMN)
    SELECT ${operatorId}::uuid, ${periodStart}::timestamptz, ${n}::bigint WHERE ${n} <= ${cap}::bigint OR ${cap}::bigint IS NULL
    ON CONFLICT (operator_id, period_start) DO UPDATE SET COLUMN = usage_counters.COLUMN + EXCLUDED.COLUMN
     WHERE usage_counters.COLUMN + EXCLUDED.COLUMN <= ${cap}::bigint OR ${cap}::bigint IS NULL
    RETURNING COLUMN AS value`;
  const row = await one<{ value: number }>(db, { ...stmt, text: stmt.text.replaceAll('COLUMN', column) });
  return row?.value;
}

/**
 * Reserves up to `requested` ingest events under `cap` (null = no cap); the row lock makes
 * concurrent requests queue, so nothing is ever granted past the cap. Returns how many were granted.
 */
export async function reserveIngest(db: Db, operatorId: string, periodStart: Date, requested: number, cap: number | null): Promise<number> {
  if (cap === null) {
    // Everything is granted: one upsert (one round trip on every ingest request, not five).
    await exec(
      db,
      sql`INSERT INTO usage_counters (operator_id, period_start, ingest_events) VALUES (${operatorId}, ${periodStart}, ${requested})
           ON CONFLICT (operator_id, period_start) DO UPDATE SET ingest_events = usage_counters.ingest_events + EXCLUDED.ingest_events`,
    );
    return requested;
  }
  return transaction(db, async (tx) => {
    await exec(
      tx,
      sql`INSERT INTO usage_counters (operator_id, period_start) VALUES (${operatorId}, ${periodStart}) ON CONFLICT DO NOTHING`,
    );
    const current = await one<{ ingest_events: number }>(
      tx,
      sql`SELECT ingest_events FROM usage_counters WHERE operator_id = ${operatorId} AND period_start = ${periodStart} FOR UPDATE`,
    );
    const granted = cap === null ? requested : Math.max(0, Math.min(requested, cap - current!.ingest_events));
    await exec(
      tx,
      sql`UPDATE usage_counters SET ingest_events = ingest_events + ${granted}, ingest_dropped = ingest_dropped + ${requested - granted}
           WHERE operator_id = ${operatorId} AND period_start = ${periodStart}`,
    );
    return granted;
  });
}

/** Gives back a reservation whose events were never published (never below zero). */
export async function releaseIngest(db: Queryable, operatorId: string, periodStart: Date, granted: number, dropped: number): Promise<void> {
  await exec(
    db,
    sql`UPDATE usage_counters SET ingest_events = GREATEST(0, ingest_events - ${granted}), ingest_dropped = GREATEST(0, ingest_dropped - ${dropped})
         WHERE operator_id = ${operatorId} AND period_start = ${periodStart}`,
  );
}

export async function usageFor(db: Queryable, operatorId: string, periodStart: Date): Promise<UsageRow> {
  return (
    (await one<UsageRow>(
      db,
      sql`SELECT api_calls, mcp_queries, ingest_events, ingest_dropped FROM usage_counters WHERE operator_id = ${operatorId} AND period_start = ${periodStart}`,
    )) ?? { api_calls: 0, mcp_queries: 0, ingest_events: 0, ingest_dropped: 0 }
  );
}
