import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chTsvRows, createCh, raw, tsvField, tsvRows, type Ch } from '../../clickhouse/client.js';
import { migrateClickhouse, serverExecutor, type ChExecutor } from '../../clickhouse/migrate.js';
import { EVENT_COLUMNS, eventTsvLine, insertEvents, type EventRow } from '../../clickhouse/queries/events.js';
import { toRow } from '../../pipeline/sink/rows.js';
import { openChdb } from '../support/chdb.js';
import { testConfig } from '../support/env.js';
import { event } from './harness.js';

/*
 * The sink writes raw events as TabSeparated. Every field must come back as written on both
 * engines, whatever the text holds: tabs, line breaks, backslashes, quotes, escapes that look like
 * TSV's own, non-ASCII.
 */
const NASTY = ['tab\there', 'line\nbreak', 'carriage\rreturn', 'back\\slash', "quote'd", 'already \\t escaped', 'ünïcødé ✓ 😀', '\\', ''];

describe('raw events written as TabSeparated', () => {
  let chdb: ReturnType<typeof openChdb>;
  let server: Ch;
  const operatorId = randomUUID();
  const venueId = randomUUID();
  const rows: EventRow[] = NASTY.map((text, i) => ({
    ...toRow(
      event({
        operatorId,
        venueId,
        ts: Date.UTC(2026, 10, 20, 12, 0, i) + 123,
        type: 'environment',
        device: null,
        metrics: { temperature: -0.5 + i, co2: 1e-7 * i },
        payload: { note: text, nested: { text } },
      }),
      { topic: 'tsv-test', partition: i % 2, offset: String(2n ** 53n + BigInt(i)), index: i },
      { timezone: 'Asia/Kolkata', retentionDays: 90 },
    ),
    zone_id: text,
    device: text,
    metric_names: [text, `k'${i}`],
    metric_values: [i * 1.5, -1e21],
  }));

  beforeAll(async () => {
    chdb = openChdb();
    await migrateClickhouse(chdb.engine, 'default');
    server = createCh(testConfig());
  });
  afterAll(async () => {
    chdb?.close();
    await server?.close();
  });

  const readBack = (engine: ChExecutor) =>
    engine.query<Record<string, unknown>>(
      `SELECT toString(event_id) AS event_id, zone_id, device, metric_names, metric_values, payload, toUInt32(ts) AS ts, toString(local_day) AS local_day,
              ts_ms, toUInt32(received_at) AS received_at, toString(kafka_offset) AS kafka_offset, kafka_index, kafka_topic
         FROM events WHERE operator_id = toUUID('${operatorId}') ORDER BY kafka_index`,
    );
  const expected = rows.map((r) => ({
    event_id: r.event_id,
    zone_id: r.zone_id,
    device: r.device,
    metric_names: r.metric_names,
    metric_values: r.metric_values,
    payload: r.payload,
    ts: r.ts,
    local_day: r.local_day,
    ts_ms: r.ts_ms,
    received_at: r.received_at,
    kafka_offset: r.kafka_offset,
    kafka_index: r.kafka_index,
    kafka_topic: r.kafka_topic,
  }));

  it('come back field for field from ClickHouse 18.16 (the sink’s insert)', async () => {
    await insertEvents(server, rows);
    const got = await readBack(serverExecutor(server));
    expect(
      got.map((r) => ({
        ...r,
        ts_ms: Number(r.ts_ms),
        kafka_index: Number(r.kafka_index),
        ts: Number(r.ts),
        received_at: Number(r.received_at),
      })),
    ).toEqual(expected);
    expect(JSON.parse(String(got[0]!.payload))).toEqual({ note: NASTY[0], nested: { text: NASTY[0] } });
  });

  it('come back field for field from current ClickHouse (chdb), from the same text', async () => {
    await chdb.engine.exec(`INSERT INTO events (${EVENT_COLUMNS.join(', ')}) FORMAT TabSeparated\n${rows.map(eventTsvLine).join('')}`);
    const got = await readBack(chdb.engine);
    expect(
      got.map((r) => ({
        ...r,
        ts_ms: Number(r.ts_ms),
        kafka_index: Number(r.kafka_index),
        ts: Number(r.ts),
        received_at: Number(r.received_at),
      })),
    ).toEqual(expected);
  });

  // The derive job reads String fields as TabSeparated (chTsvRows); ClickHouse escapes them its own way.
  const textsSql = () => `SELECT zone_id, device FROM events WHERE operator_id = toUUID('${operatorId}') ORDER BY kafka_index`;
  const texts = NASTY.map((text) => [text, text]);

  it('read back as TabSeparated, unescaped by tsvField to the same text (ClickHouse 18.16)', async () => {
    const got = await chTsvRows(server, raw(textsSql()), (fields) => fields.map(tsvField));
    expect(got).toEqual(texts);
  });

  it('read back as TabSeparated, unescaped by tsvField to the same text (current ClickHouse, chdb)', () => {
    expect(tsvRows(chdb.tsv(textsSql()), (fields) => fields.map(tsvField))).toEqual(texts);
  });
});
