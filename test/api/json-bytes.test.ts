import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseJsonBytes, scanJson } from '../../lib/json-bytes.js';

// Small thresholds, so generated documents are split into many runs.
const small = { splitBytes: 0, runBytes: 40 };
const parse = (b: Buffer) => parseJsonBytes(b, 0, scanJson(b, 0, 1000, small.runBytes), small);

/** The outcome of a parse, comparable: the value, or that it threw (and with which message). */
function outcome(f: () => unknown): { value: unknown } | { error: string } {
  try {
    return { value: f() };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

const sameAsJsonParse = (text: string) => {
  const b = Buffer.from(text);
  expect(outcome(() => parse(b))).toEqual(outcome(() => JSON.parse(text)));
};

describe('JSON from bytes in runs (lib/json-bytes.ts)', () => {
  it('gives what JSON.parse gives, on generated documents with large arrays, whitespace and tricky strings', () => {
    const tricky = fc.constantFrom('', ',', ']', '[', '}', '{', '"', '\\', '\\"', 'é€😀', '#run:', '\u2028');
    const value = fc.oneof(fc.jsonValue({ maxDepth: 3 }), tricky);
    const doc = fc.record({
      events: fc.array(value, { maxLength: 40 }),
      more: fc.array(fc.oneof(value, fc.array(value, { maxLength: 5 })), { maxLength: 20 }),
      other: value,
    });
    fc.assert(
      fc.property(doc, fc.constantFrom('', ' ', '\n\t '), fc.boolean(), (d, space, duplicate) => {
        let text = JSON.stringify(d, null, space.length > 0 ? space : undefined);
        // A repeated key: the last one wins, as in JSON.parse.
        if (duplicate) text = `${text.slice(0, -1)}${text.length > 2 ? ',' : ''}"events":[1,2,3]}`;
        sameAsJsonParse(text);
      }),
      { seed: 20261124, numRuns: 400 },
    );
  });

  it('fails exactly where JSON.parse fails: malformed arrays, cut or corrupted documents', () => {
    const events = JSON.stringify(Array.from({ length: 30 }, (_, i) => ({ i, s: 'x'.repeat(i) })));
    for (const text of [
      `{"events":[1,,2,${events.slice(1)}}`,
      `{"events":[1,2,${events.slice(1, -1)},]}`,
      `{"events":[,${events.slice(1)}}`,
      `{"events":${events},}`,
      `{"events":${events}]`,
      `{"events":[${events}}`,
      `{"events":${events} "x":1}`,
      `{"a":1,"events":${events},"b":[${events},${events}]}`,
      `[${events},${events}]`,
      `"${'y'.repeat(200)}"`,
    ]) {
      sameAsJsonParse(text);
    }
    const whole = JSON.stringify({ venue_id: 'v', events: JSON.parse(events) });
    fc.assert(
      fc.property(fc.nat(whole.length - 1), fc.constantFrom('', ',', ']', '[', '"', '}', '\\'), (at, insert) => {
        sameAsJsonParse(whole.slice(0, at) + insert + whole.slice(at + 1));
      }),
      { seed: 7, numRuns: 2000 },
    );
  });

  it('counts nesting as the depth limit needs, strings skipped', () => {
    expect(scanJson(Buffer.from('{"a":[{"b":"[[[{{{"}],"c":[]}'), 0, 64).deepest).toBe(3);
    expect(scanJson(Buffer.from(`${'['.repeat(100)}${']'.repeat(100)}`), 0, 64).deepest).toBe(65);
    expect(scanJson(Buffer.from('"\\"[[["'), 0, 64).deepest).toBe(0);
  });
});
