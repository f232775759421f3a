/**
 * The occupancy processor driven directly (no Kafka, no Postgres): the live figure of a scope is
 * the occupancy rule over all the current period's events, whatever order, batching or
 * duplication they arrive with, and a state restored from its changelog entries goes on exactly
 * as the original. The expected figures are recomputed here from the docs' rule, not with
 * production code.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { encodeEventMessages } from '../../lib/events/wire.js';
import { type AlarmSeverity } from '../../lib/events/alarms.js';
import { type CanonicalEvent } from '../../lib/events/canonical.js';
import { type OccupancyUpdate } from '../../lib/events/derived.js';
import { DEFAULT_OCCUPANCY_RULE, occupancySeverity } from '../../domain/alarms/rules.js';
import { createLogger } from '../../lib/logger.js';
import { createOccupancyProcessor, type OccupancyState, type UnreflectedReason } from '../../pipeline/processors/occupancy.js';
import type { InputMessage, Processor, ProcessorContext } from '../../pipeline/processors/processor.js';
import type { VenueInfo, VenueLookup } from '../../pipeline/processors/venues.js';

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const OPERATOR = '0b7c3a52-1111-4aaa-8aaa-000000000001';
const A = '0b7c3a52-2222-4aaa-8aaa-00000000000a';
const B = '0b7c3a52-2222-4aaa-8aaa-00000000000b';
const DOOR = '0b7c3a52-3333-4aaa-8aaa-0000000000d0';
const HALL = '0b7c3a52-3333-4aaa-8aaa-0000000000a1';
/** Venue A resets at 04:00 UTC, B at midnight UTC. */
const HOURS: Record<string, number> = { [A]: 4, [B]: 0 };
/** A's period under test starts at A0; B's events are a day later (newer traffic on the same partition). */
const A0 = Date.UTC(2026, 2, 10, 4);
const B0 = Date.UTC(2026, 2, 12, 0);

const infos = new Map<string, VenueInfo>([
  [
    A,
    {
      operator_id: OPERATOR,
      timezone: 'UTC',
      is_active: true,
      occupancy_reset_hour: HOURS[A]!,
      zones: [
        { id: DOOR, type: 'entrance', capacity: null },
        { id: HALL, type: 'area', capacity: 40 },
      ],
      integrations: [],
    },
  ],
  [B, { operator_id: OPERATOR, timezone: 'UTC', is_active: true, occupancy_reset_hour: HOURS[B]!, zones: [], integrations: [] }],
]);

const lookup: VenueLookup = {
  async resolve(ids) {
    return new Map([...ids].flatMap((id) => (infos.has(id) ? [[id, infos.get(id)!] as const] : [])));
  },
  async refresh(venueId) {
    return infos.get(venueId);
  },
};

const log = createLogger('occupancy-exact', 'warn');
const ctx = (caughtUp = false, now = Date.now()): ProcessorContext => ({ partition: 0, now, caughtUp, log });

type ScopeName = 'a' | 'door' | 'hall' | 'b';
interface Flow {
  scope: ScopeName;
  kind: 'entry' | 'exit' | 'count' | 'density';
  amount: number;
  minute: number;
  ms: number;
  derived: boolean;
  copies: number;
}

const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');
/** A random-looking (version 4) id, or one derived from a connector's id (version 5), unique per `n`. */
const idOf = (n: number, derived: boolean) => `${hex(n, 8)}-0000-${derived ? '5' : '4'}000-8000-${hex(n * 7919, 12)}`;

/** An event as ingest stamps it, received at its own time unless `receivedAt` says otherwise. */
function eventOf(f: Flow, n: number, receivedAt?: number): CanonicalEvent {
  const venueId = f.scope === 'b' ? B : A;
  const ts = (f.scope === 'b' ? B0 : A0) + f.minute * MINUTE + f.ms;
  const metrics =
    f.kind === 'entry'
      ? { entries: f.amount }
      : f.kind === 'exit'
        ? { exits: f.amount }
        : f.kind === 'density'
          ? { entries: 1, occupancy: f.amount }
          : { occupancy: f.amount };
  return {
    id: idOf(n, f.derived),
    operatorId: OPERATOR,
    venueId,
    zoneId: f.scope === 'door' ? DOOR : f.scope === 'hall' ? HALL : null,
    connectorType: 'density',
    type: f.kind === 'exit' ? 'exit' : f.kind === 'count' ? 'occupancy' : 'entry',
    ts,
    receivedAt: receivedAt ?? ts,
    device: null,
    randomizedMac: false,
    metrics,
    payload: {},
  };
}

/*
 * The oracle, from docs/processors.md#occupancy: a scope's period is the reset period of the newest
 * event seen for it; its figure is 0 at the period start, then its distinct events in event-time
 * order (counts before flows at the same instant, larger amounts first), an entry adding, an exit
 * subtracting (never below 0), a count setting the figure.
 */
const scopeOf = (e: CanonicalEvent) => `${e.venueId}|${e.zoneId === HALL ? HALL : ''}`;
const periodOf = (e: CanonicalEvent) => {
  const h = HOURS[e.venueId]! * HOUR;
  return Math.floor((e.ts - h) / DAY) * DAY + h;
};
const absoluteOf = (e: CanonicalEvent) => e.metrics.occupancy !== undefined;
const amountOf = (e: CanonicalEvent) =>
  absoluteOf(e) ? e.metrics.occupancy! : e.type === 'entry' ? e.metrics.entries! : -e.metrics.exits!;

function expectedFigures(deliveries: CanonicalEvent[]): Map<string, number> {
  const byScope = new Map<string, Map<string, CanonicalEvent>>();
  for (const e of deliveries) {
    const m = byScope.get(scopeOf(e)) ?? new Map<string, CanonicalEvent>();
    byScope.set(scopeOf(e), m.set(e.id, e));
  }
  const figures = new Map<string, number>();
  for (const [scope, events] of byScope) {
    const all = [...events.values()];
    const period = all.reduce((p, e) => Math.max(p, periodOf(e)), -Infinity);
    const current = all
      .filter((e) => periodOf(e) === period)
      .sort((x, y) => x.ts - y.ts || Number(absoluteOf(y)) - Number(absoluteOf(x)) || amountOf(y) - amountOf(x));
    let value = 0;
    for (const e of current) value = absoluteOf(e) ? amountOf(e) : Math.max(0, value + amountOf(e));
    figures.set(scope, value);
  }
  return figures;
}

/** The people the exits of each scope's current period would take below 0, in the rule's order. */
function expectedClamps(deliveries: CanonicalEvent[]): Map<string, number> {
  const byScope = new Map<string, CanonicalEvent[]>();
  for (const e of deliveries) byScope.set(scopeOf(e), [...(byScope.get(scopeOf(e)) ?? []), e]);
  const totals = new Map<string, number>();
  for (const [scope, all] of byScope) {
    const period = all.reduce((p, e) => Math.max(p, periodOf(e)), -Infinity);
    let value = 0;
    let clamped = 0;
    for (const e of all.filter((x) => periodOf(x) === period)) {
      if (absoluteOf(e)) value = amountOf(e);
      else if (value + amountOf(e) < 0) {
        clamped -= value + amountOf(e);
        value = 0;
      } else value += amountOf(e);
    }
    totals.set(scope, clamped);
  }
  return totals;
}

/** What should be reported: an event of a period before its scope's newest-so-far, or a derived id already taken in the scope's current period. */
function expectedUnreflected(deliveries: CanonicalEvent[]): Record<string, number> {
  const seen = new Map<string, { period: number; ids: Set<string> }>();
  const counts: Record<string, number> = {};
  const count = (venue: string, reason: string) => (counts[`${venue}|${reason}`] = (counts[`${venue}|${reason}`] ?? 0) + 1);
  for (const e of deliveries) {
    const p = periodOf(e);
    let s = seen.get(scopeOf(e));
    if (!s || p > s.period) seen.set(scopeOf(e), (s = { period: p, ids: new Set() }));
    if (p < s.period) count(e.venueId, 'earlier_day');
    else if (s.ids.has(e.id)) count(e.venueId, 'duplicate');
    else s.ids.add(e.id);
  }
  return counts;
}

/**
 * Zone alarms (docs/alarms.md, default rule): WARNING from 80 %, MAJOR 90 %, CRITICAL 100 %; a level
 * reached holds until the figure falls 5 points below its threshold. After any path of updates the
 * active severity is the highest level the final figure reaches, or a higher one it is within 5
 * points of; the alarm rule's own evaluation (occupancySeverity) gives the path's result.
 */
const LEVELS = [
  ['WARNING', 80],
  ['MAJOR', 90],
  ['CRITICAL', 100],
] as const;
function acceptableSeverities(percent: number): Array<string | null> {
  const reached = LEVELS.filter(([, at]) => percent >= at).map(([s]) => s);
  const highest = reached[reached.length - 1] ?? null;
  const held = LEVELS.filter(([, at], i) => percent >= at - 5 && i >= LEVELS.findIndex(([s]) => s === highest)).map(([s]) => s);
  return [highest, ...held];
}
function alarmAfter(updates: OccupancyUpdate[]): string | null {
  let current: AlarmSeverity | null = null;
  for (const u of updates) current = occupancySeverity(DEFAULT_OCCUPANCY_RULE, (u.value / 40) * 100, current).severity;
  return current;
}

/** A small deterministic generator for the delivery (seeded by fast-check). */
function prng(seed: number): () => number {
  let x = seed | 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

/** Requests (one message each) in batches, as the runtime hands them to `process`. */
function deliver(deliveries: CanonicalEvent[], random: () => number, maxRequest = 12, maxBatch = 6): InputMessage[][] {
  const messages: InputMessage[] = [];
  for (let i = 0; i < deliveries.length;) {
    const n = 1 + Math.floor(random() * maxRequest);
    // Received within its own day: how late it comes is the delivery order's business here.
    const request = deliveries.slice(i, i + n).map((e) => ({ ...e, receivedAt: e.ts }));
    for (const m of encodeEventMessages(request))
      messages.push({ topic: 'events', partition: 0, offset: String(messages.length), value: m.value, headers: m.headers });
    i += n;
  }
  const batches: InputMessage[][] = [];
  for (let i = 0; i < messages.length;) {
    const n = 1 + Math.floor(random() * maxBatch);
    batches.push(messages.slice(i, i + n));
    i += n;
  }
  return batches;
}

/** One request: its events in one message (they share the envelope). */
function requestOf(events: CanonicalEvent[]): InputMessage[] {
  // One request has one receipt time: the first event's.
  const messages = encodeEventMessages(events.map((e) => ({ ...e, receivedAt: events[0]!.receivedAt })));
  expect(messages).toHaveLength(1);
  return messages.map((m, i) => ({ topic: 'events', partition: 0, offset: String(i), value: m.value, headers: m.headers }));
}

/** A processor with its state, its outputs, its reports, and the changelog it wrote (every changed entry after each batch, as a commit would). */
class Run {
  readonly proc: Processor<OccupancyState>;
  state: OccupancyState;
  readonly updates: OccupancyUpdate[] = [];
  readonly changelog: Array<[string, Buffer | null]> = [];
  readonly reports: Record<string, number> = {};

  constructor(maxPeriodFlows?: number) {
    this.proc = createOccupancyProcessor({
      inputTopic: 'events',
      outputTopic: 'occupancy',
      venues: lookup,
      maxPeriodFlows,
      unreflected: (venueId: string, reason: UnreflectedReason, count: number) =>
        (this.reports[`${venueId}|${reason}`] = (this.reports[`${venueId}|${reason}`] ?? 0) + count),
    });
    this.state = this.proc.createState();
  }

  private take(effects: { outputs: Array<{ value: Buffer }>; changed: Set<string> }): void {
    for (const o of effects.outputs) this.updates.push(JSON.parse(o.value.toString()) as OccupancyUpdate);
    for (const k of effects.changed) this.changelog.push([k, this.proc.entry(this.state, k)]);
  }

  async process(batch: InputMessage[]): Promise<void> {
    this.take(await this.proc.process(this.state, batch, ctx()));
  }

  async tick(now: number): Promise<void> {
    this.take(await this.proc.tick(this.state, ctx(true, now)));
  }

  /** A new state from this run's changelog: each entry's values in order, entries interleaved at random (as slots reorder them). */
  restored(random: () => number): OccupancyState {
    const byKey = new Map<string, Array<Buffer | null>>();
    for (const [k, v] of this.changelog) byKey.set(k, [...(byKey.get(k) ?? []), v]);
    const queues = [...byKey].map(([k, vs]) => ({ k, vs }));
    const state = this.proc.createState();
    while (queues.length > 0) {
      const i = Math.floor(random() * queues.length);
      const q = queues[i]!;
      this.proc.restore(state, q.k, q.vs.shift()!);
      if (q.vs.length === 0) queues.splice(i, 1);
    }
    return state;
  }

  /** The last figure emitted per scope. */
  figures(): Map<string, number> {
    const out = new Map<string, number>();
    for (const u of this.updates) out.set(`${u.venueId}|${u.zoneId ?? ''}`, u.value);
    return out;
  }

  keys(): Set<string> {
    return new Set(this.changelog.map(([k]) => k));
  }
}

const flowArb = (minutes: { min: number; max: number }) =>
  fc.record({
    scope: fc.constantFrom<ScopeName>('a', 'door', 'hall', 'hall', 'b'),
    kind: fc.oneof(
      { weight: 4, arbitrary: fc.constant<'entry'>('entry') },
      { weight: 4, arbitrary: fc.constant<'exit'>('exit') },
      { weight: 1, arbitrary: fc.constant<'count'>('count') },
      { weight: 1, arbitrary: fc.constant<'density'>('density') },
    ),
    amount: fc.integer({ min: 0, max: 6 }),
    minute: fc.integer(minutes),
    // Ties at the same instant, the chunk's first and last millisecond.
    ms: fc.constantFrom(0, 0, 1, 1, 500, 59_999),
    derived: fc.boolean(),
    copies: fc.integer({ min: 0, max: 2 }),
  });

/** Every flow once (derived ids with their re-deliveries), in an order picked by `mode`. */
function deliveriesOf(flows: Flow[], mode: number, random: () => number): CanonicalEvent[] {
  const events = flows.flatMap((f, n) => {
    const e = eventOf(f, n);
    return f.derived ? Array.from({ length: 1 + f.copies }, () => e) : [e];
  });
  if (mode === 0) {
    // Shuffled.
    for (let i = events.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [events[i], events[j]] = [events[j]!, events[i]!];
    }
  } else if (mode === 1) {
    // Mostly in time order, some a little late, a few hours late.
    events.sort((x, y) => x.ts - y.ts);
    for (let i = events.length - 1; i > 0; i--) {
      const j = random() < 0.05 ? Math.floor(random() * i) : Math.max(0, i - Math.floor(random() * 4));
      [events[i], events[j]] = [events[j]!, events[i]!];
    }
  } else events.reverse();
  return events;
}

async function expectSameState(a: Run, b: Run, keys: Iterable<string>): Promise<void> {
  for (const k of keys) expect(b.proc.entry(b.state, k), k).toEqual(a.proc.entry(a.state, k));
}

describe('occupancy processor, exact live figure (no engines)', () => {
  it('equals the rule over the period’s distinct events whatever the delivery, and restores from its changelog', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          // Spread over hours (many chunks, some of the day before), or crowded into a few minutes (long chunks, re-folded from their checkpoints).
          fc.array(flowArb({ min: -40, max: 200 }), { minLength: 1, maxLength: 160, size: 'max' }),
          fc.array(flowArb({ min: -1, max: 2 }), { minLength: 100, maxLength: 500, size: 'max' }),
          fc.array(
            flowArb({ min: 0, max: 1 }).map((f) => ({ ...f, scope: 'hall' as const })),
            { minLength: 150, maxLength: 600, size: 'max' },
          ),
        ),
        fc.integer({ min: 0, max: 2 }),
        fc.integer(),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        async (flows, mode, seed, cut) => {
          const random = prng(seed);
          const deliveries = deliveriesOf(flows, mode, random);
          const batches = deliver(deliveries, random);
          const run = new Run();
          const resumed = new Run();
          const at = Math.floor(cut * batches.length);
          for (const [i, batch] of batches.entries()) {
            if (i === at) resumed.state = run.restored(random);
            await run.process(batch);
            if (i >= at) await resumed.process(batch);
          }
          const figures = run.figures();
          for (const [scope, value] of expectedFigures(deliveries)) expect(figures.get(scope) ?? 0, scope).toBe(value);
          expect(run.reports).toEqual(expectedUnreflected(deliveries));
          for (const u of run.updates) expect(u.value).toBeGreaterThanOrEqual(0);
          // The zone alarm the hall's updates leave, through the alarm rule, is one the true figure justifies.
          const hall = expectedFigures(deliveries).get(`${A}|${HALL}`);
          if (hall !== undefined)
            expect(acceptableSeverities((hall / 40) * 100), `hall at ${hall} of 40`).toContain(
              alarmAfter(run.updates.filter((u) => u.zoneId === HALL)),
            );
          // Per scope, update times never go back.
          const last = new Map<string, number>();
          for (const u of run.updates) {
            const k = `${u.venueId}|${u.zoneId ?? ''}`;
            expect(u.ts, k).toBeGreaterThanOrEqual(last.get(k) ?? 0);
            last.set(k, u.ts);
          }
          // Restored midway, it went on exactly as the original: the same outputs, the same entries.
          expect(resumed.updates).toEqual(run.updates.slice(run.updates.length - resumed.updates.length));
          const before = new Run();
          for (const batch of batches.slice(0, at)) await before.process(batch);
          expect(run.updates.slice(0, before.updates.length)).toEqual(before.updates);
          expect(resumed.updates.length).toBe(run.updates.length - before.updates.length);
          await expectSameState(run, resumed, run.keys());
          // And a restore of the final changelog holds the same entries.
          const again = new Run();
          again.state = run.restored(random);
          await expectSameState(run, again, run.keys());
        },
      ),
      { numRuns: 300, interruptAfterTimeLimit: 40_000 },
    );
  });

  it('stays exact for traffic in order when the oldest chunks keep only their effect', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.array(
            flowArb({ min: 0, max: 30 }).map((f) => ({ ...f, derived: false, copies: 0 })),
            { minLength: 1, maxLength: 200, size: 'max' },
          ),
          // Crowded: the newest chunk itself keeps only its effect, and flows go on being appended to it.
          fc.array(
            flowArb({ min: 0, max: 2 }).map((f) => ({ ...f, derived: false, copies: 0 })),
            { minLength: 1, maxLength: 200, size: 'max' },
          ),
        ),
        fc.constantFrom(3, 8),
        fc.integer(),
        async (flows, max, seed) => {
          const random = prng(seed);
          const deliveries = flows
            .map((f, n) => eventOf(f, n))
            .sort((x, y) => x.ts - y.ts || Number(absoluteOf(y)) - Number(absoluteOf(x)) || amountOf(y) - amountOf(x));
          const run = new Run(max);
          const batches = deliver(deliveries, random);
          for (const batch of batches) await run.process(batch);
          const figures = run.figures();
          for (const [scope, value] of expectedFigures(deliveries)) expect(figures.get(scope) ?? 0, scope).toBe(value);
          expect(run.reports).toEqual({});
          // In order the period's clamp total only grows: the updates' `clamped` add up to it.
          const clamped = new Map<string, number>();
          for (const u of run.updates) {
            const k = `${u.venueId}|${u.zoneId ?? ''}`;
            clamped.set(k, u.reason === 'reset' ? 0 : (clamped.get(k) ?? 0) + u.clamped);
          }
          for (const [scope, total] of expectedClamps(deliveries)) expect(clamped.get(scope) ?? 0, scope).toBe(total);
          const again = new Run(max);
          again.state = run.restored(random);
          await expectSameState(run, again, run.keys());
        },
      ),
      { numRuns: 200, interruptAfterTimeLimit: 40_000 },
    );
  });

  it('applies a flow landing inside a chunk that kept only its effect at that chunk’s end, and reports it approximated', async () => {
    const run = new Run(3);
    const at = (minute: number, ms: number, kind: Flow['kind'], amount: number, n: number) =>
      eventOf({ scope: 'b', kind, amount, minute, ms, derived: false, copies: 0 }, n);
    // Minute 0: +2, −2, +1 (held, then dropped once minute 1 brings the scope over 3 flows).
    const early = [at(0, 1_000, 'entry', 2, 1), at(0, 2_000, 'exit', 2, 2), at(0, 3_000, 'entry', 1, 3)];
    const later = [at(1, 0, 'entry', 1, 4), at(1, 1_000, 'entry', 1, 5)];
    for (const batch of deliver([...early, ...later], prng(1), 1, 1)) await run.process(batch);
    expect(run.figures().get(`${B}|`)).toBe(3);
    // An exit at 0:01.5 would, in order, be clamped (−2 → 0 after the first exit): at the chunk's end it is not.
    for (const batch of deliver([at(0, 1_500, 'exit', 5, 6)], prng(1), 1, 1)) await run.process(batch);
    expect(run.reports).toEqual({ [`${B}|approximated`]: 1 });
    // Applied after +2 −2 +1: 1 − 5 → 0, then +1 +1 = 2 (in order, +2 −5 → 0, −2 → 0, +1 +1 +1 = 3).
    expect(run.figures().get(`${B}|`)).toBe(2);
    // After the chunk's last flow is still exact: nothing more reported.
    for (const batch of deliver([at(0, 59_000, 'entry', 4, 7)], prng(1), 1, 1)) await run.process(batch);
    expect(run.reports).toEqual({ [`${B}|approximated`]: 1 });
    expect(run.figures().get(`${B}|`)).toBe(6);
    // Before that last flow (though after the chunk's last flow held before): approximated.
    for (const batch of deliver([at(0, 30_000, 'entry', 1, 8)], prng(1), 1, 1)) await run.process(batch);
    expect(run.reports).toEqual({ [`${B}|approximated`]: 2 });
    expect(run.figures().get(`${B}|`)).toBe(7);
    const again = new Run(3);
    again.state = run.restored(prng(2));
    await expectSameState(run, again, run.keys());
  });

  it('keeps every changelog entry under the broker’s 1 MB: a chunk too large for one keeps only its effect', async () => {
    const run = new Run();
    // 40,000 entries with derived ids in one minute: 16 bytes of id each.
    const events = Array.from({ length: 40_000 }, (_, i) =>
      eventOf(
        { scope: 'hall', kind: 'entry', amount: 1, minute: 3, ms: Math.floor(i * 1.5), derived: true, copies: 0 },
        i,
        A0 + 4 * MINUTE,
      ),
    );
    const messages: InputMessage[] = [];
    for (let i = 0; i < events.length; i += 1000) {
      for (const m of encodeEventMessages(events.slice(i, i + 1000)))
        messages.push({ topic: 'events', partition: 0, offset: String(messages.length), value: m.value, headers: m.headers });
    }
    for (let i = 0; i < messages.length; i += 4) await run.process(messages.slice(i, i + 4));
    expect(Math.max(...run.changelog.map(([, v]) => v?.length ?? 0))).toBeLessThan(600_000);
    expect(run.figures().get(`${A}|${HALL}`)).toBe(40_000);
    // Once it kept only its effect, a derived id landing in it cannot be checked for a re-delivery: applied, reported.
    expect(run.reports[`${A}|approximated`]).toBeGreaterThan(0);
    expect(run.reports[`${A}|duplicate`]).toBeUndefined();
    const again = new Run();
    again.state = run.restored(prng(3));
    await expectSameState(run, again, run.keys());
  });

  it('emits the figure before a reset, the reset, then the figure after, within one request', async () => {
    const run = new Run();
    const f = (minute: number, kind: Flow['kind'], amount: number, n: number, scope: ScopeName = 'a') =>
      eventOf({ scope, kind, amount, minute, ms: 0, derived: false, copies: 0 }, n);
    for (const batch of deliver([f(10, 'entry', 3, 1), f(20, 'entry', 2, 2)], prng(1), 1, 1)) await run.process(batch);
    // One request: an exit of today, an entry of tomorrow (after 04:00), an entry of today (now an earlier day).
    const request = [f(30, 'exit', 1, 3), f(24 * 60 + 5, 'entry', 7, 4), f(40, 'entry', 1, 5)];
    await run.process(requestOf(request));
    expect(run.updates.map((u) => [u.value, u.reason, u.ts])).toEqual([
      [3, 'flow', A0 + 10 * MINUTE],
      [5, 'flow', A0 + 20 * MINUTE],
      [4, 'flow', A0 + 30 * MINUTE],
      [0, 'reset', A0 + DAY],
      [7, 'flow', A0 + DAY + 5 * MINUTE],
    ]);
    expect(run.reports).toEqual({ [`${A}|earlier_day`]: 1 });
    // The previous period's chunks are deleted.
    expect(
      run.changelog
        .filter(([k, v]) => k.includes('|#') && v === null)
        .map(([k]) => k)
        .sort(),
    ).toEqual(
      [
        `${A}||#${Math.floor((A0 + 10 * MINUTE) / MINUTE)}`,
        `${A}||#${Math.floor((A0 + 20 * MINUTE) / MINUTE)}`,
        `${A}||#${Math.floor((A0 + 30 * MINUTE) / MINUTE)}`,
      ].sort(),
    );
  });

  it('moves a quiet scope to the next period on the wall clock only once caught up; later events of the old period are an earlier day', async () => {
    const run = new Run();
    const f = (minute: number, amount: number, n: number) =>
      eventOf({ scope: 'hall', kind: 'entry', amount, minute, ms: 0, derived: false, copies: 0 }, n);
    for (const batch of deliver([f(60, 5, 1)], prng(1), 1, 1)) await run.process(batch);
    // Not caught up: nothing.
    const notCaughtUp = await run.proc.tick(run.state, ctx(false, A0 + 2 * DAY));
    expect(notCaughtUp.outputs).toEqual([]);
    await run.tick(A0 + DAY - 1);
    expect(run.updates).toHaveLength(1);
    await run.tick(A0 + DAY + 30 * MINUTE);
    expect(run.updates.at(-1)).toMatchObject({ zoneId: HALL, value: 0, reason: 'reset', ts: A0 + DAY, capacity: 40, percent: 0 });
    for (const batch of deliver([f(120, 1, 2), f(24 * 60 + 40, 2, 3)], prng(1), 1, 1)) await run.process(batch);
    expect(run.reports).toEqual({ [`${A}|earlier_day`]: 1 });
    expect(run.updates.at(-1)).toMatchObject({ value: 2, reason: 'flow', percent: 5 });
  });

  it('never shows a day that had ended when ingest received it: a backfill is history, even for a scope never seen', async () => {
    const run = new Run();
    const received = A0 + 3 * DAY + HOUR;
    const f = (day: number, minute: number, n: number) =>
      eventOf({ scope: 'a', kind: 'entry', amount: 2, minute: day * 24 * 60 + minute, ms: 0, derived: false, copies: 0 }, n, received);
    // Three days ago, oldest first, all received now; then an event of today.
    await run.process(requestOf([f(0, 10, 1), f(0, 20, 2), f(1, 10, 3), f(2, 30, 4)]));
    expect(run.updates).toEqual([]);
    expect(run.reports).toEqual({ [`${A}|earlier_day`]: 4 });
    expect(run.keys().size).toBe(0);
    await run.process(requestOf([f(3, 30, 5)]));
    expect(run.updates.map((u) => [u.value, u.reason])).toEqual([[2, 'flow']]);
  });

  it('skips a derived id delivered again, counts a random id every time', async () => {
    const run = new Run();
    const derived = eventOf({ scope: 'a', kind: 'entry', amount: 2, minute: 5, ms: 0, derived: true, copies: 0 }, 1);
    const random = eventOf({ scope: 'a', kind: 'entry', amount: 2, minute: 5, ms: 0, derived: false, copies: 0 }, 2);
    for (const batch of deliver([derived, random, derived, { ...random, id: idOf(3, false) }, derived], prng(1), 2, 1))
      await run.process(batch);
    expect(run.figures().get(`${A}|`)).toBe(6);
    expect(run.reports).toEqual({ [`${A}|duplicate`]: 2 });
  });

  it('restores an entry of the layout before chunks as its figure at its time', async () => {
    const run = new Run();
    const ts = A0 + 30 * MINUTE + 10_000;
    const old = {
      operatorId: OPERATOR,
      venueId: B,
      zoneId: null,
      timezone: 'UTC',
      resetHour: 0,
      base: 3,
      baseTs: ts - 60_000,
      basePeriod: B0,
      baseClamped: 0,
      pending: [[ts, 4, 0, 2]],
      value: 5,
      ts,
      period: A0 - 4 * HOUR,
      clamped: 0,
      maxTs: ts,
      seq: 5,
    };
    run.proc.restore(run.state, `${B}|`, Buffer.from(JSON.stringify(old)));
    // Unknown or broken entries are dropped, not thrown.
    run.proc.restore(run.state, `${B}|${HALL}`, Buffer.from('{"nonsense":true}'));
    run.proc.restore(run.state, `${B}||#123`, Buffer.from([7, 7, 7]));
    const entry = (minute: number, ms: number, amount: number, n: number) => ({
      ...eventOf({ scope: 'b', kind: 'entry', amount, minute: 0, ms: 0, derived: false, copies: 0 }, n),
      ts: A0 + minute * MINUTE + ms,
    });
    const effects = await run.proc.process(run.state, deliver([entry(40, 0, 2, 1)], prng(1), 1, 1)[0]!, ctx());
    // The old entry moves to the new layout: its head and a chunk holding the figure as a count.
    const minute = Math.floor(ts / MINUTE);
    expect([...effects.changed]).toEqual(expect.arrayContaining([`${B}|`, `${B}||#${minute}`, `${B}||#123`, `${B}|${HALL}`]));
    expect(run.proc.entry(run.state, `${B}||#123`)).toBeNull();
    expect(run.proc.entry(run.state, `${B}|${HALL}`)).toBeNull();
    expect(effects.outputs.map((o) => JSON.parse(o.value.toString()) as OccupancyUpdate).map((u) => [u.value, u.ts])).toEqual([
      [7, A0 + 40 * MINUTE],
    ]);
  });

  it('keeps in-order traffic cheap: 200,000 door events in requests of 1,000', async () => {
    const run = new Run();
    const events: CanonicalEvent[] = [];
    for (let i = 0; i < 200_000; i++) {
      const kind = i % 3 === 2 ? 'count' : i % 3 === 0 ? 'entry' : 'exit';
      events.push(
        eventOf({ scope: 'a', kind, amount: kind === 'count' ? 50 + (i % 20) : 1, minute: 0, ms: 0, derived: false, copies: 0 }, i),
      );
      events[i]!.ts = A0 + Math.floor(i * 2.2);
    }
    const messages: InputMessage[] = [];
    for (let i = 0; i < events.length; i += 1000) {
      for (const m of encodeEventMessages(events.slice(i, i + 1000)))
        messages.push({ topic: 'events', partition: 0, offset: String(messages.length), value: m.value, headers: m.headers });
    }
    const started = performance.now();
    // Batches of eight requests, every changed entry encoded after each (a commit).
    for (let i = 0; i < messages.length; i += 8) await run.process(messages.slice(i, i + 8));
    const ms = performance.now() - started;
    // Decoding the messages is most of it; quadratic work would take minutes.
    expect(ms).toBeLessThan(20_000);
    // Beyond MAX_PERIOD_FLOWS the oldest chunks keep only their effect: in order, still exact.
    expect(run.figures().get(`${A}|`)).toBe(expectedFigures(events).get(`${A}|`));
    expect(run.reports).toEqual({});
    expect(run.proc.size(run.state)).toBeLessThan(200_000 / (MINUTE / 2.2) + 10);
    console.log(`200,000 in-order events: ${Math.round(ms)} ms, ${Math.round((ms * 1000) / 200_000)} µs per event`);
  });
});
