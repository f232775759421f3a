import { Readable } from 'node:stream';

/**
 * A JSON document that is already serialised, as a stream of its UTF-8 bytes (for example straight
 * from ClickHouse): the REST transport pipes it to the response instead of parsing and re-encoding it.
 */
export class JsonStream {
  constructor(readonly stream: Readable) {}

  static of(document: string): JsonStream {
    return new JsonStream(Readable.from([Buffer.from(document)]));
  }

  /**
   * The document's text, for a transport that needs the whole (MCP); undefined when it is longer
   * than `maxBytes`, read no further than that (the stream is closed, so its query stops).
   */
  async textUpTo(maxBytes: number): Promise<string | undefined> {
    const chunks: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of this.stream as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      if (bytes > maxBytes) {
        this.stream.destroy();
        return undefined;
      }
      chunks.push(chunk);
    }
    return Buffer.concat(chunks).toString('utf8');
  }
}

const NEWLINE = 0x0a;
const COMMA = 0x2c;

/**
 * `{"name":[row,row,…],…}` from streams of newline-terminated JSON rows (JSONEachRow), read one
 * after the other, bytes passed through: each row's newline becomes the comma before the next row.
 * The rows must hold no raw newline (JSON writers escape them in strings).
 */
export function jsonObjectOfRows(fields: Array<[name: string, rows: Readable]>): Readable {
  async function* bytes(): AsyncGenerator<Buffer> {
    for (const [i, [name, rows]] of fields.entries()) {
      yield Buffer.from(`${i === 0 ? '{' : ','}${JSON.stringify(name)}:[`);
      // The last byte seen is held back: only the stream's end says whether it closes the array.
      let held: Buffer | undefined;
      for await (const chunk of rows as AsyncIterable<Buffer>) {
        if (chunk.length === 0) continue;
        for (let at = chunk.indexOf(NEWLINE); at !== -1; at = chunk.indexOf(NEWLINE, at + 1)) chunk[at] = COMMA;
        if (held) yield held;
        held = chunk.subarray(chunk.length - 1);
        if (chunk.length > 1) yield chunk.subarray(0, chunk.length - 1);
      }
      if (held && held[0] !== COMMA) yield held;
      yield Buffer.from(']');
    }
    yield Buffer.from(fields.length === 0 ? '{}' : '}');
  }
  const out = Readable.from(bytes(), { objectMode: false });
  // Closing early (a client gone) must release every input, including those not read yet.
  out.once('close', () => {
    for (const [, rows] of fields) rows.destroy();
  });
  return out;
}
