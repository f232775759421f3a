import { z } from 'zod';
import { decodeStateEntry } from '../../../lib/events/wire.js';
import { Chunk, flowBytes, ID_BYTES, type Scope } from './model.js';

/*
 * The occupancy processor's changelog values. A head is a JSON array (an entry of the layout
 * before chunks is a JSON object); a chunk is binary: format byte, flags (1 dropped, 2 counted),
 * for a dropped chunk its fold state and last flow, then the flows (key delta, amount) and the
 * derived ids (16 bytes each), numbers as (zigzag) varints.
 */
const HEAD_FORMAT = 1;
const CHUNK_FORMAT = 1;

export function encodeHead(s: Scope): Buffer {
  return Buffer.from(JSON.stringify([HEAD_FORMAT, s.operatorId, s.timezone, s.resetHour, s.period, s.value, s.ts, s.clampsAt]));
}

/** What a scope's head entry holds: its settings, period and the figure last emitted. */
export type Head = Pick<Scope, 'operatorId' | 'timezone' | 'resetHour' | 'period' | 'value' | 'ts' | 'clampsAt'>;

const headSchema = z.tuple([z.literal(HEAD_FORMAT), z.string(), z.string(), z.number(), z.number(), z.number(), z.number(), z.number()]);

/** True for a head entry; otherwise the value is an entry of the layout before chunks. */
export const isHead = (value: Buffer) => value[0] === 0x5b; /* [ */

/** A head entry, or null when it is not one of this format (throws when it is not JSON at all). */
export function decodeHead(value: Buffer): Head | null {
  const head = headSchema.safeParse(JSON.parse(value.toString('utf8')));
  if (!head.success) return null;
  const [, operatorId, timezone, resetHour, period, v, ts, clampsAt] = head.data;
  return { operatorId, timezone, resetHour, period, value: v, ts, clampsAt };
}

/** A scope entry of the layout before chunks (its window is not needed: `value` is the figure after it). */
const oldScopeSchema = z.object({
  operatorId: z.string(),
  timezone: z.string(),
  resetHour: z.number(),
  value: z.number(),
  ts: z.number(),
  period: z.number(),
});
export type OldScope = z.infer<typeof oldScopeSchema>;

/** A scope entry of the layout before chunks, or null when it does not read. */
export function decodeOldScope(value: Buffer): OldScope | null {
  try {
    return decodeStateEntry(oldScopeSchema, value);
  } catch {
    return null;
  }
}

let scratch = Buffer.allocUnsafe(64 * 1024);

class Writer {
  at = 0;
  constructor(size: number) {
    if (scratch.length < size) scratch = Buffer.allocUnsafe(Math.max(size, scratch.length * 2));
  }
  byte(b: number): void {
    scratch[this.at++] = b;
  }
  /** A non-negative safe integer. */
  uint(v: number): void {
    while (v >= 128) {
      scratch[this.at++] = (v % 128) + 128;
      v = Math.floor(v / 128);
    }
    scratch[this.at++] = v;
  }
  int(v: number): void {
    this.uint(v >= 0 ? v * 2 : -v * 2 - 1);
  }
  uuid(id: string): void {
    this.at += scratch.write(id.replace(/-/g, ''), this.at, 'hex');
  }
  done(): Buffer {
    return Buffer.from(scratch.subarray(0, this.at));
  }
}

class Reader {
  at = 0;
  constructor(readonly buf: Buffer) {}
  byte(): number {
    if (this.at >= this.buf.length) throw new Error('chunk entry truncated');
    return this.buf[this.at++]!;
  }
  uint(): number {
    let v = 0;
    let scale = 1;
    for (;;) {
      const b = this.byte();
      v += (b & 127) * scale;
      if (b < 128) return v;
      scale *= 128;
    }
  }
  int(): number {
    const z = this.uint();
    return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
  }
  uuid(): string {
    if (this.at + 16 > this.buf.length) throw new Error('chunk entry truncated');
    const h = this.buf.toString('hex', this.at, (this.at += 16));
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }
}

export function encodeChunk(c: Chunk): Buffer {
  if (c.encoded) return c.encoded;
  const n = c.keys.length;
  const w = new Writer(64 + n * 16 + (c.ids?.size ?? 0) * 16);
  w.byte(CHUNK_FORMAT);
  w.byte((c.dropped ? 1 : 0) | (c.counted ? 2 : 0));
  if (c.dropped) {
    w.int(c.sum);
    w.int(c.low);
    w.int(c.value);
    w.int(c.after);
    w.uint(c.lastKey);
    w.int(c.lastAmount);
  }
  w.uint(n);
  let prev = 0;
  for (let i = 0; i < n; i++) {
    w.uint(c.keys[i]! - prev);
    prev = c.keys[i]!;
    w.int(c.amounts[i]!);
  }
  w.uint(c.ids?.size ?? 0);
  for (const id of c.ids ?? []) w.uuid(id);
  return (c.encoded = w.done());
}

export function decodeChunk(value: Buffer, minute: number, key: string): Chunk {
  const r = new Reader(value);
  if (r.byte() !== CHUNK_FORMAT) throw new Error('unknown chunk entry format');
  const flags = r.byte();
  const c = new Chunk(minute, key);
  if (flags & 1) {
    c.dropped = true;
    c.counted = (flags & 2) !== 0;
    c.sum = r.int();
    c.low = r.int();
    c.value = r.int();
    c.after = r.int();
    c.lastKey = r.uint();
    c.lastAmount = r.int();
  }
  const n = r.uint();
  let prev = 0;
  for (let i = 0; i < n; i++) {
    prev += r.uint();
    c.keys.push(prev);
    const a = r.int();
    c.amounts.push(a);
    c.bytes += flowBytes(a);
  }
  const ids = r.uint();
  if (ids > 0) c.ids = new Set();
  for (let i = 0; i < ids; i++) c.ids!.add(r.uuid());
  c.bytes += ids * ID_BYTES;
  if (!c.dropped) {
    c.dirtyFrom = 0;
    c.refold();
  }
  c.encoded = Buffer.from(value);
  return c;
}
