import { randomUUID } from 'node:crypto';
import type { CanonicalEvent } from '../../../lib/events/canonical.js';

/** A valid canonical event with the given fields; the rest plain defaults (a Meraki environment reading). */
export function event(e: Pick<CanonicalEvent, 'operatorId' | 'venueId' | 'ts'> & Partial<CanonicalEvent>): CanonicalEvent {
  return {
    id: randomUUID(),
    zoneId: null,
    connectorType: 'meraki',
    type: 'environment',
    receivedAt: e.ts + 500,
    device: null,
    randomizedMac: false,
    metrics: {},
    payload: {},
    ...e,
  };
}

/** Decoded events as plain JSON: a topic event gives the canonical event, its payload parsed. */
export const plain = (v: unknown): unknown => JSON.parse(JSON.stringify(v));
