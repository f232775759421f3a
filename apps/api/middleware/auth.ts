import type { Context, Next } from 'koa';
import type { Db } from '../../../postgres/client.js';
import { authenticate, type Operator } from '../../../domain/tenants/operators.js';

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
    ctx.state.operator = await authenticate(db, bearerToken(ctx.get('authorization') || undefined));
    ctx.state.log = ctx.state.log.child({ operatorId: ctx.state.operator.id });
    await next();
  };
}
