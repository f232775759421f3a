import type { Context, Next } from 'koa';
import { z } from 'zod';
import { AppError } from '../../../lib/errors.js';
import { fieldProblems } from '../../../lib/validate.js';

/** Koa/router HTTP errors we translate (status → code). */
const HTTP_CODES: Record<number, { code: AppError['code']; message: string }> = {
  404: { code: 'NOT_FOUND', message: 'route not found' },
  405: { code: 'METHOD_NOT_ALLOWED', message: 'method not allowed on this route' },
  501: { code: 'METHOD_NOT_ALLOWED', message: 'method not implemented' },
};

export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof z.ZodError) return new AppError(400, 'VALIDATION_ERROR', 'invalid input', fieldProblems(err));
  const status = (err as { status?: number }).status;
  const known = status ? HTTP_CODES[status] : undefined;
  if (known) return new AppError(status!, known.code, known.message);
  return new AppError(500, 'INTERNAL_ERROR', 'unexpected error; retry after a short delay');
}

/** Renders every error as the spec's envelope `{error, code, details?}`; logs only the unexpected. */
export async function errorEnvelope(ctx: Context, next: Next): Promise<void> {
  try {
    await next();
    if (ctx.status === 404 && ctx.body === undefined) throw new AppError(404, 'NOT_FOUND', `no route for ${ctx.method} ${ctx.path}`);
  } catch (err) {
    const appErr = toAppError(err);
    if (appErr.status >= 500) ctx.state.log?.error({ err }, 'request failed');
    ctx.status = appErr.status;
    ctx.set(appErr.headers);
    ctx.body = appErr.toBody();
  }
}
