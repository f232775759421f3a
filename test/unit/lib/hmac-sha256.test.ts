import { createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { HmacSha256Key } from '../../../lib/hmac-sha256.js';

const reference = (key: Uint8Array, text: string) => createHmac('sha256', key).update(text).digest('hex');

/** A random text of `length` UTF-16 units: mostly printable ASCII, or any code unit at all (lone surrogates included). */
function randomText(length: number, wide: boolean): string {
  let s = '';
  for (let i = 0; i < length; i++)
    s += String.fromCharCode(wide && Math.random() < 0.3 ? Math.floor(Math.random() * 0x10000) : 0x20 + Math.floor(Math.random() * 95));
  return s;
}

describe('HMAC-SHA-256 in JavaScript', () => {
  it("gives node:crypto's digest for texts of every length around the block boundaries, ASCII and not", () => {
    const raw = randomBytes(32);
    const key = new HmacSha256Key(raw);
    for (let length = 0; length <= 300; length++)
      for (const wide of [false, true]) {
        const text = randomText(length, wide);
        expect(key.hex(text), `length ${length}${wide ? ', wide' : ''}`).toBe(reference(raw, text));
      }
  });

  it('holds for keys of any length (longer than a block: hashed first), texts past the JavaScript path, and many keys in turn', () => {
    for (const keyLength of [0, 1, 31, 32, 33, 63, 64, 65, 100, 200]) {
      const raw = randomBytes(keyLength);
      const key = new HmacSha256Key(raw);
      for (const text of [
        '',
        'a',
        randomText(55, false),
        randomText(56, true),
        randomText(1024, true),
        randomText(1025, true),
        randomText(5000, false),
      ])
        expect(key.hex(text), `key ${keyLength}, text ${text.length}`).toBe(reference(raw, text));
    }
    const keys = Array.from({ length: 20 }, () => randomBytes(32));
    const hmacs = keys.map((k) => new HmacSha256Key(k));
    for (let i = 0; i < 2000; i++) {
      const text = randomText(Math.floor(Math.random() * 200), i % 2 === 0);
      expect(hmacs[i % 20]!.hex(text)).toBe(reference(keys[i % 20]!, text));
    }
  });

  it('gives the leading hex digits asked for, and keeps its own copy of the key', () => {
    const raw = randomBytes(32);
    const key = new HmacSha256Key(raw);
    const full = reference(raw, 'aa:bb:cc:dd:ee:ff');
    for (let digits = 1; digits <= 64; digits++) expect(key.hex('aa:bb:cc:dd:ee:ff', digits)).toBe(full.slice(0, digits));
    raw.fill(0);
    expect(key.hex('aa:bb:cc:dd:ee:ff')).toBe(full);
  });

  it('encodes text to UTF-8 as node:crypto does: multi-byte characters, pairs and lone surrogates', () => {
    const raw = randomBytes(32);
    const key = new HmacSha256Key(raw);
    for (const text of ['é', '漢字', '😀', '\ud83d', '\ude00', 'a\ud83dz', '\ude00\ud83d', `${'x'.repeat(54)}é`, `${'x'.repeat(55)}😀`])
      expect(key.hex(text)).toBe(reference(raw, text));
  });
});
