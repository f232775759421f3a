import type { Ch } from '../../clickhouse/client.js';
import {
  insertDerivedOccupancy,
  insertDerivedZoneOccupancy,
  type DerivedOccupancyRow,
  type DerivedZoneOccupancyRow,
} from '../../clickhouse/queries/derive.js';
import {
  insertDerivedVisits,
  insertVisitStates,
  type DerivedVisitRow,
  type VisitStateRow,
} from '../../clickhouse/queries/derive-visits.js';

/** Rows a round holds before it writes them out mid-round (a first run or a backfill rewrites many venue days). */
export const ROUND_WRITE_ROWS = 50_000;

function append<T>(to: T[], rows: readonly T[]): void {
  // Not push(...rows): a first run's venue day can hold more rows than a call takes arguments.
  for (const r of rows) to.push(r);
}

/**
 * What a derive round's recomputations write, gathered and inserted one statement per table: a
 * round over many venues otherwise sends up to four inserts per venue period, and ClickHouse makes
 * a part of each insert (and of each view it feeds), writes its files, and merges it later
 * (docs/processors.md#derived-from-the-raw-table, figures: benchmarks/README.md). Rows are written
 * when the round ends (`flush`), or sooner once `maxRows` wait (`flushIfFull`), always visits and
 * occupancy first and the visit states last: a state's checkpoint must land only after the visits
 * it covers, so a round failing in between is redone from the same checkpoint. The caller saves
 * its progress only after the last flush.
 */
export class RoundWrites {
  private visits: DerivedVisitRow[] = [];
  private occupancy: DerivedOccupancyRow[] = [];
  private zoneOccupancy: DerivedZoneOccupancyRow[] = [];
  private states: VisitStateRow[] = [];

  constructor(
    private readonly ch: Ch,
    private readonly maxRows = ROUND_WRITE_ROWS,
  ) {}

  addVisits(rows: DerivedVisitRow[]): void {
    append(this.visits, rows);
  }

  addOccupancy(rows: DerivedOccupancyRow[]): void {
    append(this.occupancy, rows);
  }

  addZoneOccupancy(rows: DerivedZoneOccupancyRow[]): void {
    append(this.zoneOccupancy, rows);
  }

  /** A venue period's states with its checkpoint row last, as one run: they stay together and in order in one insert. */
  addStates(rows: VisitStateRow[]): void {
    append(this.states, rows);
  }

  get pending(): number {
    return this.visits.length + this.occupancy.length + this.zoneOccupancy.length + this.states.length;
  }

  async flushIfFull(): Promise<void> {
    if (this.pending >= this.maxRows) await this.flush();
  }

  async flush(): Promise<void> {
    const { visits, occupancy, zoneOccupancy, states } = this;
    this.visits = [];
    this.occupancy = [];
    this.zoneOccupancy = [];
    this.states = [];
    await Promise.all([
      visits.length > 0 && insertDerivedVisits(this.ch, visits),
      occupancy.length > 0 && insertDerivedOccupancy(this.ch, occupancy),
      zoneOccupancy.length > 0 && insertDerivedZoneOccupancy(this.ch, zoneOccupancy),
    ]);
    if (states.length > 0) await insertVisitStates(this.ch, states);
  }
}
