import type { EventType } from '../../lib/events/vocabulary.js';
import type { DayPlan, TrafficState } from '../model.js';
import type { SimVenue } from '../venues.js';

/** One event of an ingest batch, as `POST /ingest` takes it. */
export interface IngestEvent {
  type: EventType | string;
  timestamp: string;
  payload: Record<string, unknown>;
  event_id?: string;
}

export interface GeneratedEvent {
  ts: number;
  event: IngestEvent;
  /** Deliberately malformed (faults): the API must reject it with a reason. */
  malformed?: true;
}

/** A half-open span of time [from, to) in epoch ms. */
export interface Window {
  from: number;
  to: number;
}

/** A connector's traffic for a window: pure in (window, venue, state); the state's seed is the randomness. */
export type Generator = (window: Window, venue: SimVenue, state: TrafficState) => GeneratedEvent[];

export const inWindow = (w: Window, ts: number) => ts >= w.from && ts < w.to;

export const iso = (ts: number) => new Date(ts).toISOString();

export function event(ts: number, type: EventType, payload: Record<string, unknown>, eventId?: string): GeneratedEvent {
  const e: IngestEvent = { type, timestamp: iso(Math.round(ts)), payload };
  if (eventId !== undefined) e.event_id = eventId;
  return { ts: Math.round(ts), event: e };
}

/** Whether a visit or a passer-by can have events in the window (with a margin for trailing events). */
export const overlaps = (w: Window, from: number, to: number) => from < w.to && to + 60_000 >= w.from;

/** Plans whose opening hours (with an hour either side) meet the window. */
export const plansIn = (w: Window, venue: SimVenue, state: TrafficState): DayPlan[] =>
  state.plansFor(venue, w.from, w.to).filter((p) => p.open - 2 * 3_600_000 < w.to && p.close + 2 * 3_600_000 > w.from);

/** Instants on a fixed grid (multiples of `step` since the epoch) inside the window. */
export function grid(w: Window, step: number): number[] {
  const out: number[] = [];
  for (let t = Math.ceil(w.from / step) * step; t < w.to; t += step) out.push(t);
  return out;
}
