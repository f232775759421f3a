import type Router from '@koa/router';
import { z } from 'zod';
import { listApiKeys, rotateOwnKey } from '../../../domain/tenants/operators.js';
import { parseInput } from '../../../lib/validate.js';
import { bearerToken } from '../middleware/auth.js';
import type { RouteDoc } from '../route-docs.js';
import type { ApiDeps } from '../deps.js';
import { authedRouter } from './authed.js';
import { rotatedKey } from './operators.js';

const listQuery = z.object({ limit: z.coerce.number().int().min(1).max(100).default(20) });
const keyList = z.object({
  data: z.array(
    z.object({
      id: z.uuid(),
      api_key_prefix: z.string(),
      last4: z.string().describe('the last four characters, to tell keys apart'),
      created_at: z.iso.datetime(),
      revoked_at: z.iso.datetime().nullable().describe('set once rotated; such a key is refused'),
    }),
  ),
});

/** The caller's own keys: metadata and self-service rotation. */
export function keyRoutes(deps: ApiDeps): Router {
  const { db } = deps.services;
  const router = authedRouter(deps);
  router.get('/api/keys', async (ctx) => {
    const { limit } = parseInput(listQuery, ctx.query, 'query');
    ctx.body = { data: await listApiKeys(db, ctx.state.operator.id, limit) };
  });
  router.post('/api/keys/rotate', async (ctx) => {
    // requireOperator has already accepted this header's key.
    const presented = bearerToken(ctx.get('authorization'))!;
    ctx.body = await rotateOwnKey(db, ctx.state.operator.id, presented);
  });
  return router;
}

export const docs: RouteDoc[] = [
  {
    method: 'get',
    path: '/api/keys',
    summary: "The caller's API keys, newest first (metadata only; a key is never shown again)",
    tag: 'Keys',
    auth: 'bearer',
    query: listQuery,
    responses: { 200: { description: 'key metadata', schema: keyList } },
    errors: [],
  },
  {
    method: 'post',
    path: '/api/keys/rotate',
    summary: 'Replace the calling key with a new one; the old key is refused at once on every instance',
    tag: 'Keys',
    auth: 'bearer',
    responses: { 200: { description: 'the new key, returned only here', schema: rotatedKey } },
    errors: [],
  },
];
