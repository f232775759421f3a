import type { IHeaders, Message } from 'kafkajs';
import { z } from 'zod';
import type { Origin } from './rows.js';

/** Headers a dead-lettered message carries, next to its original key, value and headers. */
export const DLQ_HEADERS = {
  error: 'x-dlq-error',
  topic: 'x-dlq-original-topic',
  partition: 'x-dlq-original-partition',
  offset: 'x-dlq-original-offset',
  index: 'x-dlq-original-index',
} as const;

const MAX_ERROR_CHARS = 2000;

/**
 * A short, single-line reason for a dead letter's header: schema problems as `path: message` pairs.
 * Log lines take the error itself (`{ err }`, lib/logger.ts), which keeps its stack.
 */
export function describeError(err: unknown): string {
  if (err instanceof z.ZodError) {
    return err.issues.map((i) => `${i.path.map(String).join('.') || '(root)'}: ${i.message}`).join('; ');
  }
  return err instanceof Error ? err.message : String(err);
}

/** What is dead-lettered: a whole message, or one event of a message (as its own message). */
export interface Letter {
  key: Buffer | null;
  value: Buffer | null;
  headers?: IHeaders;
}

/** The letter, unchanged, with why and where from in headers, so it can be replayed. */
export function deadLetter(letter: Letter, origin: Origin, error: string): Message {
  return {
    key: letter.key,
    value: letter.value,
    headers: {
      ...letter.headers,
      [DLQ_HEADERS.error]: error.slice(0, MAX_ERROR_CHARS),
      [DLQ_HEADERS.topic]: origin.topic,
      [DLQ_HEADERS.partition]: String(origin.partition),
      [DLQ_HEADERS.offset]: origin.offset,
      [DLQ_HEADERS.index]: String(origin.index),
    },
  };
}
