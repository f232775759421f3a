import type { ConnectorType } from '../lib/events/vocabulary.js';
import { arrivalMinutes, CURVES, intensity, type CurveSpec } from './curve.js';
import { Random } from './random.js';
import { addDays, HOUR, localDate, MINUTE, weekdayOf, zonedTime, type LocalDate } from './time.js';
import { areaZones, doorZones, type VenueTemplate } from './venues.js';

/**
 * The traffic model: who comes to a venue on a local day, when, for how long, with which phone,
 * and what they buy. A day's plan depends only on the run seed, the venue's key and the date, so
 * every connector generator sees the same people and a run is reproducible whatever its windows.
 */

export interface Device {
  mac: string;
  /** Locally administered (randomised) MAC: second hex digit 2, 6, A or E. */
  randomized: boolean;
  manufacturer: string;
  os: string;
}

export interface Purchase {
  at: number;
  updatedAt: number;
  createdEventId: string;
  updatedEventId: string;
  paymentId: string;
  amount: number;
  status: 'COMPLETED' | 'FAILED' | 'CANCELED';
}

export interface Visit {
  arrive: number;
  leave: number;
  /** Slug of the area zone the visit is spent in. */
  zone: string;
  entranceDoor: string;
  exitDoor: string;
  device: Device | null;
  /** Joined the guest Wi-Fi (UniFi only sees these; Meraki reports the SSID). */
  associated: boolean;
  /** Captive-portal login time, if the visitor logged in. */
  portalAt: number | null;
  purchase: Purchase | null;
  customerId: string | null;
  kind: 'new' | 'regular' | 'staff';
}

export interface PasserBy {
  at: number;
  device: Device;
  sightings: 1 | 2;
}

/** A door crossing with the venue's count after it (Density's `count`). */
export interface Crossing {
  ts: number;
  direction: 1 | -1;
  door: string;
  count: number;
}

export interface Silence {
  connector: ConnectorType;
  from: number;
  to: number;
}

export interface OverCapacity {
  zone: string;
  from: number;
  to: number;
  factor: number;
}

export interface DayPlan {
  venue: string;
  date: LocalDate;
  open: number;
  close: number;
  visits: Visit[];
  passers: PasserBy[];
  crossings: Crossing[];
  silences: Silence[];
  overCapacity: OverCapacity[];
}

interface Regular {
  device: Device | null;
  associated: boolean;
  customerId: string | null;
  /** Chance of a visit on a given day. */
  frequency: number;
  staff: boolean;
}

export interface TrafficOptions {
  seed: number;
  /** Visitor volume multiplier (1 = the templates' figures). */
  scale: number;
  /** Faults: silences, over-capacity episodes and malformed events. */
  faults: boolean;
  /** Where live traffic starts (ms); days from then on are scaled by `liveRate`, heartbeats are denser. */
  liveFrom?: number;
  liveRate?: number;
  /** Share of events that get a malformed twin when faults are on. */
  malformedRate?: number;
  /** Live-anchored faults, so a short demo shows them: over capacity in the first venue, silence in the second. */
  anchoredFaults?: { overCapacityVenue: string; silenceVenue: string };
}

const OUIS: ReadonlyArray<readonly [string, string, string]> = [
  ['a4:83:e7', 'Apple', 'iOS'],
  ['3c:22:fb', 'Apple', 'iOS'],
  ['f0:18:98', 'Apple', 'iOS'],
  ['8c:f5:a3', 'Samsung', 'Android'],
  ['5c:0a:5b', 'Samsung', 'Android'],
  ['3c:28:6d', 'Google', 'Android'],
  ['64:a2:f9', 'OnePlus', 'Android'],
  ['00:0e:35', 'Intel', 'Windows'],
];

function newDevice(rng: Random, randomizedShare: number): Device {
  const [oui, manufacturer, os] = rng.pick(OUIS);
  if (rng.chance(randomizedShare)) {
    // Locally administered, unicast: the second hex digit becomes 2, 6, A or E.
    const first = (rng.int(0, 255) & 0xfc) | 0x02;
    const mac = [first.toString(16).padStart(2, '0'), ...rng.hex(5).match(/../g)!].join(':');
    return { mac, randomized: true, manufacturer, os };
  }
  return { mac: `${oui}:${rng.hex(3).match(/../g)!.join(':')}`, randomized: false, manufacturer, os };
}

const average = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Where arrivals peak (local minutes), for over-capacity episodes. */
function busiestMinute(spec: CurveSpec): number {
  let best = spec.open;
  for (let m = spec.open; m < spec.close; m += 5) if (intensity(spec, m) > intensity(spec, best)) best = m;
  return best;
}

export class TrafficState {
  private readonly plans = new Map<string, DayPlan>();
  private readonly pools = new Map<string, Regular[]>();

  constructor(readonly options: TrafficOptions) {}

  get seed(): number {
    return this.options.seed;
  }

  /** The regulars (and staff) of a venue: the same people across days, so loyalty has returns to find. */
  regulars(venue: VenueTemplate): Regular[] {
    let pool = this.pools.get(venue.key);
    if (pool) return pool;
    const rng = Random.for(this.seed, venue.key, 'regulars');
    const size = Math.max(4, Math.round(venue.visitorsPerDay * this.options.scale * 0.9));
    const staff = Math.max(1, Math.round(Math.min(6, 2 + (venue.visitorsPerDay * this.options.scale) / 400)));
    pool = [];
    for (let i = 0; i < staff; i++) {
      pool.push({ device: newDevice(rng, 0), associated: true, customerId: null, frequency: 0.85, staff: true });
    }
    for (let i = 0; i < size; i++) {
      const frequency = rng.weighted([
        [0.6, 0.1],
        [0.2, 0.3],
        [0.05, 0.6],
      ] as const);
      pool.push({
        // iOS and Android keep a private address per network: a regular's randomised MAC is stable.
        device: rng.chance(0.85) ? newDevice(rng, 0.3) : null,
        associated: rng.chance(0.6),
        customerId: rng.chance(0.6) ? rng.alnum(26).toUpperCase() : null,
        frequency,
        staff: false,
      });
    }
    this.pools.set(venue.key, pool);
    return pool;
  }

  /** The volume multiplier of a local day: `liveRate` from the day the live part starts on. */
  private multiplier(venue: VenueTemplate, date: LocalDate): number {
    const { liveFrom, liveRate } = this.options;
    if (liveFrom === undefined || liveRate === undefined) return 1;
    return zonedTime(addDays(date, 1), 0, venue.timezone) > liveFrom ? liveRate : 1;
  }

  plan(venue: VenueTemplate, date: LocalDate): DayPlan {
    const id = `${venue.key}|${date}`;
    const cached = this.plans.get(id);
    if (cached) return cached;
    const plan = this.build(venue, date);
    this.plans.set(id, plan);
    return plan;
  }

  /** The plans of every local day that can have events in [from, to). */
  plansFor(venue: VenueTemplate, from: number, to: number): DayPlan[] {
    const out: DayPlan[] = [];
    const last = localDate(to, venue.timezone);
    for (let d = localDate(from - HOUR, venue.timezone); d <= last; d = addDays(d, 1)) out.push(this.plan(venue, d));
    return out;
  }

  /** Forgets plans that ended before `ts` (a live run would otherwise grow without bound). */
  prune(ts: number): void {
    for (const [id, plan] of this.plans) if (plan.close + 2 * HOUR < ts) this.plans.delete(id);
  }

  /** Silences that cover `ts` for this venue and connector. */
  silent(venue: VenueTemplate, connector: ConnectorType, ts: number): boolean {
    if (!this.options.faults) return false;
    const anchored = this.anchored(venue);
    if (anchored.silence && anchored.silence.connector === connector && ts >= anchored.silence.from && ts < anchored.silence.to)
      return true;
    return this.plan(venue, localDate(ts, venue.timezone)).silences.some((s) => s.connector === connector && ts >= s.from && ts < s.to);
  }

  /** The over-capacity factor for a zone at `ts` (undefined when none). */
  overCapacity(venue: VenueTemplate, zone: string, ts: number): number | undefined {
    if (!this.options.faults) return undefined;
    const a = this.anchored(venue).overCapacity;
    if (a && a.zone === zone && ts >= a.from && ts < a.to) return a.factor;
    return this.plan(venue, localDate(ts, venue.timezone)).overCapacity.find((o) => o.zone === zone && ts >= o.from && ts < o.to)?.factor;
  }

  private anchored(venue: VenueTemplate): { silence?: Silence; overCapacity?: OverCapacity } {
    const { liveFrom, anchoredFaults } = this.options;
    if (liveFrom === undefined || !anchoredFaults) return {};
    const out: { silence?: Silence; overCapacity?: OverCapacity } = {};
    if (anchoredFaults.overCapacityVenue === venue.key) {
      const zone = areaZones(venue).sort((a, b) => a.capacity - b.capacity)[0];
      if (zone) out.overCapacity = { zone: zone.slug, from: liveFrom + 2 * MINUTE, to: liveFrom + 12 * MINUTE, factor: 1.2 };
    }
    if (anchoredFaults.silenceVenue === venue.key) {
      const connector = silenceable(venue)[0];
      if (connector) out.silence = { connector, from: liveFrom + 5 * MINUTE, to: liveFrom + 20 * MINUTE };
    }
    return out;
  }

  private build(venue: VenueTemplate, date: LocalDate): DayPlan {
    const tz = venue.timezone;
    const spec = CURVES[venue.profile];
    const weekday = weekdayOf(date);
    const dayFactor = spec.weekday[weekday]! / average(spec.weekday);
    const open = zonedTime(date, spec.open, tz);
    const close = zonedTime(date, spec.close, tz);
    const at = (minute: number) => zonedTime(date, minute, tz);
    const areas = areaZones(venue);
    const doors = doorZones(venue);
    const entrance = doors.find((d) => d.type === 'entrance')?.slug ?? doors[0]?.slug ?? '';
    const exit = doors.find((d) => d.type === 'exit')?.slug;

    const rng = Random.for(this.seed, venue.key, date, 'visits');
    const total = Math.max(
      0,
      Math.round(venue.visitorsPerDay * this.options.scale * this.multiplier(venue, date) * dayFactor * (1 + rng.normal(0, 0.08))),
    );

    const who: Array<{ regular?: Regular }> = [];
    let staffToday: Regular[] = [];
    for (const r of this.regulars(venue)) {
      if (!rng.chance(Math.min(0.95, r.frequency * (r.staff ? 1 : dayFactor)))) continue;
      if (r.staff) staffToday.push(r);
      else who.push({ regular: r });
    }
    if (who.length > total) who.length = total;
    while (who.length < total) who.push({});
    // Order does not follow arrival: mix regulars in among new visitors.
    for (let i = who.length - 1; i > 0; i--) {
      const j = rng.int(0, i);
      [who[i], who[j]] = [who[j]!, who[i]!];
    }
    const arrivals = arrivalMinutes(spec, who.length, rng);

    const visits: Visit[] = [];
    const closeBy = (ts: number) => Math.min(ts, close - rng.between(0, 8) * MINUTE);
    staffToday = staffToday.slice(0, 6);
    for (const s of staffToday) {
      const arrive = open - rng.between(10, 30) * MINUTE;
      visits.push(this.visit(venue, rng, arrive, close + rng.between(5, 20) * MINUTE, s, 'staff', areas, entrance, exit));
    }
    who.forEach((w, i) => {
      const arrive = at(arrivals[i]!);
      const dwell = Math.min(6 * 60, Math.max(3, rng.logNormal(venue.dwellMinutes, 0.6)));
      const leave = Math.max(arrive + 2 * MINUTE, closeBy(arrive + dwell * MINUTE));
      visits.push(this.visit(venue, rng, arrive, leave, w.regular, w.regular ? 'regular' : 'new', areas, entrance, exit));
    });
    visits.sort((a, b) => a.arrive - b.arrive);

    const prng = Random.for(this.seed, venue.key, date, 'passers');
    const passers: PasserBy[] = arrivalMinutes(spec, Math.round(total * 0.6), prng).map((m) => ({
      at: at(m),
      device: newDevice(prng, 0.5),
      sightings: prng.chance(0.6) ? 1 : 2,
    }));

    const crossings: Crossing[] = [];
    for (const v of visits) {
      crossings.push({ ts: v.arrive, direction: 1, door: v.entranceDoor, count: 0 });
      crossings.push({ ts: v.leave, direction: -1, door: v.exitDoor, count: 0 });
    }
    crossings.sort((a, b) => a.ts - b.ts || b.direction - a.direction);
    let count = 0;
    for (const c of crossings) c.count = count = Math.max(0, count + c.direction);

    const plan: DayPlan = { venue: venue.key, date, open, close, visits, passers, crossings, silences: [], overCapacity: [] };
    if (this.options.faults) this.dayFaults(venue, plan, spec);
    return plan;
  }

  private visit(
    venue: VenueTemplate,
    rng: Random,
    arrive: number,
    leave: number,
    regular: Regular | undefined,
    kind: Visit['kind'],
    areas: ReturnType<typeof areaZones>,
    entrance: string,
    exit: string | undefined,
  ): Visit {
    const zone = rng.weighted(areas.map((z) => [z.slug, z.share ?? 1] as const));
    const device = regular ? regular.device : rng.chance(0.8) ? newDevice(rng, 0.35) : null;
    const associated = device !== null && (regular ? regular.associated : rng.chance(0.4));
    const portalAt =
      associated && rng.chance(kind === 'new' ? 0.45 : 0.15) ? Math.min(leave - MINUTE, arrive + rng.between(1, 5) * MINUTE) : null;
    let purchase: Purchase | null = null;
    if (kind !== 'staff' && rng.chance(venue.buyShare)) {
      const dwell = leave - arrive;
      const at = Math.max(arrive + 30_000, leave - rng.between(1, Math.max(1.5, Math.min(10, dwell / MINUTE / 2))) * MINUTE);
      const status = rng.weighted([
        ['COMPLETED', 96],
        ['FAILED', 3],
        ['CANCELED', 1],
      ] as const);
      purchase = {
        at,
        updatedAt: at + rng.between(3, 30) * 1000,
        createdEventId: rng.uuid(),
        updatedEventId: rng.uuid(),
        paymentId: rng.alnum(29),
        amount: Math.max(100, Math.round(rng.logNormal(venue.basketMinor, 0.5))),
        status,
      };
    }
    const customerId = regular ? regular.customerId : rng.chance(0.15) ? rng.alnum(26).toUpperCase() : null;
    const exitDoor = exit && rng.chance(0.4) ? exit : entrance;
    return { arrive, leave, zone, entranceDoor: entrance, exitDoor, device, associated, portalAt, purchase, customerId, kind };
  }

  /** A day's faults from their own random stream, so turning faults on changes no visitor. */
  private dayFaults(venue: VenueTemplate, plan: DayPlan, spec: CurveSpec): void {
    const rng = Random.for(this.seed, venue.key, plan.date, 'faults');
    const choices = silenceable(venue);
    if (choices.length > 0 && rng.chance(0.5)) {
      const from = plan.open + rng.between(1, Math.max(1.5, (plan.close - plan.open) / HOUR - 2)) * HOUR;
      plan.silences.push({ connector: rng.pick(choices), from, to: from + rng.between(45, 90) * MINUTE });
    }
    const areas = areaZones(venue);
    if (areas.length > 0 && rng.chance(0.35)) {
      const from = zonedTime(plan.date, busiestMinute(spec) + rng.between(-30, 10), venue.timezone);
      plan.overCapacity.push({ zone: rng.pick(areas).slug, from, to: from + rng.between(20, 40) * MINUTE, factor: rng.between(1.05, 1.3) });
    }
  }
}

/** Whether the venue is open from `from` to `to` (both in one local day's opening hours). */
export function openBetween(state: TrafficState, venue: VenueTemplate, from: number, to: number): boolean {
  const plan = state.plan(venue, localDate(from, venue.timezone));
  return plan.open <= from && to <= plan.close;
}

/** Connectors a silence may hit: not the door counters, whose entries and exits must balance. */
export function silenceable(venue: VenueTemplate): ConnectorType[] {
  return venue.connectors.filter((c) => c !== 'density' && c !== 'verkada');
}

/** People in an area zone at `ts` (or in the venue when `zone` is undefined). */
export function presentAt(plan: DayPlan, ts: number, zone?: string): number {
  let n = 0;
  for (const v of plan.visits) if (v.arrive <= ts && ts < v.leave && (zone === undefined || v.zone === zone)) n++;
  return n;
}
