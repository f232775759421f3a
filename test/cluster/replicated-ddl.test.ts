import { describe, expect, it } from 'vitest';
import { readMigrations, splitStatements } from '../../lib/migrations.js';
import { CLICKHOUSE_MIGRATIONS, replicatedCreate } from '../../clickhouse/migrate.js';
import { CLUSTER_SETTINGS, clusterConfig, clusterOf, createCh } from '../../clickhouse/client.js';
import { testConfig } from '../support/env.js';

// Cluster mode's statement rewriting and configuration, without a cluster (runs in every `npm test`;
// test/cluster/clickhouse-cluster.test.ts runs the same on the real one, opt-in).

const creates = readMigrations(CLICKHOUSE_MIGRATIONS)
  .flatMap((m) => splitStatements(m.sql.replaceAll('{db}', 'venue_local')))
  .filter((s) => /^CREATE\s+TABLE\s/i.test(s));

describe('cluster mode without a cluster', () => {
  it('turns every MergeTree-family table of the migrations into its Replicated form, keeping the engine arguments and the rest', () => {
    expect(creates.length).toBeGreaterThan(10);
    for (const statement of creates) {
      const out = replicatedCreate(statement);
      const table = /venue_local\.(\w+)/.exec(statement)![1]!;
      const engine = /ENGINE\s*=\s*(\w*MergeTree)(?:\(([^)]*)\))?/.exec(statement)!;
      const args = engine[2]?.trim();
      expect(out, table).toContain(
        `ENGINE = Replicated${engine[1]}('/clickhouse/tables/{shard}/venue_local/${table}', '{replica}'${args ? `, ${args}` : ''})`,
      );
      // Columns, PARTITION BY, ORDER BY and SETTINGS are untouched.
      expect(out.replace(/ENGINE = Replicated[\s\S]*?\)(?=\s|$)/, ''), table).toBe(
        statement.replace(/ENGINE\s*=\s*\w*MergeTree(?:\([^)]*\))?/, ''),
      );
    }
  });

  it('leaves views and other statements as they are', () => {
    const view = 'CREATE MATERIALIZED VIEW IF NOT EXISTS venue_local.v TO venue_local.t AS SELECT 1 FROM venue_local.events';
    expect(replicatedCreate(view)).toBe(view);
    expect(replicatedCreate('DROP TABLE IF EXISTS venue_local.t')).toBe('DROP TABLE IF EXISTS venue_local.t');
  });

  it('is off by default (one server, no cluster settings) and on with CLICKHOUSE_CLUSTER', async () => {
    const single = testConfig();
    expect(single.CLICKHOUSE_CLUSTER).toBe('');
    expect(clusterConfig(single)).toBeUndefined();
    const ch = createCh(single);
    expect(clusterOf(ch)).toBeUndefined();
    await ch.close();

    const cfg = testConfig({ CLICKHOUSE_CLUSTER: 'c1', CLICKHOUSE_CLUSTER_NODES: 'http://127.0.0.1:1,http://127.0.0.1:2' });
    const clustered = createCh(cfg);
    const cluster = clusterOf(clustered)!;
    expect(cluster.name).toBe('c1');
    expect(cluster.nodes).toEqual(['http://127.0.0.1:1', 'http://127.0.0.1:2']);
    expect(cluster.localDatabase('venue')).toBe('venue_local');
    expect(CLUSTER_SETTINGS).toMatchObject({ insert_distributed_sync: 1, load_balancing: 'in_order', distributed_product_mode: 'local' });
    await clustered.close();
    expect(() => testConfig({ CLICKHOUSE_CLUSTER: 'c1', CLICKHOUSE_CLUSTER_NODES: 'not a url' })).toThrow();
  });
});
