import Module, { createRequire } from 'node:module';
import { crc32c } from '@node-rs/crc32';

const require = createRequire(import.meta.url);
/** The module kafkajs 2.2.4's record-batch encoder takes the batch checksum from. */
const CHECKSUM_MODULE = 'kafkajs/src/protocol/recordBatch/crc32C/index.js';
const ENCODER_MODULE = 'kafkajs/src/protocol/recordBatch/v0/index.js';

/**
 * Gives kafkajs a native CRC-32C (@node-rs/crc32) for the record batches it produces. Its own is
 * JavaScript, a byte at a time (2.2 ns a byte here against 0.17), and at the api's full rate it was
 * nearly all of kafkajs's CPU in the api, about 1 µs per event
 * (benchmarks/README.md#the-record-batch-checksum-2026-11-28-issue-30). kafkajs loads its encoder
 * on the first produce and reads the checksum function from that module then, so the native one
 * is put in the CommonJS cache under the module's name before any client exists. The broker checks
 * every batch's checksum when it appends it, so a wrong one would fail each send, not pass on.
 * Returns false when it comes too late (the encoder is loaded already) or kafkajs no longer has
 * the module: kafkajs then keeps its own, slower but as correct.
 */
export function useNativeCrc32c(): boolean {
  let checksum: string;
  let encoder: string;
  try {
    checksum = require.resolve(CHECKSUM_MODULE);
    encoder = require.resolve(ENCODER_MODULE);
  } catch {
    return false;
  }
  if (require.cache[encoder]) return require.cache[checksum]?.exports === kafkaBatchChecksum;
  const native = new Module(checksum);
  native.filename = checksum;
  native.loaded = true;
  native.exports = kafkaBatchChecksum;
  require.cache[checksum] = native;
  return true;
}

/** The CRC-32C (Castagnoli) of a record batch's bytes, unsigned, as kafkajs writes it. */
export const kafkaBatchChecksum = (bytes: Buffer): number => crc32c(bytes);
