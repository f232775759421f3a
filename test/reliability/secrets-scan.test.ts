import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createReadStream, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chRows, chsql, createCh, raw, type Ch } from '../../clickhouse/client.js';
import { repoPath } from '../../lib/paths.js';
import { testConfig } from '../support/env.js';
import { request } from '../support/http.js';
import { Client, freePort, sleep } from '../edge/support.js';

/**
 * After real traffic through the api, edge and pipeline processes (processors included), no log
 * line and no Postgres or ClickHouse table of the run holds an API key, a connector secret or a
 * raw device MAC. The test makes its own traffic with known values first, so it does not depend on
 * which test files ran before it.
 */

const cfg = testConfig();
const prefix = `${cfg.KAFKA_TOPIC_PREFIX}.sec-${randomUUID().slice(0, 8)}`;
const env = {
  ...process.env,
  KAFKA_TOPIC_PREFIX: prefix,
  REDIS_KEY_PREFIX: `${prefix}:`,
  LOG_LEVEL: 'debug',
  PROCESSOR_TICK_MS: '300',
  SHUTDOWN_TIMEOUT_MS: '15000',
};

interface Proc {
  child: ChildProcess;
  output: string[];
}
const procs: Proc[] = [];

function start(entry: string, extra: Record<string, string>): Proc {
  const child = spawn(process.execPath, ['node_modules/vite-node/vite-node.mjs', entry], {
    env: { ...env, ...extra },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const proc = { child, output: [] as string[] };
  child.stdout!.on('data', (d: Buffer) => proc.output.push(d.toString('utf8')));
  child.stderr!.on('data', (d: Buffer) => proc.output.push(d.toString('utf8')));
  procs.push(proc);
  return proc;
}

async function stop(proc: Proc): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return;
  const exited = new Promise((resolve) => proc.child.on('exit', resolve));
  proc.child.kill('SIGTERM');
  await Promise.race([exited, sleep(20_000)]);
  if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGKILL');
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await probe().catch(() => undefined);
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(250);
  }
}

/** Known values the traffic carries; none may be found at rest or in a log. */
const needles = new Map<string, string>();
const hex = (n: number) => randomBytes(n).toString('hex');
const secret = (what: string) => {
  const value = `s3cr3t-${what}-${hex(8)}`;
  needles.set(value, `connector secret ${what}`);
  return value;
};
/** A device MAC, sent in the given spelling; all three spellings become needles. */
function mac(spelling: 'colon' | 'dash' | 'bare', upper: boolean): string {
  const pairs = hex(6).match(/../g)!;
  for (const form of [pairs.join(':'), pairs.join('-'), pairs.join('')]) needles.set(form, `raw MAC ${pairs.join(':')}`);
  const sent = spelling === 'colon' ? pairs.join(':') : spelling === 'dash' ? pairs.join('-') : pairs.join('');
  return upper ? sent.toUpperCase() : sent;
}

let apiUrl = '';
let edgeUrl = '';
let ch: Ch;
let venueId = '';
let zoneId = '';

beforeAll(async () => {
  const [apiPort, edgePort] = [await freePort(), await freePort()];
  apiUrl = `http://127.0.0.1:${apiPort}`;
  edgeUrl = `ws://127.0.0.1:${edgePort}/ws`;
  start('apps/api/main.ts', { API_HOST: '127.0.0.1', API_PORT: String(apiPort) });
  start('apps/edge/main.ts', { EDGE_HOST: '127.0.0.1', EDGE_PORT: String(edgePort) });
  start('apps/pipeline/main.ts', {});
  ch = createCh(cfg);
  await waitFor('the api', async () => ((await request(`${apiUrl}/health`)).status === 200 ? true : undefined));
}, 120_000);

afterAll(async () => {
  for (const proc of procs) await stop(proc);
  await ch?.close();
});

describe('secrets at rest and in logs', () => {
  it('makes traffic with known keys, connector secrets and raw MACs, then finds none of them in any log or table', async () => {
    const admin = { 'x-admin-key': cfg.ADMIN_SECRET };
    needles.set(cfg.ADMIN_SECRET, 'admin key');

    // Keys: one created, then rotated (both are needles), and a near miss of the live one.
    const created = await request(`${apiUrl}/api/operators`, {
      headers: admin,
      json: { name: 'Secret keeper', email: `sec-${hex(4)}@example.com`, plan: 'pro' },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    needles.set(created.body.api_key, 'api key (rotated)');
    const rotated = await request(`${apiUrl}/api/keys/rotate`, { key: created.body.api_key, method: 'POST' });
    expect(rotated.status, JSON.stringify(rotated.body)).toBe(200);
    const key: string = rotated.body.api_key;
    needles.set(key, 'api key');
    const nearMiss = key.slice(0, -4) + (key.endsWith('aaaa') ? 'bbbb' : 'aaaa');
    needles.set(nearMiss, 'a refused api key');
    expect((await request(`${apiUrl}/api/venues`, { key: nearMiss })).status).toBe(401);
    expect((await request(`${apiUrl}/api/venues`, { key: created.body.api_key })).status).toBe(401);

    const venue = await request(`${apiUrl}/api/venues`, { key, json: { name: 'Secret venue', timezone: 'Europe/Berlin' } });
    expect(venue.status).toBe(201);
    venueId = venue.body.id;
    const zone = await request(`${apiUrl}/api/venues/${venueId}/zones`, {
      key,
      json: { slug: 'door', name: 'Door', type: 'entrance', capacity: 5 },
    });
    expect(zone.status).toBe(201);
    zoneId = zone.body.id;

    // Every connector's secrets, created and then updated with new values.
    const configs: Record<string, () => Record<string, unknown>> = {
      meraki: () => ({ api_key: secret('meraki-api-key'), org_id: 'org-1', webhook_secret: secret('meraki-webhook') }),
      aruba: () => ({
        mode: 'central',
        base_url: 'https://central.example.com',
        customer_id: 'c1',
        client_id: 'id1',
        client_secret: secret('aruba-client'),
        streaming_key: secret('aruba-stream'),
      }),
      unifi: () => ({ controller_url: 'https://unifi.example.com', username: 'admin', password: secret('unifi-password') }),
      mywifi: () => ({ dashboard_subdomain: 'venue', app_secret: secret('mywifi-app') }),
      square: () => ({
        location_id: 'L1',
        access_token: secret('square-token'),
        webhook_signature_key: secret('square-sig'),
        notification_url: 'https://hooks.example.com/square',
      }),
      density: () => ({
        api_token: secret('density-token'),
        webhook_header_name: 'X-Density',
        webhook_header_value: secret('density-header'),
      }),
      verkada: () => ({ org_id: 'o1', api_key: secret('verkada-key'), webhook_secret: secret('verkada-webhook') }),
    };
    const integrations: Record<string, string> = {};
    for (const [connector, config] of Object.entries(configs)) {
      const res = await request(`${apiUrl}/api/venues/${venueId}/integrations`, {
        key,
        json: { connector_type: connector, config: config() },
      });
      expect(res.status, `${connector}: ${JSON.stringify(res.body)}`).toBe(201);
      integrations[connector] = res.body.id;
      const upd = await request(`${apiUrl}/api/venues/${venueId}/integrations/${res.body.id}`, {
        key,
        method: 'PUT',
        json: { config: config() },
      });
      expect(upd.status, `${connector}: ${JSON.stringify(upd.body)}`).toBe(200);
    }
    // A refused config carrying a secret (bad URL next to it) must not be logged either.
    const refused = await request(`${apiUrl}/api/venues/${venueId}/integrations`, {
      key,
      json: { connector_type: 'unifi', config: { controller_url: 'http://plain', username: 'u', password: secret('refused-password') } },
    });
    expect(refused.status).toBe(400);

    // A subscriber on the edge (the key in the URL), and one with a refused key.
    const ws = await Client.connected(edgeUrl, key);
    await ws.subscribe(1, venueId, ['occupancy', 'entries', 'devices']);
    const refusedWs = await Client.open(edgeUrl, nearMiss);
    await refusedWs.waitClose();

    // Raw MACs in every spelling through every device connector, once with an Idempotency-Key and resent.
    const ts = () => new Date(Date.now() - 2_000).toISOString();
    const batches: Array<{ connector: string; events: unknown[] }> = [
      { connector: 'meraki', events: [{ type: 'device_seen', timestamp: ts(), payload: { clientMac: mac('colon', true), rssi: 40 } }] },
      {
        connector: 'aruba',
        events: [{ type: 'device_seen', timestamp: ts(), payload: { sta_eth_mac: mac('dash', false), associated: true } }],
      },
      {
        connector: 'unifi',
        events: [
          { type: 'device_seen', timestamp: ts(), payload: { mac: mac('bare', false) } },
          { type: 'device_left', timestamp: ts(), payload: { mac: mac('colon', false) } },
        ],
      },
      { connector: 'mywifi', events: [{ type: 'device_seen', timestamp: ts(), payload: { mac: mac('dash', true), consent: true } }] },
      // Bad events carrying a MAC: the rejection reasons and any dead-letter must not hold it.
      {
        connector: 'meraki',
        events: [
          { type: 'device_seen', timestamp: 'yesterday', payload: { clientMac: mac('bare', true) } },
          { type: 'device_seen', timestamp: ts(), payload: { clientMac: `${mac('colon', false)}x` } },
        ],
      },
      {
        connector: 'density',
        events: [{ type: 'entry', timestamp: ts(), payload: { space_id: 'spc_1', doorway_id: 'drw_1', zone: 'door', count: 3 } }],
      },
      { connector: 'square', events: [{ type: 'heartbeat', timestamp: ts(), payload: { integration_id: integrations.square } }] },
    ];
    let accepted = 0;
    for (const [i, batch] of batches.entries()) {
      const body = { venue_id: venueId, connector_type: batch.connector, events: batch.events };
      const idem = i % 2 === 0 ? { 'idempotency-key': `sec-${hex(8)}` } : undefined;
      for (let attempt = 0; attempt < 2; attempt++) {
        const res = await request(`${apiUrl}/ingest`, { key, headers: idem, json: body });
        expect(res.status, JSON.stringify(res.body)).toBe(202);
        if (attempt === 0) accepted += res.body.accepted;
      }
    }
    expect(accepted).toBeGreaterThanOrEqual(7);

    // MCP with the key, and a tool call.
    const mcp = await fetch(`${apiUrl}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'get_venue', arguments: { venue_id: venueId } },
      }),
    });
    expect(mcp.status).toBe(200);

    // The pipeline stored the events and the processors ran (occupancy from the door counts).
    await waitFor('events in ClickHouse', async () => {
      const [row] = await chRows<{ n: number }>(ch, chsql`SELECT toUInt32(count()) AS n FROM events WHERE venue_id = toUUID(${venueId})`);
      return row && row.n >= accepted ? row.n : undefined;
    });
    await ws.next((m) => m.data?.venueId === venueId, 30_000);
    ws.close();
    await sleep(1_500);
    for (const proc of procs) await stop(proc);

    const found: string[] = [];
    // Controls: values each source must show, so a scan that reads nothing cannot pass.
    const controls = new Set<string>();
    const look = (where: string, text: string) => {
      const lower = text.toLowerCase();
      if (lower.includes(venueId) || lower.includes(zoneId)) controls.add(where.split(' ')[0]!);
      for (const [needle, what] of needles) if (lower.includes(needle.toLowerCase())) found.push(`${what} in ${where}`);
    };

    // 1. The output of every process this test ran.
    for (const [i, proc] of procs.entries()) look(`output of process ${i} (${proc.child.spawnargs.at(-1)})`, proc.output.join(''));
    expect(procs.every((p) => p.output.join('').length > 0)).toBe(true);

    // 2. Every *.log of the local stack (Kafka's segment files: this test's topics only).
    for (const file of stackLogs(repoPath('.stack'), prefix)) {
      const chunks: string[] = [];
      for await (const chunk of createReadStream(file)) chunks.push((chunk as Buffer).toString('latin1'));
      look(`${file.includes(join('kafka', 'data')) ? 'kafka' : 'log'} ${file}`, chunks.join(''));
    }

    // 3. Every text, jsonb and bytea column of every table of the run's Postgres database.
    const db = new pg.Client({ connectionString: cfg.DATABASE_URL });
    await db.connect();
    try {
      const { rows: tables } = await db.query<{ schema: string; name: string }>(
        `SELECT DISTINCT table_schema AS schema, table_name AS name FROM information_schema.columns
          WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND data_type IN ('text', 'jsonb', 'json', 'bytea', 'character varying', 'ARRAY', 'USER-DEFINED')`,
      );
      expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(['operators', 'api_keys', 'integrations', 'venues']));
      for (const t of tables) {
        const { rows } = await db.query<{ row: string }>(`SELECT t::text AS row FROM "${t.schema}"."${t.name}" t`);
        const text = rows.map((r) => r.row).join('\n');
        look(`Postgres ${t.schema}.${t.name}`, text);
        // bytea shows as hex in a row's text form.
        for (const [needle, what] of needles)
          if (text.includes(Buffer.from(needle).toString('hex'))) found.push(`${what} (as bytes) in Postgres ${t.name}`);
      }
    } finally {
      await db.end();
    }

    // 4. Every String column of every table of the run's ClickHouse database.
    const columns = await chRows<{ table: string; name: string; type: string }>(
      ch,
      chsql`SELECT table, name, type FROM system.columns WHERE database = ${cfg.CLICKHOUSE_DATABASE} ORDER BY table, name`,
    ).then((all) => all.filter((c) => /^(Array\()?(Nullable\(|LowCardinality\()*(String|FixedString)/.test(c.type)));
    const engines = new Map(
      (
        await chRows<{ name: string; engine: string }>(
          ch,
          chsql`SELECT name, engine FROM system.tables WHERE database = ${cfg.CLICKHOUSE_DATABASE}`,
        )
      ).map((t) => [t.name, t.engine]),
    );
    expect(columns.some((c) => c.table === 'events')).toBe(true);
    for (const c of columns) {
      if (/View|Kafka/.test(engines.get(c.table) ?? '')) continue;
      const value = c.type.startsWith('Array(') ? `arrayStringConcat(\`${c.name}\`, ' ')` : `toString(\`${c.name}\`)`;
      const rows = await chRows<{ v: string }>(ch, raw(`SELECT DISTINCT ${value} AS v FROM \`${cfg.CLICKHOUSE_DATABASE}\`.\`${c.table}\``));
      look(`ClickHouse ${c.table}.${c.name}`, rows.map((r) => r.v).join('\n'));
    }

    expect([...controls].sort()).toEqual(expect.arrayContaining(['ClickHouse', 'Postgres', 'kafka', 'output']));
    expect(needles.size).toBeGreaterThan(20);
    expect(found).toEqual([]);
  }, 240_000);
});

/** `*.log` files under the stack directory; Kafka's partition directories only for this test's topics. */
function stackLogs(dir: string, topicPrefix: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    let stat;
    try {
      stat = statSync(path);
    } catch {
      continue;
    }
    if (stat.isDirectory()) {
      // Kafka's data directories, of the single broker and of the cluster's nodes.
      if (name === 'data' && /kafka/.test(relative(repoPath('.stack'), dir))) {
        for (const part of readdirSync(path)) if (part.startsWith(topicPrefix)) out.push(...stackLogs(join(path, part), topicPrefix));
        continue;
      }
      out.push(...stackLogs(path, topicPrefix));
    } else if (name.endsWith('.log')) {
      out.push(path);
    }
  }
  return out;
}
