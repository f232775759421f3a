import { dayString, localDayNumber, nextPeriodStart, periodStart } from '../../domain/telemetry/calendar.js';

/** A venue's reset period (its business day): [start, end) in epoch ms, named by the local date it starts on. */
export interface Period {
  start: number;
  end: number;
  day: string;
}

export function periodAt(ts: number, resetHour: number, timezone: string): Period {
  const start = periodStart(ts, resetHour, timezone);
  return { start, end: nextPeriodStart(start, resetHour, timezone), day: dayString(localDayNumber(start, timezone)) };
}

/** Every period that [fromMs, toMs] touches, oldest first. */
export function periodsBetween(fromMs: number, toMs: number, resetHour: number, timezone: string): Period[] {
  const out: Period[] = [];
  for (let p = periodAt(fromMs, resetHour, timezone); p.start <= toMs; p = periodAt(p.end, resetHour, timezone)) out.push(p);
  return out;
}
