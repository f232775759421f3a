import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { KafkaJSConnectionError, KafkaJSRequestTimeoutError } from 'kafkajs';
import { movesCoordinator } from '../../../lib/kafkajs-coordinators.js';

/** The errors kafkajs raises for a broker's answer, made as it makes them. */
const { createErrorFromCode } = createRequire(import.meta.url)('kafkajs/src/protocol/error.js') as {
  createErrorFromCode(code: number): Error;
};

describe('which failed requests forget a kept coordinator', () => {
  it('forgets it when the broker says it is not the coordinator, or gives no answer', () => {
    for (const code of [13, 15, 16, 52]) expect(movesCoordinator(createErrorFromCode(code)), `code ${code}`).toBe(true);
    expect(movesCoordinator(new KafkaJSConnectionError('Connection error: ECONNREFUSED'))).toBe(true);
    expect(movesCoordinator(new KafkaJSRequestTimeoutError('Request EndTxn(key: 26, version: 1) timed out'))).toBe(true);
  });

  it('keeps it for an answer the coordinator itself gave', () => {
    // CONCURRENT_TRANSACTIONS, GROUP_LOAD_IN_PROGRESS, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE
    for (const code of [51, 14, 47, 48]) expect(movesCoordinator(createErrorFromCode(code)), `code ${code}`).toBe(false);
  });
});
