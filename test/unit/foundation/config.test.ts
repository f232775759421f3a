import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseDotenv } from '../../../lib/config.js';

const good = {
  DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db',
  CLICKHOUSE_URL: 'http://127.0.0.1:8123',
  KAFKA_BROKERS: '127.0.0.1:9092,127.0.0.2:9092',
  REDIS_URL: 'redis://127.0.0.1:6379',
  ADMIN_SECRET: 'a-long-enough-admin-secret',
  SECRETS_KEY: Buffer.alloc(32, 7).toString('base64'),
  PSEUDONYM_KEY: 'x'.repeat(43),
};

function problemsOf(env: Record<string, string | undefined>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected the configuration to be rejected');
}

describe('configuration', () => {
  it('accepts a complete environment and applies defaults', () => {
    const cfg = loadConfig(good);
    expect(cfg.KAFKA_BROKERS).toEqual(['127.0.0.1:9092', '127.0.0.2:9092']);
    expect(cfg.API_PORT).toBe(3000);
    expect(cfg.PUBLIC_URL).toBe('http://127.0.0.1:8080');
  });

  it('rejects a bad variable with one line naming it and what was expected', () => {
    expect(problemsOf({ ...good, API_PORT: 'eighty' })).toEqual([expect.stringMatching(/^API_PORT: .+/)]);
    expect(problemsOf({ ...good, SECRETS_KEY: 'c2hvcnQ=' })).toEqual(['SECRETS_KEY: a base64 string encoding exactly 32 bytes']);
    expect(problemsOf({ ...good, KAFKA_BROKERS: 'localhost' })).toEqual(['KAFKA_BROKERS: comma-separated host:port pairs']);
    expect(problemsOf({ ...good, DATABASE_URL: 'mysql://x@y/z' })).toEqual([expect.stringMatching(/^DATABASE_URL: /)]);
  });

  it('names every missing required variable', () => {
    const problems = problemsOf({ ...good, REDIS_URL: undefined, ADMIN_SECRET: '' });
    expect(problems).toContain('REDIS_URL: required but not set');
    expect(problems).toContain('ADMIN_SECRET: required but not set');
  });

  it('reads .env lines with comments and quotes', () => {
    expect(parseDotenv('# c\nA=1\nB="two words"\n\nC=\'x=y\'\n')).toEqual({ A: '1', B: 'two words', C: 'x=y' });
  });
});
