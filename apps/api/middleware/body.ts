import type { Context, Next } from 'koa';
import { AppError } from '../../../lib/errors.js';

export const MAX_BODY_BYTES = 2 * 1024 * 1024;

/**
 * Reads a JSON body up to a fixed size. Our own parser so that every failure has the spec's
 * envelope: 413 over the limit (checked while streaming), 400 for malformed JSON or a wrong
 * content type. Bodies of other routes (e.g. /mcp) are left to their transport.
 */
export function jsonBody(limit = MAX_BODY_BYTES) {
  return async (ctx: Context, next: Next): Promise<void> => {
    if (!['POST', 'PUT', 'PATCH'].includes(ctx.method) || ctx.path === '/mcp') return next();
    const declared = Number(ctx.get('content-length') || 0);
    if (declared > limit) throw tooLarge(limit);
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) throw tooLarge(limit);
      chunks.push(chunk);
    }
    const text = Buffer.concat(chunks).toString('utf8');
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

const tooLarge = (limit: number) =>
  new AppError(413, 'PAYLOAD_TOO_LARGE', `request body exceeds ${limit} bytes; send smaller batches (at most 1,000 events per ingest request)`);
