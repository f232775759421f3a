import { createRequire } from 'node:module';

/** What kafkajs 2.2.4's protocol encoder holds: bytes written so far are `buf[0, offset)`. */
interface Encoder {
  buf: Buffer;
  offset: number;
  /** Set by this mend once a large piece was taken by reference (below). */
  rope?: Rope;
  readonly buffer: Buffer;
  writeBufferInternal(buffer: Buffer): void;
  ensureAvailable(length: number): void;
  writeEncoder(value: Encoder): Encoder;
  writeEncoderArray(value: Encoder[]): Encoder;
  size(): number;
}

/** Pieces written before `buf[base, offset)`, in order: `bytes` of them in all. */
interface Rope {
  pieces: Buffer[];
  bytes: number;
  base: number;
}

/** A write of at least this many bytes is kept by reference, not copied. */
const BY_REFERENCE = 2048;

const isEncoder = (v: unknown): v is Encoder => v != null && Buffer.isBuffer((v as Encoder).buf);

/**
 * Stops kafkajs 2.2.4 from copying every produced byte about eight times. Its encoder is one
 * contiguous buffer, zero-filled (`Buffer.alloc`) and doubled as it fills, and each layer of a
 * produce request (record, record batch, partition, topic, request, size prefix) is a new encoder
 * that copies the layer below whole: a 320 KB ingest request allocated and zeroed about 5 MB and
 * copied about 3 MB, 1.1 ms of CPU, most of kafkajs's share of the api
 * (benchmarks/README.md, "kafkajs's produce encoder").
 *
 * Here a large write (a message value, a layer below) is kept by reference as a piece, and small
 * writes go on into the encoder's buffer as before; an encoder written into another hands over
 * its pieces. The bytes are joined once, when `buffer` is read: for the record batch's checksum
 * and for the request kafkajs writes to the socket. Buffers grow without zero-filling: kafkajs
 * reads only the bytes it wrote (`buffer` is `buf[0, offset)`). Returns false when kafkajs no
 * longer has the methods (a release that changed its encoder): it then keeps its copies.
 */
export function encodeWithoutCopies(): boolean {
  const Encoder = createRequire(import.meta.url)('kafkajs/src/protocol/encoder.js') as {
    prototype: Encoder;
    nextPowerOfTwo(n: number): number;
  };
  const proto = Encoder.prototype;
  const methods = ['writeBufferInternal', 'ensureAvailable', 'writeEncoder', 'writeEncoderArray', 'size'] as const;
  if (methods.some((m) => typeof proto[m] !== 'function') || typeof Encoder.nextPowerOfTwo !== 'function') return false;
  if (!Object.getOwnPropertyDescriptor(proto, 'buffer')?.get) return false;

  /** Ends the buffer's part since the last piece as a piece of its own (bytes after it go on into the same buffer). */
  const cut = (e: Encoder): Rope => {
    const rope = (e.rope ??= { pieces: [], bytes: 0, base: 0 });
    if (e.offset > rope.base) {
      rope.pieces.push(e.buf.subarray(rope.base, e.offset));
      rope.bytes += e.offset - rope.base;
      rope.base = e.offset;
    }
    return rope;
  };
  const take = (e: Encoder, piece: Buffer) => {
    const rope = cut(e);
    rope.pieces.push(piece);
    rope.bytes += piece.length;
  };

  proto.ensureAvailable = function (this: Encoder, length: number) {
    if (this.offset + length <= this.buf.length) return;
    // Only the bytes since the last piece live in the buffer alone: the pieces keep their own views of it.
    const base = this.rope?.base ?? 0;
    const next = Buffer.allocUnsafe(Encoder.nextPowerOfTwo(this.offset - base + length));
    this.buf.copy(next, 0, base, this.offset);
    this.offset -= base;
    this.buf = next;
    if (this.rope) this.rope.base = 0;
  };
  proto.writeBufferInternal = function (this: Encoder, buffer: Buffer) {
    if (buffer.length >= BY_REFERENCE) return take(this, buffer);
    this.ensureAvailable(buffer.length);
    buffer.copy(this.buf, this.offset, 0);
    this.offset += buffer.length;
  };
  const writeOne = (into: Encoder, value: Encoder) => {
    if (!value.rope) return into.writeBufferInternal(value.buf.subarray(0, value.offset));
    const from = cut(value);
    const rope = cut(into);
    for (const piece of from.pieces) rope.pieces.push(piece);
    rope.bytes += from.bytes;
  };
  proto.writeEncoder = function (this: Encoder, value: Encoder) {
    if (!isEncoder(value)) throw new Error('value should be an instance of Encoder');
    writeOne(this, value);
    return this;
  };
  proto.writeEncoderArray = function (this: Encoder, value: Encoder[]) {
    if (!Array.isArray(value) || !value.every(isEncoder)) throw new Error('all values should be an instance of Encoder[]');
    for (const v of value) writeOne(this, v);
    return this;
  };
  proto.size = function (this: Encoder) {
    return this.rope ? this.rope.bytes + this.offset - this.rope.base : this.offset;
  };
  Object.defineProperty(proto, 'buffer', {
    configurable: true,
    get(this: Encoder): Buffer {
      if (!this.rope) return this.buf.slice(0, this.offset);
      const rope = cut(this);
      // Joined once; the encoder goes on from the joined bytes, so a second read copies nothing.
      const joined = rope.pieces.length === 1 ? rope.pieces[0]! : Buffer.concat(rope.pieces, rope.bytes);
      this.rope = undefined;
      this.buf = joined;
      this.offset = joined.length;
      return joined;
    },
  });
  return true;
}
