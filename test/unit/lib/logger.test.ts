import { Writable } from 'node:stream';
import { KafkaJSConnectionError, KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../lib/logger.js';

/** What one `log.warn({ err }, …)` writes, parsed. */
function logged(err: unknown): Record<string, unknown> {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  createLogger('test', 'info', sink).warn({ err }, 'failed');
  return JSON.parse(lines[0]!).err as Record<string, unknown>;
}

describe('the error form of log lines', () => {
  it('keeps message, stack, class, name and code, and the cause as an error of its own', () => {
    const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const err = logged(Object.assign(new Error('query failed', { cause }), { code: '57P01' }));
    expect(err).toMatchObject({ type: 'Error', message: 'query failed', code: '57P01' });
    expect(err.stack).toMatch(/^Error: query failed\n\s+at /);
    expect(err.cause).toMatchObject({ type: 'Error', message: 'connect ECONNREFUSED 127.0.0.1:5432', code: 'ECONNREFUSED' });
    expect((err.cause as { stack: string }).stack).toMatch(/\n\s+at /);
  });

  it("keeps kafkajs's fields: retriable, type, broker, code and the original error", () => {
    // kafkajs builds it from the broker's decoded error; its typings only admit Error | string.
    const decoded = {
      message: 'This server does not host this topic-partition',
      type: 'UNKNOWN_TOPIC_OR_PARTITION',
      code: 3,
      retriable: true,
    };
    const protocol = logged(new KafkaJSProtocolError(decoded as unknown as Error));
    expect(protocol).toMatchObject({ name: 'KafkaJSProtocolError', retriable: true, code: 3 });
    expect(protocol.stack).toContain('KafkaJSProtocolError');

    const connection = new KafkaJSConnectionError('Connection error: connect ECONNREFUSED', {
      broker: 'localhost:9092',
      code: 'ECONNREFUSED',
    });
    const retries = logged(new KafkaJSNumberOfRetriesExceeded(connection, { retryCount: 5, retryTime: 3000 }));
    expect(retries).toMatchObject({ name: 'KafkaJSNumberOfRetriesExceeded', retriable: false, retryCount: 5, retryTime: 3000 });
    expect(retries.cause).toMatchObject({
      name: 'KafkaJSConnectionError',
      broker: 'localhost:9092',
      code: 'ECONNREFUSED',
      retriable: true,
    });

    const wrapped = logged(Object.assign(new Error('publish failed'), { originalError: connection }));
    expect(wrapped.originalError).toMatchObject({ type: 'KafkaJSConnectionError', broker: 'localhost:9092' });
    expect((wrapped.originalError as { stack: string }).stack).toMatch(/\n\s+at /);
  });

  it('masks a key quoted in a message or stack, the cause included, and logs a non-error as it is', () => {
    const key = `vt_live_${'a1B2'.repeat(7)}`;
    const err = logged(new Error('outer', { cause: new Error(`bad key ${key}`) }));
    expect(JSON.stringify(err)).not.toContain(key.slice(8));
    expect((err.cause as { message: string }).message).toBe('bad key vt_live_…[REDACTED]');
    expect(logged({ status: 503 })).toEqual({ status: 503 });
  });
});
