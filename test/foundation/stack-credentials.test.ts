import fs from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config.js';
import { createRedis } from '../../lib/redis.js';
import { repoPath } from '../../lib/paths.js';
import { ENGINE_DIRS, PRIVATE_DIR_MODE } from '../../scripts/stack/common.mjs';
import { testConfig } from '../support/env.js';

// The local stack's engines (started by the global setup through scripts/stack.mjs) refuse clients
// without the generated passwords, and keep their files out of other users' reach (docs/security.md).
const cfg = testConfig();
const modeOf = (p: string) => fs.statSync(p).mode & 0o777;

async function clickhouse(auth?: string) {
  const res = await fetch(`${cfg.CLICKHOUSE_URL}/?query=${encodeURIComponent('SELECT 1')}`, {
    headers: auth ? { authorization: `Basic ${Buffer.from(auth).toString('base64')}` } : {},
  });
  return { status: res.status, body: await res.text() };
}

/** A Redis connection as given: no retries, no ready check (which would itself be refused). */
function bareRedis(url: string): Redis {
  return new Redis(url, {
    lazyConnect: true,
    enableReadyCheck: false,
    enableOfflineQueue: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
}

describe("the local stack's credentials", () => {
  it('ClickHouse refuses a query without the password or with a wrong one, and answers with it', async () => {
    expect(cfg.CLICKHOUSE_PASSWORD).not.toBe('');
    const anonymous = await clickhouse();
    expect(anonymous.status).toBe(401);
    // 18.16: 194 "Password required"; current ClickHouse: 516 AUTHENTICATION_FAILED.
    expect(anonymous.body).toMatch(/Code: (194|516)/);
    expect((await clickhouse(`${cfg.CLICKHOUSE_USER}:wrong-${cfg.CLICKHOUSE_PASSWORD}`)).status).toBe(401);
    expect(await clickhouse(`${cfg.CLICKHOUSE_USER}:${cfg.CLICKHOUSE_PASSWORD}`)).toEqual({ status: 200, body: '1\n' });
  });

  it('Redis refuses a command without the password (NOAUTH), and answers with it', async () => {
    const url = new URL(cfg.REDIS_URL);
    expect(url.password).not.toBe('');
    url.password = '';
    const anonymous = bareRedis(url.toString());
    try {
      await expect(anonymous.ping()).rejects.toThrow(/NOAUTH/);
    } finally {
      anonymous.disconnect();
    }
    const redis = createRedis(cfg);
    try {
      await redis.connect();
      expect(await redis.ping()).toBe('PONG');
    } finally {
      redis.disconnect();
    }
  });

  it('puts REDIS_PASSWORD into REDIS_URL unless the URL carries a password of its own', () => {
    const env = {
      DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db',
      CLICKHOUSE_URL: 'http://127.0.0.1:8123',
      KAFKA_BROKERS: '127.0.0.1:9092',
      REDIS_URL: 'redis://127.0.0.1:6379',
      ADMIN_SECRET: 'a-long-enough-admin-secret',
      SECRETS_KEY: Buffer.alloc(32, 7).toString('base64'),
      PSEUDONYM_KEY: 'x'.repeat(43),
    };
    expect(loadConfig(env).REDIS_URL).toBe('redis://127.0.0.1:6379');
    expect(loadConfig({ ...env, REDIS_PASSWORD: 'p@ss:word' }).REDIS_URL).toBe('redis://:p%40ss%3Aword@127.0.0.1:6379');
    expect(loadConfig({ ...env, REDIS_URL: 'redis://:own@10.0.0.1:6379/2', REDIS_PASSWORD: 'local' }).REDIS_URL).toBe(
      'redis://:own@10.0.0.1:6379/2',
    );
  });

  it("keeps every engine folder, and each engine's data folder, at mode 0700", () => {
    // The cluster's folders exist only once `up --brokers 3` ran.
    const nodes = fs.existsSync(ENGINE_DIRS.kafkaCluster)
      ? fs
          .readdirSync(ENGINE_DIRS.kafkaCluster, { withFileTypes: true })
          .filter((d) => d.isDirectory())
          .map((d) => path.join(ENGINE_DIRS.kafkaCluster, d.name))
      : [];
    const engines = [
      ENGINE_DIRS.postgres,
      ENGINE_DIRS.redis,
      ENGINE_DIRS.clickhouse,
      ENGINE_DIRS.kafka,
      ...(nodes.length ? [ENGINE_DIRS.kafkaCluster, ...nodes] : []),
    ];
    const data = [ENGINE_DIRS.postgres, ENGINE_DIRS.clickhouse, ENGINE_DIRS.kafka, ...nodes].map((d) => path.join(d, 'data'));
    expect(PRIVATE_DIR_MODE).toBe(0o700);
    for (const dir of [...engines, ...data]) expect(modeOf(dir).toString(8), dir).toBe('700');
  });

  it('keeps the files holding the passwords at mode 0600', () => {
    const files = [repoPath('.env'), path.join(ENGINE_DIRS.clickhouse, 'users.xml'), path.join(ENGINE_DIRS.redis, 'redis.conf')];
    for (const file of files) expect(modeOf(file).toString(8), file).toBe('600');
  });
});
