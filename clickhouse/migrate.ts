import { repoPath } from '../lib/paths.js';
import { readMigrations, runMigrations, splitStatements, type MigrationReport, type MigrationTarget } from '../lib/migrations.js';
import { chExec, chRows, chsql, clusterOf, raw } from './client.js';
import type { Ch, ChCluster } from './client.js';

export const CLICKHOUSE_MIGRATIONS = repoPath('clickhouse', 'migrations');

/** Executes one statement on some ClickHouse engine (the server over HTTP, or chdb in tests). */
export type ChExecutor = {
  exec(statement: string): Promise<void>;
  query<T>(statement: string): Promise<T[]>;
  /** Set for a client in cluster mode (CLICKHOUSE_CLUSTER): the migrations then go to every node. */
  cluster?: ChCluster;
};

export function serverExecutor(ch: Ch): ChExecutor {
  const cluster = clusterOf(ch);
  return {
    exec: (s) => chExec(ch, s),
    query: <T>(s: string) => chRows<T>(ch, raw(s)),
    ...(cluster ? { cluster } : {}),
  };
}

/**
 * 18.16 has no `ADD COLUMN IF NOT EXISTS`. A file re-run after a crash between its ALTER and the
 * ledger insert would fail on the existing column, so such a statement is skipped when
 * system.columns already lists the column.
 */
async function columnAlreadyAdded(engine: ChExecutor, statement: string): Promise<boolean> {
  const m = /^ALTER\s+TABLE\s+(\w+)\.(\w+)\s+ADD\s+COLUMN\s+(\w+)/i.exec(statement);
  if (!m) return false;
  const [, database, table, column] = m;
  const found = await engine.query<{ n: number | string }>(
    chsql`SELECT count() AS n FROM system.columns WHERE database = ${database} AND table = ${table} AND name = ${column}`.text,
  );
  return Number(found[0]?.n ?? 0) > 0;
}

/**
 * Applies the ClickHouse migrations to `database`. Statements are idempotent DDL (IF NOT EXISTS,
 * or an ADD COLUMN checked first), so a file interrupted half-way is simply re-run.
 */
export async function migrateClickhouse(engine: ChExecutor, database: string, dir = CLICKHOUSE_MIGRATIONS): Promise<MigrationReport> {
  if (engine.cluster) return migrateCluster(engine.cluster, database, dir);
  const db = raw(database);
  await engine.exec(`CREATE DATABASE IF NOT EXISTS ${database}`);
  const target: MigrationTarget = {
    async applied() {
      await engine.exec(
        chsql`CREATE TABLE IF NOT EXISTS ${db}.schema_migrations (version UInt32, name String, checksum String, applied_at DateTime('UTC')) ENGINE = MergeTree ORDER BY version`
          .text,
      );
      const done = await engine.query<{ version: number | string; checksum: string }>(
        chsql`SELECT version, checksum FROM ${db}.schema_migrations`.text,
      );
      return new Map(done.map((r) => [Number(r.version), r.checksum]));
    },
    async apply(m) {
      for (const statement of splitStatements(m.sql.replaceAll('{db}', database))) {
        if (await columnAlreadyAdded(engine, statement)) continue;
        await engine.exec(statement);
      }
      await engine.exec(
        chsql`INSERT INTO ${db}.schema_migrations (version, name, checksum, applied_at) VALUES (${m.version}, ${m.name}, ${m.checksum}, now())`
          .text,
      );
    },
  };
  return runMigrations(target, readMigrations(dir));
}

// ---------------------------------------------------------------- cluster mode

/** One node of the cluster, as the migrator reaches it. */
interface ClusterNode {
  url: string;
  engine: ChExecutor;
  shard: string;
  replica: string;
  close(): Promise<void>;
}

const MERGE_TREE_CREATE =
  /^CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+(\w+)\.(\w+)\s*\(([\s\S]*?)\)\s*ENGINE\s*=\s*(\w*MergeTree)(?:\(([^)]*)\))?/i;

/**
 * The replicated form of a MergeTree-family CREATE TABLE: `ENGINE = XMergeTree(args)` becomes
 * `ENGINE = ReplicatedXMergeTree('/clickhouse/tables/{shard}/<db>/<table>', '{replica}', args)`;
 * `{shard}` and `{replica}` are each node's macros. Anything else is returned as it is.
 */
export function replicatedCreate(statement: string): string {
  const m = MERGE_TREE_CREATE.exec(statement);
  if (!m) return statement;
  const [whole, database, table, , engine, args] = m;
  const zkArgs = `'/clickhouse/tables/{shard}/${database}/${table}', '{replica}'${args?.trim() ? `, ${args.trim()}` : ''}`;
  const head = whole.slice(0, whole.search(/ENGINE\s*=\s*\w*MergeTree(?:\([^)]*\))?$/i));
  return `${head}ENGINE = Replicated${engine}(${zkArgs})${statement.slice(whole.length)}`;
}

/**
 * The sharding key of a Distributed table: the venue wherever a table has one, so a venue's raw
 * rows, rollups (written by views on the shard of their source) and derived rows share one shard;
 * derive_progress by its job name (its versions must meet in one shard's FINAL/argMax).
 */
function shardingKey(columns: Set<string>): string {
  if (columns.has('venue_id')) return 'cityHash64(toString(venue_id))';
  if (columns.has('name')) return 'cityHash64(name)';
  if (columns.has('operator_id')) return 'cityHash64(toString(operator_id))';
  return 'rand()';
}

async function columnsOf(node: ClusterNode, database: string, table: string): Promise<Set<string>> {
  const rows = await node.engine.query<{ name: string }>(
    chsql`SELECT name FROM system.columns WHERE database = ${database} AND table = ${table}`.text,
  );
  return new Set(rows.map((r) => r.name));
}

async function tableExists(node: ClusterNode, database: string, table: string): Promise<boolean> {
  const rows = await node.engine.query<{ n: number | string }>(
    chsql`SELECT count() AS n FROM system.tables WHERE database = ${database} AND name = ${table}`.text,
  );
  return Number(rows[0]?.n ?? 0) > 0;
}

async function distributedCreate(node: ClusterNode, cluster: string, dist: string, local: string, table: string): Promise<void> {
  const key = shardingKey(await columnsOf(node, local, table));
  await node.engine.exec(
    `CREATE TABLE IF NOT EXISTS ${dist}.${table} AS ${local}.${table} ENGINE = Distributed(${cluster}, ${local}, ${table}, ${key})`,
  );
}

/**
 * Applies one migration statement (already naming the local database) to every node, with the
 * Distributed tables that go with it:
 * - CREATE TABLE of a MergeTree family engine: its Replicated form, then a Distributed table of the
 *   same name in the service's database;
 * - ALTER TABLE … ADD COLUMN: on the local table (replicated by ZooKeeper to the other replicas; a
 *   node that has the column already skips it) and on the Distributed table;
 * - DROP TABLE: the local table and the Distributed one;
 * - RENAME TABLE: the local tables; the Distributed tables of the old names are dropped and made
 *   anew for the new names;
 * - INSERT … SELECT: on the first replica of each shard only (replication copies it; run on every
 *   replica it would double an aggregate);
 * - anything else (materialized views, TRUNCATE): as it is, on every node.
 */
async function applyOnCluster(nodes: ClusterNode[], cluster: string, dist: string, local: string, statement: string): Promise<void> {
  const create = MERGE_TREE_CREATE.exec(statement);
  if (create) {
    const table = create[2]!;
    const replicated = replicatedCreate(statement);
    await Promise.all(nodes.map((node) => node.engine.exec(replicated)));
    await Promise.all(nodes.map((node) => distributedCreate(node, cluster, dist, local, table)));
    return;
  }
  const alter = /^ALTER\s+TABLE\s+(\w+)\.(\w+)\s+ADD\s+COLUMN\s+(\w+)/i.exec(statement);
  if (alter) {
    const [, , table, column] = alter;
    const altered = new Set<string>();
    for (const node of nodes) {
      // The other replicas of a shard receive the column through ZooKeeper: wait for it a while.
      const deadline = Date.now() + (altered.has(node.shard) ? 30_000 : 0);
      altered.add(node.shard);
      for (;;) {
        if ((await columnsOf(node, local, table!)).has(column!)) break;
        if (Date.now() >= deadline) {
          await node.engine.exec(statement);
          break;
        }
        await new Promise((r) => setTimeout(r, 500));
      }
      if (await tableExists(node, dist, table!)) {
        const distAlter = statement.replace(new RegExp(`^(ALTER\\s+TABLE\\s+)${local}\\.`, 'i'), `$1${dist}.`);
        if (!(await columnAlreadyAdded(node.engine, distAlter))) await node.engine.exec(distAlter);
      }
    }
    return;
  }
  const drop = /^DROP\s+TABLE\s+IF\s+EXISTS\s+(\w+)\.(\w+)\s*$/i.exec(statement);
  if (drop) {
    await Promise.all(
      nodes.map(async (node) => {
        await node.engine.exec(`DROP TABLE IF EXISTS ${dist}.${drop[2]}`);
        await node.engine.exec(statement);
      }),
    );
    return;
  }
  if (/^RENAME\s+TABLE\s/i.test(statement)) {
    const pairs = [...statement.matchAll(/(\w+)\.(\w+)\s+TO\s+(\w+)\.(\w+)/gi)].map((m) => ({ from: m[2]!, to: m[4]! }));
    for (const node of nodes) {
      await node.engine.exec(statement);
      for (const { from } of pairs) await node.engine.exec(`DROP TABLE IF EXISTS ${dist}.${from}`);
      for (const { to } of pairs) await distributedCreate(node, cluster, dist, local, to);
    }
    return;
  }
  if (/^INSERT\s/i.test(statement)) {
    const seen = new Set<string>();
    for (const node of nodes) {
      if (seen.has(node.shard)) continue;
      seen.add(node.shard);
      await node.engine.exec(statement);
    }
    return;
  }
  const truncate = /^TRUNCATE\s+TABLE\s+(\w+)\.(\w+)\s*$/i.exec(statement);
  if (truncate) {
    // 18.16 forwards a TRUNCATE on a follower to the shard's leader replica as the `default` user
    // without a password, which a protected server refuses: it is sent to each shard's leader.
    for (const node of await leaders(nodes, local, truncate[2]!)) await node.engine.exec(statement);
    return;
  }
  // Independent per node (views, and DDL the nodes apply alike): all at once.
  await Promise.all(nodes.map((node) => node.engine.exec(statement)));
}

/** The nodes that lead `table`'s replication in their shard (waits a while for an election). */
async function leaders(nodes: ClusterNode[], database: string, table: string): Promise<ClusterNode[]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const out: ClusterNode[] = [];
    for (const node of nodes) {
      const rows = await node.engine.query<{ is_leader: number | string }>(
        chsql`SELECT is_leader FROM system.replicas WHERE database = ${database} AND table = ${table}`.text,
      );
      if (Number(rows[0]?.is_leader ?? 0) === 1) out.push(node);
    }
    const shards = new Set(nodes.map((n) => n.shard));
    if (new Set(out.map((n) => n.shard)).size === shards.size || Date.now() > deadline) return out;
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * Cluster mode: the migrations, statement by statement, on every node of the cluster, into
 * `<database>_local` (replicated tables and their views), with the Distributed tables in `database`.
 * The migrator talks to each node itself rather than through `ON CLUSTER` (which needs the
 * servers' <distributed_ddl> queue and waits on every node anyway): the same statements, errors
 * named by node, and no task queue left behind by a node that was away. Each node keeps its own
 * ledger (`<database>_local.schema_migrations`, not replicated); a migration counts as applied when
 * every node lists it, and re-runs everywhere otherwise (statements are idempotent; the INSERTs of
 * 0006 and 0007 copy from tables that are empty when the cluster is new).
 */
async function migrateCluster(cluster: ChCluster, database: string, dir: string): Promise<MigrationReport> {
  const local = cluster.localDatabase(database);
  const nodes: ClusterNode[] = [];
  try {
    for (const url of cluster.nodes) {
      const ch = cluster.nodeClient(url, null, { requestTimeoutMs: 3_600_000 });
      const engine = serverExecutor(ch);
      delete engine.cluster;
      const macros = await engine.query<{ macro: string; substitution: string }>('SELECT macro, substitution FROM system.macros');
      const macro = (k: string) => macros.find((r) => r.macro === k)?.substitution ?? '';
      nodes.push({ url, engine, shard: macro('shard'), replica: macro('replica'), close: () => ch.close() });
    }
    // Statement by statement across the nodes: a replica is created with the columns the others
    // have in ZooKeeper at that point (it refuses a structure that differs).
    for (const node of nodes) {
      await node.engine.exec(`CREATE DATABASE IF NOT EXISTS ${local}`);
      await node.engine.exec(`CREATE DATABASE IF NOT EXISTS ${database}`);
    }
    const ledger = raw(`${local}.schema_migrations`);
    const target: MigrationTarget = {
      async applied() {
        const perNode: Array<Map<number, string>> = [];
        for (const node of nodes) {
          await node.engine.exec(
            chsql`CREATE TABLE IF NOT EXISTS ${ledger} (version UInt32, name String, checksum String, applied_at DateTime('UTC')) ENGINE = MergeTree ORDER BY version`
              .text,
          );
          const done = await node.engine.query<{ version: number | string; checksum: string }>(
            chsql`SELECT version, checksum FROM ${ledger}`.text,
          );
          perNode.push(new Map(done.map((r) => [Number(r.version), r.checksum])));
        }
        const [first, ...rest] = perNode;
        return new Map([...(first ?? new Map<number, string>())].filter(([v]) => rest.every((m) => m.has(v))));
      },
      async apply(m) {
        for (const statement of splitStatements(m.sql.replaceAll('{db}', local))) {
          await applyOnCluster(nodes, cluster.name, database, local, statement);
        }
        for (const node of nodes) {
          await node.engine.exec(
            chsql`INSERT INTO ${ledger} (version, name, checksum, applied_at) VALUES (${m.version}, ${m.name}, ${m.checksum}, now())`.text,
          );
        }
      },
    };
    return await runMigrations(target, readMigrations(dir));
  } finally {
    await Promise.all(nodes.map((n) => n.close()));
  }
}
