import { randomUUID } from 'node:crypto';
import { encodeEventMessages } from '../../../lib/events/wire.js';
import { type CanonicalEvent } from '../../../lib/events/canonical.js';
import { createLogger } from '../../../lib/logger.js';
import type { Effects, InputMessage, Processor, ProcessorContext } from '../../../pipeline/processors/processor.js';
import type { VenueInfo, VenueLookup } from '../../../pipeline/processors/venues.js';

/**
 * The processors' venue look-up over `venues` (the truth the test edits), with a cache that never
 * expires: what `resolve` answered once it answers again until `refresh` reads the truth anew.
 */
export class FakeVenues implements VenueLookup {
  readonly venues = new Map<string, VenueInfo>();
  private readonly cache = new Map<string, VenueInfo>();
  readonly refreshes: string[] = [];

  async resolve(venueIds: Iterable<string>): Promise<Map<string, VenueInfo>> {
    const found = new Map<string, VenueInfo>();
    for (const id of venueIds) {
      if (!this.cache.has(id) && this.venues.has(id)) this.cache.set(id, structuredClone(this.venues.get(id)!));
      const info = this.cache.get(id);
      if (info) found.set(id, info);
    }
    return found;
  }

  async refresh(venueId: string): Promise<VenueInfo | undefined> {
    this.refreshes.push(venueId);
    this.cache.delete(venueId);
    return (await this.resolve([venueId])).get(venueId);
  }
}

export const venueInfo = (operatorId: string, over: Partial<VenueInfo> = {}): VenueInfo => ({
  operator_id: operatorId,
  timezone: 'UTC',
  is_active: true,
  occupancy_reset_hour: 4,
  zones: [],
  integrations: [],
  ...over,
});

const log = createLogger('unit-processors', 'silent');

export const ctx = (now: number, caughtUp = true): ProcessorContext => ({ partition: 0, now, caughtUp, log });

/** A canonical event received half a second after it happened (what the processor reads of it). */
export function flowEvent(e: Pick<CanonicalEvent, 'operatorId' | 'venueId' | 'ts' | 'type'> & Partial<CanonicalEvent>): CanonicalEvent {
  return {
    id: randomUUID(),
    zoneId: null,
    connectorType: 'meraki',
    receivedAt: e.ts + 500,
    device: null,
    randomizedMac: false,
    metrics: {},
    payload: {},
    ...e,
  };
}

/** One ingest request: its events in one message, received together. */
export function request(events: CanonicalEvent[], offset = 0): InputMessage {
  const receivedAt = Math.max(...events.map((e) => e.receivedAt));
  const messages = encodeEventMessages(events.map((e) => ({ ...e, receivedAt })));
  if (messages.length !== 1) throw new Error('a request must fit one message');
  return { topic: 'events', partition: 0, offset: String(offset), value: messages[0]!.value, headers: messages[0]!.headers };
}

/** A processor and its state driven by hand, keeping every output and the changelog it would write. */
export class Driver<S, O> {
  state: S;
  readonly outputs: O[] = [];
  readonly changelog: Array<[string, Buffer | null]> = [];

  constructor(
    readonly proc: Processor<S>,
    private readonly decode: (value: Buffer) => O,
  ) {
    this.state = proc.createState();
  }

  private take(effects: Effects): O[] {
    const got = effects.outputs.map((o) => this.decode(o.value));
    this.outputs.push(...got);
    for (const k of effects.changed) this.changelog.push([k, this.proc.entry(this.state, k)]);
    return got;
  }

  async process(messages: InputMessage[], now: number, caughtUp = true): Promise<O[]> {
    return this.take(await this.proc.process(this.state, messages, ctx(now, caughtUp)));
  }

  async tick(now: number, caughtUp = true): Promise<O[]> {
    return this.take(await this.proc.tick(this.state, ctx(now, caughtUp)));
  }

  /** A fresh state rebuilt from the changelog written so far, as a restore after a rebalance would. */
  restored(): S {
    const state = this.proc.createState();
    for (const [k, v] of this.changelog) this.proc.restore(state, k, v);
    return state;
  }
}
