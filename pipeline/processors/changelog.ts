/**
 * How a processor's state entries are laid out in its compacted changelog topic, per partition
 * (docs/processors.md#the-changelog).
 *
 * Every Kafka record has a fixed CPU cost (kafkajs encodes each on its own, the broker stores and
 * indexes it), which one record per entry paid once per device seen (figures in the doc). So the
 * entries a transaction writes go into a few large records keyed by *slot* (`#slot:<n>`) instead:
 *
 * - A slot's record supersedes its previous one: it carries again every live entry whose latest
 *   value was in that previous record, so compaction, which keeps each slot's latest record, never
 *   drops a live entry. Restore applies the records it finds in offset order, entry by entry.
 * - A transaction writes the least recently written slot (and new slots for what exceeds
 *   SLOT_BYTES). A changed entry leaves the slot it was in; a deletion is written as an entry
 *   without value and is not carried. By the time the deletion's slot is least recently written
 *   again, every other slot has been written since, so no retained record holds the old value.
 * - The ring grows so that a slot carries about ENTRIES_PER_SLOT live entries: a transaction's cost
 *   is its changes plus one slot's worth, whatever the size of the state.
 * - Records of the per-entry layout (keyed by the entry) are still read, so an existing changelog
 *   restores; the first write after a restore moves their entries into slots and deletes them.
 */
export const SLOT_KEY_PREFIX = '#slot:';
/** A slot record's size above which the next entry goes to another slot (brokers refuse 1 MB by default). */
export const SLOT_BYTES = 256 * 1024;
export const ENTRIES_PER_SLOT = 256;
const MIN_SLOTS = 16;

export interface ChangelogRecord {
  key: string;
  value: Buffer | null;
}

export class ChangelogLayout {
  /** The slot whose latest record holds each live entry. */
  private readonly slotOf = new Map<string, number>();
  private readonly inSlot: Array<Set<string>> = [];
  /** When each slot was last written (a counter; 0: never). */
  private readonly writtenAt: number[] = [];
  private clock = 0;
  /** Entries read from one-record-per-entry records: moved into slots by the next write. */
  private readonly legacy = new Set<string>();

  constructor() {
    this.ensureSlots(MIN_SLOTS);
  }

  /** Applies one changelog record (in offset order) at restore, calling `apply` per entry. */
  restore(key: string, value: Buffer | null, apply: (key: string, value: Buffer | null) => void): void {
    if (!key.startsWith(SLOT_KEY_PREFIX)) {
      apply(key, value);
      if (value === null) this.legacy.delete(key);
      else this.legacy.add(key);
      return;
    }
    const slot = Number(key.slice(SLOT_KEY_PREFIX.length));
    this.ensureSlots(slot + 1);
    for (const [k, v] of decodeSlot(value)) {
      apply(k, v);
      this.unplace(k);
      if (v !== null) this.place(k, slot);
    }
    // The order of the slots' last writes is the writer's: the least recently written comes next.
    this.writtenAt[slot] = ++this.clock;
  }

  /**
   * The changelog records of a transaction: the entries `changed`, the entries the slots written
   * carry, and the moving of entries of the old layout. `current` gives an entry's value as the
   * processor holds it now (null: deleted).
   */
  write(changed: Iterable<string>, current: (key: string) => Buffer | null): ChangelogRecord[] {
    const out: ChangelogRecord[] = [];
    // The old records are deleted first, so the new values come after them in the partition.
    for (const k of this.legacy) out.push({ key: k, value: null });
    const dirty = new Set([...this.legacy, ...changed]);
    this.legacy.clear();
    const queue: Array<[string, Buffer | null]> = [];
    for (const k of dirty) {
      const v = current(k);
      // A value never written needs no deletion.
      if (v === null && !this.slotOf.has(k)) continue;
      this.unplace(k);
      queue.push([k, v]);
    }
    if (queue.length === 0) return out;
    this.ensureSlots(Math.ceil((this.slotOf.size + queue.length) / ENTRIES_PER_SLOT));
    // The least recently written slot takes what it carries first, then the changes; what does not
    // fit goes to new slots (another full slot would carry its own entries on, and so on).
    const oldest = this.leastRecentlyWritten();
    const carried: Array<[string, Buffer | null]> = [];
    for (const k of this.inSlot[oldest]!) {
      this.slotOf.delete(k);
      carried.push([k, current(k)]);
    }
    this.inSlot[oldest] = new Set();
    const all = [...carried, ...queue];
    for (let next = 0, first = true; next < all.length; first = false) {
      const slot = first ? oldest : this.newSlot();
      const entries: Array<[string, Buffer | null]> = [];
      let bytes = 4;
      while (next < all.length) {
        const [k, v] = all[next]!;
        const size = entryBytes(k, v);
        if (entries.length > 0 && bytes + size > SLOT_BYTES) break;
        entries.push([k, v]);
        bytes += size;
        next++;
        if (v !== null) this.place(k, slot);
      }
      out.push({ key: `${SLOT_KEY_PREFIX}${slot}`, value: encodeSlot(entries, bytes) });
      this.writtenAt[slot] = ++this.clock;
    }
    return out;
  }

  private leastRecentlyWritten(): number {
    let oldest = 0;
    for (let s = 1; s < this.writtenAt.length; s++) if (this.writtenAt[s]! < this.writtenAt[oldest]!) oldest = s;
    return oldest;
  }

  private newSlot(): number {
    this.ensureSlots(this.writtenAt.length + 1);
    return this.writtenAt.length - 1;
  }

  private ensureSlots(n: number): void {
    while (this.writtenAt.length < n) {
      this.writtenAt.push(0);
      this.inSlot.push(new Set());
    }
  }

  private place(key: string, slot: number): void {
    this.slotOf.set(key, slot);
    this.inSlot[slot]!.add(key);
  }

  private unplace(key: string): void {
    const at = this.slotOf.get(key);
    if (at === undefined) return;
    this.slotOf.delete(key);
    this.inSlot[at]!.delete(key);
  }
}

const entryBytes = (key: string, value: Buffer | null) => 8 + Buffer.byteLength(key) + (value?.length ?? 0);

/** Entries as `count, (key length, key, value length or -1, value)*`, lengths 32-bit big-endian. */
function encodeSlot(entries: Array<[string, Buffer | null]>, bytes: number): Buffer {
  const buf = Buffer.allocUnsafe(bytes);
  let at = buf.writeUInt32BE(entries.length, 0);
  for (const [k, v] of entries) {
    const keyBytes = buf.write(k, at + 4, 'utf8');
    buf.writeUInt32BE(keyBytes, at);
    at += 4 + keyBytes;
    at = buf.writeInt32BE(v ? v.length : -1, at);
    if (v) at += v.copy(buf, at);
  }
  return buf;
}

function* decodeSlot(value: Buffer | null): Generator<[string, Buffer | null]> {
  if (!value || value.length < 4) return;
  const n = value.readUInt32BE(0);
  let at = 4;
  for (let i = 0; i < n; i++) {
    const keyBytes = value.readUInt32BE(at);
    const key = value.toString('utf8', at + 4, at + 4 + keyBytes);
    at += 4 + keyBytes;
    const size = value.readInt32BE(at);
    at += 4;
    if (size < 0) yield [key, null];
    else {
      yield [key, value.subarray(at, at + size)];
      at += size;
    }
  }
}
