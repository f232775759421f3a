import { keepCoordinators } from './kafkajs-coordinators.js';
import { useNativeCrc32c } from './kafkajs-crc32c.js';
import { encodeWithoutCopies } from './kafkajs-encoder.js';
import { stopRequestQueueSpin } from './kafkajs-request-queue.js';

/**
 * Mends kafkajs 2.2.4 where it spends CPU for nothing (it has no later release), once per process,
 * before any client exists. Returns a warning for each mend the installed kafkajs no longer allows.
 */
export function mendKafkajs(): string[] {
  return [
    stopRequestQueueSpin()
      ? ''
      : 'kafkajs changed its request queue: each broker connection may wake its process every millisecond (lib/kafkajs-request-queue.ts)',
    useNativeCrc32c() ? '' : 'kafkajs keeps its JavaScript CRC-32C: producing costs more CPU (lib/kafkajs-crc32c.ts)',
    encodeWithoutCopies()
      ? ''
      : 'kafkajs changed its protocol encoder: producing copies each request several times (lib/kafkajs-encoder.ts)',
    keepCoordinators()
      ? ''
      : 'kafkajs changed its cluster: each processor transaction looks up its coordinators four times (lib/kafkajs-coordinators.ts)',
  ].filter(Boolean);
}
