import { randomBytes } from 'node:crypto';

/*
 * JSON from UTF-8 bytes (request bodies). A string over 128 KB is a V8 large object, allocated and
 * page-faulted on its own: decoding a 280 KB ingest body into one string cost 1.3 ms, more than
 * parsing it (benchmarks/README.md). So the large arrays of a large top-level object (ingest's
 * `events`) are decoded and parsed in runs of elements of about RUN_BYTES each, and the rest of the
 * object on its own. The value equals `JSON.parse` of the whole text; whenever a part does not
 * parse, the whole text is parsed instead, so errors read exactly as JSON.parse's.
 */

/** Texts up to this size are parsed whole. */
const SPLIT_BYTES = 96 * 1024;
const RUN_BYTES = 32 * 1024;

const QUOTE = 34;
const BACKSLASH = 92;
const COMMA = 44;
const OPEN_ARRAY = 91;
const CLOSE_ARRAY = 93;
const OPEN_OBJECT = 123;
const CLOSE_OBJECT = 125;
const isSpace = (c: number | undefined) => c === 32 || c === 10 || c === 13 || c === 9;

/** An array that is a member value of the top-level object: its brackets and element-separating commas. */
interface MemberArray {
  start: number;
  end: number;
  commas: number[];
}

export interface JsonScan {
  /** The deepest nesting of arrays and objects (strings skipped); counting stops past `maxDepth`. */
  deepest: number;
  arrays: MemberArray[];
}

/** One pass over the bytes: nesting depth, and the top-level object's array members larger than `minArrayBytes`. */
export function scanJson(b: Uint8Array, from: number, maxDepth: number, minArrayBytes = RUN_BYTES): JsonScan {
  let depth = 0;
  let deepest = 0;
  let topIsObject: boolean | undefined;
  let open: MemberArray | undefined;
  const arrays: MemberArray[] = [];
  for (let i = from; i < b.length; i++) {
    const c = b[i];
    if (c === QUOTE) {
      // Skip the string: bytes of multi-byte characters are all >= 0x80, never a quote or backslash.
      for (i++; i < b.length && b[i] !== QUOTE; i++) if (b[i] === BACKSLASH) i++;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      topIsObject ??= c === OPEN_OBJECT;
      if (++depth > deepest && (deepest = depth) > maxDepth) return { deepest, arrays: [] };
      if (depth === 2 && c === OPEN_ARRAY && topIsObject) open = { start: i, end: -1, commas: [] };
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      if (depth === 2 && open) {
        if (c === CLOSE_ARRAY && i - open.start > minArrayBytes) arrays.push({ ...open, end: i });
        open = undefined;
      }
      depth--;
    } else if (c === COMMA && depth === 2 && open) open.commas.push(i);
  }
  return { deepest, arrays };
}

const blank = (b: Uint8Array, from: number, to: number): boolean => {
  for (let i = from; i < to; i++) if (!isSpace(b[i])) return false;
  return true;
};

/** An array's elements, parsed in runs of about RUN_BYTES; undefined when a run does not parse (or is empty where an element must be). */
function parseArray(b: Buffer, a: MemberArray, runBytes: number): unknown[] | undefined {
  const out: unknown[] = [];
  const bounds = [...a.commas, a.end];
  let from = a.start + 1;
  for (let k = 0; k < bounds.length; ) {
    // The run ends at the first element boundary past runBytes.
    let e = k;
    while (e < bounds.length - 1 && bounds[e]! - from < runBytes) e++;
    const to = bounds[e]!;
    // `[1,,2]` split as `[1]`, `[]`, `[2]` would parse: an empty run stands for an element only in an empty array.
    if (bounds.length > 1 && blank(b, from, to)) return undefined;
    let run: unknown;
    try {
      run = JSON.parse(`[${b.toString('utf8', from, to)}]`);
    } catch {
      return undefined;
    }
    for (const v of run as unknown[]) out.push(v);
    from = to + 1;
    k = e + 1;
  }
  return out;
}

/**
 * `JSON.parse` of the UTF-8 text in `b` from `from` (the caller checked it is UTF-8 and not too
 * deep), given its scan. Throws JSON.parse's SyntaxError when the text is not JSON.
 */
export function parseJsonBytes(b: Buffer, from: number, scan: JsonScan, opts = { splitBytes: SPLIT_BYTES, runBytes: RUN_BYTES }): unknown {
  const whole = () => JSON.parse(b.toString('utf8', from));
  if (b.length - from <= opts.splitBytes || scan.arrays.length === 0) return whole();
  // The rest of the object, each large array replaced by a string no sender can guess.
  const tag = `#run:${randomBytes(12).toString('hex')}:`;
  const parts: string[] = [];
  let at = from;
  scan.arrays.forEach((a, n) => {
    parts.push(b.toString('utf8', at, a.start), JSON.stringify(`${tag}${n}`));
    at = a.end + 1;
  });
  parts.push(b.toString('utf8', at));
  let skeleton: unknown;
  try {
    skeleton = JSON.parse(parts.join(''));
  } catch {
    return whole();
  }
  if (typeof skeleton !== 'object' || skeleton === null || Array.isArray(skeleton)) return whole();
  const object = skeleton as Record<string, unknown>;
  for (const key of Object.keys(object)) {
    const v = object[key];
    if (typeof v !== 'string' || !v.startsWith(tag)) continue;
    const items = parseArray(b, scan.arrays[Number(v.slice(tag.length))]!, opts.runBytes);
    if (!items) return whole();
    object[key] = items;
  }
  return object;
}
