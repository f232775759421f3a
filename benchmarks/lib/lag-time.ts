import type { Admin } from 'kafkajs';
import { topicOffsets } from '../../lib/kafka.js';

/** A group reading a topic, watched for how far behind its head it is. */
export interface Watched {
  name: string;
  groupId: string;
  topic: string;
}

interface Heads {
  at: number;
  ends: Map<number, number>;
}

/** Head offsets kept: enough to date any lag the soak can build up (a look-up every `everyMs`). */
const KEPT_MS = 10 * 60_000;

/**
 * How many seconds each group is behind the head of its topic, as time rather than messages: the
 * topics' end offsets are looked up every `everyMs`, and the first message a group has not
 * committed is dated to the look-up before the one that first saw it (it arrived after that one):
 * never less than the truth, at most `everyMs` more. A group's figure is its worst
 * partition's; 0 when it has committed everything. Messages are the wrong unit for a goal in
 * seconds: one ingest request is several messages (runs of about 32 KB), and their rate moves
 * with the load. `worst()` gives each group's highest figure since the last call.
 */
export class LagInTime {
  private readonly heads = new Map<string, Heads[]>();
  private readonly worstSince = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private busy = false;

  constructor(
    private readonly admin: Admin,
    private readonly watched: Watched[],
    private readonly everyMs = 1000,
  ) {
    for (const w of watched) this.worstSince.set(w.name, Number.NaN);
  }

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.everyMs);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Each group's highest seconds behind since the previous call (NaN where no look-up succeeded). */
  worst(): Record<string, number> {
    const out = Object.fromEntries(this.worstSince);
    for (const w of this.watched) this.worstSince.set(w.name, Number.NaN);
    return out;
  }

  private async tick(): Promise<void> {
    // A look-up slower than the interval is skipped, not queued behind.
    if (this.busy) return;
    this.busy = true;
    try {
      const now = Date.now();
      for (const topic of new Set(this.watched.map((w) => w.topic))) {
        const ends = new Map((await topicOffsets(this.admin, topic)).map((o) => [o.partition, Number(o.high)]));
        const list = this.heads.get(topic) ?? [];
        list.push({ at: now, ends });
        while (list.length > 1 && list[0]!.at < now - KEPT_MS) list.shift();
        this.heads.set(topic, list);
      }
      for (const w of this.watched) {
        const [t] = await this.admin.fetchOffsets({ groupId: w.groupId, topics: [w.topic] });
        const committed = new Map(t!.partitions.map((p) => [p.partition, Math.max(0, Number(p.offset))]));
        const behind = secondsBehind(this.heads.get(w.topic)!, committed, now);
        const before = this.worstSince.get(w.name)!;
        this.worstSince.set(w.name, Number.isNaN(before) ? behind : Math.max(before, behind));
      }
    } catch {
      // A failed look-up leaves the figures of the others; the sample shows NaN if none succeeded.
    } finally {
      this.busy = false;
    }
  }
}

/**
 * Seconds since the look-up before the first whose head was past the committed offset, over the
 * partitions (the oldest look-up kept when even that one was past it).
 */
export function secondsBehind(heads: Heads[], committed: Map<number, number>, now: number): number {
  const latest = heads.at(-1)!;
  let worst = 0;
  for (const [partition, end] of latest.ends) {
    const done = committed.get(partition) ?? 0;
    if (done >= end) continue;
    const first = heads.findIndex((h) => (h.ends.get(partition) ?? 0) > done);
    worst = Math.max(worst, (now - heads[Math.max(0, first - 1)]!.at) / 1000);
  }
  return worst;
}
