import { z } from 'zod';
import { validation, type FieldProblem } from './errors.js';

/** A UTF-16 surrogate without its pair: JSON can carry it (`"\\ud800"`), UTF-8 cannot. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export const hasLoneSurrogate = (text: string): boolean => LONE_SURROGATE.test(text);

/**
 * Text that Postgres can store as sent: text and jsonb cannot hold U+0000, and a lone surrogate
 * would otherwise become U+FFFD or a database error. Wrap every free-text schema whose value is
 * stored, so either is a 400 naming the field.
 */
export const storableText = <S extends z.ZodType<string>>(schema: S): S =>
  schema
    .refine((v) => !v.includes('\u0000'), 'must not contain the NUL character (\\u0000)')
    .refine(
      (v) => !hasLoneSurrogate(v),
      'must be well-formed Unicode: a lone surrogate (\\ud800-\\udfff without its pair) cannot be stored',
    );

/**
 * What a one-line display name must not hold: C0/C1 controls and DEL (a name is one line of
 * text), U+2028/U+2029 (line breaks too), and the bidirectional formatting characters, which can
 * reorder how the name and the text around it are shown ("Trojan Source" spoofing).
 */
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

const codePoint = (c: string) => `U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
/** 1-based, in characters (an emoji counts once), of the trimmed text. */
const position = (text: string, index: number) => [...text.slice(0, index)].length + 1;

/** Why text is not a storable one-line display name, or undefined; never echoes the value. */
function displayTextProblem(text: string): string | undefined {
  const control = CONTROL.exec(text);
  if (control) {
    return `must be one line of plain text: remove the control character ${codePoint(control[0])} at character ${position(text, control.index)} (line breaks, tabs and NUL are not accepted)`;
  }
  const bidi = BIDI.exec(text);
  if (bidi) {
    return `must not contain bidirectional formatting characters: remove ${codePoint(bidi[0])} at character ${position(text, bidi.index)} (they change how the surrounding text is displayed)`;
  }
  if (hasLoneSurrogate(text)) return 'must be well-formed Unicode: a lone surrogate (\\ud800-\\udfff without its pair) cannot be stored';
  return undefined;
}

/**
 * A human-readable name or label: trimmed, 1 to `max` characters, one line, no bidi formatting,
 * storable in Postgres. Any script and emoji are fine. Use it for every stored free-text field
 * that people read (names, addresses, labels), so each problem is one 400 naming the field.
 */
export const displayText = (max: number) =>
  z
    .string()
    .trim()
    .min(1)
    .max(max)
    .superRefine((v, ctx) => {
      const problem = displayTextProblem(v);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    });

/** The path of the first string (or object key) holding a lone surrogate, e.g. `events.3.payload.name`; undefined if none. */
export function findLoneSurrogate(value: unknown, path: string[] = []): string | undefined {
  if (typeof value === 'string') return hasLoneSurrogate(value) ? path.join('.') || '(root)' : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findLoneSurrogate(value[i], [...path, String(i)]);
      if (found) return found;
    }
    return undefined;
  }
  if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (hasLoneSurrogate(k)) return [...path, k].join('.');
      const found = findLoneSurrogate(v, [...path, k]);
      if (found) return found;
    }
  }
  return undefined;
}

export function fieldProblems(error: z.ZodError, prefix = ''): FieldProblem[] {
  return error.issues.map((issue) => ({
    field: [prefix, ...issue.path.map(String)].filter(Boolean).join('.') || prefix || '(root)',
    message: issue.message,
  }));
}

/** Parses input with a zod schema; a failure becomes a 400 VALIDATION_ERROR naming each bad field. */
export function parseInput<S extends z.ZodType>(
  schema: S,
  input: unknown,
  where: 'body' | 'query' | 'params' | 'headers' | 'arguments',
): z.infer<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const details = fieldProblems(result.error);
  const fields = [...new Set(details.map((d) => d.field))].join(', ');
  throw validation(`invalid ${where}: check ${fields}`, details);
}

/** How deep a JSON body may nest: deeper than any vendor's, shallow enough for every recursive walk after the parse. */
export const MAX_JSON_DEPTH = 64;

/**
 * The deepest nesting of arrays and objects in a JSON text, scanned before parsing (V8 parses any
 * depth, but JSON.stringify and validators recurse); stops counting past MAX_JSON_DEPTH. Strings
 * are skipped with indexOf, a quote counting as their end unless an odd run of backslashes
 * escapes it: a quarter faster than a character loop on ingest bodies.
 */
export function jsonDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) {
      for (;;) {
        const q = text.indexOf('"', i + 1);
        if (q < 0) return deepest;
        let b = q - 1;
        while (text.charCodeAt(b) === 92 /* \ */) b--;
        i = q;
        if ((q - 1 - b) % 2 === 0) break;
      }
    } else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > deepest) deepest = depth;
      if (deepest > MAX_JSON_DEPTH) return deepest;
    } else if (c === 93 /* ] */ || c === 125 /* } */) depth--;
  }
  return deepest;
}
