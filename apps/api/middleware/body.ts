import type { IncomingMessage } from 'node:http';
import type { Context } from 'koa';
import { AppError } from '../../../lib/errors.js';
import { findLoneSurrogate, jsonDepth, MAX_JSON_DEPTH } from '../../../lib/validate.js';

/** Refuses malformed UTF-8 instead of turning it into U+FFFD. */
const utf8 = new TextDecoder('utf-8', { fatal: true });

export const MAX_BODY_BYTES = 2 * 1024 * 1024;

export interface BodyOptions {
  limit?: number;
  /** A top-level key whose items the operation checks one by one (ingest's `events`): not refused here for a lone surrogate. */
  checkedPerItem?: string;
}

/**
 * Reads the JSON body of an operation that takes one. It runs after the route matched, the caller
 * was authenticated and the rate limit passed, so nobody without a key makes the api read a body.
 * Every failure has the spec's envelope: 415 for a Content-Encoding or charset we do not read, 413
 * over the limit (checked on the declared length and again while streaming), 400 for malformed or
 * too deeply nested JSON, a non-JSON content type, or a lone surrogate in a string.
 */
export async function readJsonBody(ctx: Context, opts: BodyOptions = {}): Promise<unknown> {
  return (await readJsonBodyText(ctx, opts)).body;
}

/** `readJsonBody`, with the text the body was parsed from (what an Idempotency-Key's retry repeats). */
export async function readJsonBodyText(ctx: Context, opts: BodyOptions = {}): Promise<{ body: unknown; text: string }> {
  const text = await readRawText(ctx, opts.limit);
  if (text.trim() === '') return { body: undefined, text };
  if (!ctx.is('application/json', '+json')) {
    throw new AppError(400, 'VALIDATION_ERROR', 'request body must be JSON with Content-Type: application/json', [
      { field: 'body', message: `unsupported content type ${ctx.get('content-type').slice(0, 100) || '(none)'}` },
    ]);
  }
  const depth = jsonDepth(text);
  if (depth > MAX_JSON_DEPTH) {
    throw new AppError(400, 'VALIDATION_ERROR', `request body is nested deeper than ${MAX_JSON_DEPTH} levels`, [
      { field: 'body', message: `nesting depth over ${MAX_JSON_DEPTH}` },
    ]);
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new AppError(400, 'VALIDATION_ERROR', 'request body is not valid JSON', [
      { field: 'body', message: (err as Error).message.slice(0, 200) },
    ]);
  }
  const checked =
    opts.checkedPerItem && body && typeof body === 'object' && !Array.isArray(body) ? { ...body, [opts.checkedPerItem]: undefined } : body;
  const field = findLoneSurrogate(checked);
  if (field) {
    throw new AppError(400, 'VALIDATION_ERROR', `invalid body: check ${field}`, [
      { field, message: 'must be well-formed Unicode: a lone surrogate (\\ud800-\\udfff without its pair) cannot be stored' },
    ]);
  }
  return { body, text };
}

/**
 * The request body as UTF-8 text, unparsed (vendor webhooks sign the exact bytes): the same rules
 * as JSON bodies for Content-Encoding and charset (415), size (413, declared and streamed) and
 * UTF-8 (400). The caller checks the content type.
 */
export async function readRawText(ctx: Context, limit = MAX_BODY_BYTES): Promise<string> {
  const encoding = ctx.get('content-encoding').trim().toLowerCase();
  if (encoding && encoding !== 'identity') {
    throw unsupported(`Content-Encoding ${encoding.slice(0, 32)} is not accepted; send the JSON uncompressed`, 'content-encoding');
  }
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(ctx.get('content-type'))?.[1]?.toLowerCase();
  if (charset && charset !== 'utf-8' && charset !== 'utf8') {
    throw unsupported(`charset ${charset.slice(0, 32)} is not accepted; JSON bodies are UTF-8`, 'content-type');
  }
  const declared = Number(ctx.get('content-length') || 0);
  if (declared > limit) throw tooLarge(limit);
  return readText(ctx.req, limit);
}

/**
 * Collects the body without destroying the request on overflow (that would reset the socket before
 * the 413 is written): reading just stops, and the 413's `Connection: close` makes Node close the
 * socket after the response instead of draining the rest of an oversized upload.
 */
function readText(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = (fn: () => void) => {
      req.off('data', onData).off('end', onEnd).off('error', onGone).off('close', onGone);
      fn();
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) chunks.push(chunk);
      else
        settle(() => {
          req.pause();
          reject(tooLarge(limit));
        });
    };
    const onEnd = () =>
      settle(() => {
        try {
          resolve(utf8.decode(Buffer.concat(chunks)));
        } catch {
          reject(
            new AppError(400, 'VALIDATION_ERROR', 'request body is not valid UTF-8', [
              { field: 'body', message: 'invalid UTF-8 byte sequence' },
            ]),
          );
        }
      });
    // The client went away mid-body: nobody will read the answer, but the request must still settle.
    const onGone = () =>
      settle(() => reject(new AppError(400, 'VALIDATION_ERROR', 'request body ended early', [{ field: 'body', message: 'incomplete' }])));
    req.on('data', onData).on('end', onEnd).on('error', onGone).on('close', onGone);
  });
}

const tooLarge = (limit: number) =>
  new AppError(
    413,
    'PAYLOAD_TOO_LARGE',
    `request body exceeds ${limit} bytes; send smaller batches (at most 1,000 events per ingest request)`,
    { limitBytes: limit },
    { Connection: 'close' },
  );

const unsupported = (message: string, header: string) =>
  new AppError(415, 'UNSUPPORTED_MEDIA_TYPE', message, [
    { field: header, message: 'send Content-Type: application/json (UTF-8) without Content-Encoding' },
  ]);
