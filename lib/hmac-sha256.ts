import { createHash, createHmac } from 'node:crypto';

/**
 * HMAC-SHA-256 (RFC 2104 over FIPS 180-4) of short texts under one key, in JavaScript. Each
 * `createHmac` sets up OpenSSL's HMAC again, hashing the key's two padded blocks and fetching the
 * digest: 2–3 µs a call here, for a 56-byte text whose own hashing is three compressions. Here the
 * padded blocks are hashed once per key, and a text costs its compressions alone (1.3–1.6 µs;
 * benchmarks/README.md, "Keyed hashes without createHmac"). The result is node:crypto's to the bit
 * (test/unit/lib/hmac-sha256.test.ts), so identifiers derived before and after are the same.
 */

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be,
  0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa,
  0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85,
  0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3,
  0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f,
  0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const IV = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);

/** Texts longer than this (in UTF-16 units) go to node:crypto: the scratch space stays small. */
const MAX_TEXT = 1024;

// Scratch space, shared by every key: a call runs to its end before another starts (one per thread).
const W = new Int32Array(64);
const state = new Int32Array(8);
const bytes = new Uint8Array(3 * MAX_TEXT + 72);
const encoder = new TextEncoder();
const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));

/** A 32-bit word as 8 hex digits. */
export const hex32 = (w: number): string => HEX[w >>> 24]! + HEX[(w >>> 16) & 255]! + HEX[(w >>> 8) & 255]! + HEX[w & 255]!;

/** The low 16 bits of a word as 4 hex digits. */
export const hex16 = (w: number): string => HEX[(w >>> 8) & 255]! + HEX[w & 255]!;

/** One compression of the block in W[0..15] into `s`. */
function compress(s: Int32Array): void {
  for (let t = 16; t < 64; t++) {
    const w15 = W[t - 15]!;
    const w2 = W[t - 2]!;
    const s0 = ((w15 >>> 7) | (w15 << 25)) ^ ((w15 >>> 18) | (w15 << 14)) ^ (w15 >>> 3);
    const s1 = ((w2 >>> 17) | (w2 << 15)) ^ ((w2 >>> 19) | (w2 << 13)) ^ (w2 >>> 10);
    // Each sum wrapped at once: the values stay 32-bit integers for the compiler.
    W[t] = (((((W[t - 16]! + s0) | 0) + W[t - 7]!) | 0) + s1) | 0;
  }
  let a = s[0]!;
  let b = s[1]!;
  let c = s[2]!;
  let d = s[3]!;
  let e = s[4]!;
  let f = s[5]!;
  let g = s[6]!;
  let h = s[7]!;
  for (let t = 0; t < 64; t++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const t1 = (((((((h + S1) | 0) + ((e & f) ^ (~e & g))) | 0) + K[t]!) | 0) + W[t]!) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + t2) | 0;
  }
  s[0] = (s[0]! + a) | 0;
  s[1] = (s[1]! + b) | 0;
  s[2] = (s[2]! + c) | 0;
  s[3] = (s[3]! + d) | 0;
  s[4] = (s[4]! + e) | 0;
  s[5] = (s[5]! + f) | 0;
  s[6] = (s[6]! + g) | 0;
  s[7] = (s[7]! + h) | 0;
}

/** The hash state after the key, XORed with `pad`, filled one block. */
function paddedKeyState(key: Uint8Array, pad: number): Int32Array {
  const block = new Uint8Array(64).fill(pad);
  for (let i = 0; i < key.length; i++) block[i] = key[i]! ^ pad;
  for (let i = 0; i < 16; i++) W[i] = (block[4 * i]! << 24) | (block[4 * i + 1]! << 16) | (block[4 * i + 2]! << 8) | block[4 * i + 3]!;
  const s = new Int32Array(IV);
  compress(s);
  return s;
}

export class HmacSha256Key {
  private readonly inner: Int32Array;
  private readonly outer: Int32Array;
  private readonly key: Uint8Array;

  constructor(key: Uint8Array) {
    // RFC 2104: a key longer than the block is hashed first.
    this.key = key.length > 64 ? createHash('sha256').update(key).digest() : Uint8Array.from(key);
    this.inner = paddedKeyState(this.key, 0x36);
    this.outer = paddedKeyState(this.key, 0x5c);
  }

  /** The first `hexDigits` (at most 64) lower-case hex digits of HMAC-SHA-256(key, UTF-8 of `text`). */
  hex(text: string, hexDigits = 64): string {
    const words = this.words(text);
    let out = '';
    for (let i = 0; i < (hexDigits + 7) >> 3; i++) out += hex32(words[i]!);
    return out.length === hexDigits ? out : out.slice(0, hexDigits);
  }

  /**
   * HMAC-SHA-256(key, UTF-8 of `text`) as eight big-endian 32-bit words. The array is shared: it
   * holds this answer until the next call on any key.
   */
  words(text: string): Int32Array {
    if (text.length > MAX_TEXT) {
      const digest = createHmac('sha256', this.key).update(text).digest();
      for (let i = 0; i < 8; i++) state[i] = digest.readInt32BE(4 * i);
    } else this.digest(text);
    return state;
  }

  /** Leaves HMAC(key, text) in `state`. */
  private digest(text: string): void {
    let n = text.length;
    let ascii = true;
    for (let i = 0; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c > 0x7f) {
        ascii = false;
        break;
      }
      bytes[i] = c;
    }
    // Lone surrogates become U+FFFD, as node:crypto's UTF-8 has them.
    if (!ascii) n = encoder.encodeInto(text, bytes).written;
    // The text after the key's block, then 0x80, zeros and the length in bits of key block and text.
    const end = ((n + 9 + 63) >> 6) << 6;
    bytes[n] = 0x80;
    bytes.fill(0, n + 1, end - 4);
    const bits = (64 + n) * 8;
    bytes[end - 4] = bits >>> 24;
    bytes[end - 3] = bits >>> 16;
    bytes[end - 2] = bits >>> 8;
    bytes[end - 1] = bits;
    state.set(this.inner);
    for (let o = 0; o < end; o += 64) {
      for (let i = 0; i < 16; i++) {
        const p = o + 4 * i;
        W[i] = (bytes[p]! << 24) | (bytes[p + 1]! << 16) | (bytes[p + 2]! << 8) | bytes[p + 3]!;
      }
      compress(state);
    }
    // The outer hash: the key's other block, then the inner digest (32 bytes) and its padding.
    for (let i = 0; i < 8; i++) W[i] = state[i]!;
    W[8] = 0x80000000 | 0;
    W.fill(0, 9, 15);
    W[15] = (64 + 32) * 8;
    state.set(this.outer);
    compress(state);
  }
}
