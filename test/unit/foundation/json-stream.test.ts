import { PassThrough, Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { describe, expect, it } from 'vitest';
import { JsonStream, jsonObjectOfRows } from '../../../lib/json-stream.js';

/** Rows as a stream cut into chunks of `size` bytes, so row ends fall anywhere in a chunk. */
const rowsIn = (rows: unknown[], size: number): Readable => {
  const all = Buffer.from(rows.map((r) => `${JSON.stringify(r)}\n`).join(''));
  const chunks: Buffer[] = [];
  for (let at = 0; at < all.length; at += size) chunks.push(all.subarray(at, at + size));
  return Readable.from(chunks, { objectMode: false });
};

describe('a JSON object made of JSONEachRow streams', () => {
  const series = {
    temperature: [
      { ts: 60_000, value: 20.5 },
      { ts: 120_000, value: null },
      { ts: 180_000, value: 1e-7 },
    ],
    noise: [],
    co2: [{ ts: 60_000, value: 415 }],
  };

  it('is the same document however the rows are cut into chunks', async () => {
    for (const size of [1, 2, 7, 33, 10_000]) {
      const out = await text(jsonObjectOfRows(Object.entries(series).map(([name, rows]) => [name, rowsIn(rows, size)])));
      expect(JSON.parse(out), `chunks of ${size}`).toEqual(series);
      expect(Object.keys(JSON.parse(out) as object)).toEqual(['temperature', 'noise', 'co2']);
    }
  });

  it('is an empty object without fields', async () => {
    expect(await text(jsonObjectOfRows([]))).toBe('{}');
  });

  it('releases every input, read or not, when the reader goes away', async () => {
    const inputs = [new PassThrough(), new PassThrough(), new PassThrough()];
    inputs[0]!.write('{"ts":1,"value":2}\n');
    const out = jsonObjectOfRows(inputs.map((s, i) => [`k${i}`, s]));
    await new Promise((resolve) => out.once('data', resolve));
    out.destroy();
    await new Promise((resolve) => out.once('close', resolve));
    expect(inputs.map((s) => s.destroyed)).toEqual([true, true, true]);
  });
});

describe('a JSON document read whole up to a size', () => {
  it('is the text within the size, and nothing past it: the stream is closed so its query stops', async () => {
    const doc = JSON.stringify({ temperature: Array.from({ length: 100 }, (_, i) => ({ ts: i, value: i })) });
    expect(await JsonStream.of(doc).textUpTo(doc.length)).toBe(doc);
    const source = Readable.from([Buffer.from(doc.slice(0, 500)), Buffer.from(doc.slice(500))], { objectMode: false });
    expect(await new JsonStream(source).textUpTo(doc.length - 1)).toBeUndefined();
    expect(source.destroyed).toBe(true);
  });
});
