import type { IncomingMessage } from 'node:http';
import type { Context, Next } from 'koa';
import { AppError } from '../../../lib/errors.js';

export const MAX_BODY_BYTES = 2 * 1024 * 1024;

/**
 * Reads a JSON body up to a fixed size. Our own parser so that every failure has the spec's
 * envelope: 413 over the limit (checked on the declared length and again while streaming), 400 for
 * malformed JSON or a wrong content type. Bodies of other routes (e.g. /mcp) are left to their transport.
 */
export function jsonBody(limit = MAX_BODY_BYTES) {
  return async (ctx: Context, next: Next): Promise<void> => {
    if (!['POST', 'PUT', 'PATCH'].includes(ctx.method) || ctx.path === '/mcp') return next();
    const declared = Number(ctx.get('content-length') || 0);
    if (declared > limit) throw tooLarge(limit);
    const text = await readText(ctx.req, limit);
    if (text.trim() === '') {
      ctx.request.body = undefined;
      return next();
    }
    if (!ctx.is('application/json', '+json')) {
      throw new AppError(400, 'VALIDATION_ERROR', 'request body must be JSON with Content-Type: application/json', [
        { field: 'body', message: `unsupported content type ${ctx.get('content-type') || '(none)'}` },
      ]);
    }
    try {
      ctx.request.body = JSON.parse(text);
    } catch (err) {
      throw new AppError(400, 'VALIDATION_ERROR', 'request body is not valid JSON', [
        { field: 'body', message: (err as Error).message },
      ]);
    }
    return next();
  };
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
      else settle(() => {
        req.pause();
        reject(tooLarge(limit));
      });
    };
    const onEnd = () => settle(() => resolve(Buffer.concat(chunks).toString('utf8')));
    // The client went away mid-body: nobody will read the answer, but the request must still settle.
    const onGone = () => settle(() => reject(new AppError(400, 'VALIDATION_ERROR', 'request body ended early', [{ field: 'body', message: 'incomplete' }])));
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
