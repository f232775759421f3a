import type { Context, Next } from 'koa';
import type { Db } from '../../../postgres/client.js';
import { authenticate, type Operator } from '../../../domain/tenants/operators.js';
import { unauthorized } from '../../../lib/errors.js';

declare module 'koa' {
  interface DefaultState {
    operator: Operator;
  }
}

export function bearerToken(header: string | undefined): string | undefined {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return match?.[1];
}

/** Resolves `Authorization: Bearer <key>` to the operator; every non-public route sits behind it. */
export function requireOperator(db: Db) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const header = ctx.get('authorization');
    const key = bearerToken(header);
    if (header && !key) throw unauthorized('malformed Authorization header; expected "Bearer <API_KEY>"');
    ctx.state.operator = await authenticate(db, key);
    ctx.state.log = ctx.state.log.child({ operatorId: ctx.state.operator.id });
    await next();
  };
}
