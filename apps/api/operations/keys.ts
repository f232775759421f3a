import { z } from 'zod';
import { listApiKeys, rotateOwnKey } from '../../../domain/tenants/operators.js';
import { operation } from './operation.js';
import { rotatedKey } from './operators.js';
import { queryInt, timestamp } from './schemas.js';

const listQuery = z.object({ limit: queryInt('an integer', { min: 1, max: 100 }).default(20).describe('at most 100 (default 20)') });
const keyList = z.object({
  data: z.array(
    z.object({
      id: z.uuid(),
      api_key_prefix: z.string(),
      last4: z.string().describe('the last four characters, to tell keys apart'),
      created_at: timestamp,
      revoked_at: timestamp.nullable().describe('set once rotated; such a key is refused'),
    }),
  ),
});

/** The caller's own keys: metadata and self-service rotation; not counted as API calls, so an operator over quota can still secure its account. */
const unmetered = { rate: 'api', quota: 'none' } as const;

export const keyOperations = [
  operation({
    id: 'listKeys',
    method: 'get',
    path: '/api/keys',
    summary: "The caller's API keys, newest first (metadata only; a key is never shown again)",
    tag: 'Keys',
    auth: 'bearer',
    metering: unmetered,
    query: listQuery,
    response: { status: 200, description: 'key metadata', schema: keyList },
    errors: [],
    handler: async ({ query }, { deps, operator }) => ({ data: await listApiKeys(deps.services.db, operator.id, query.limit) }),
  }),
  operation({
    id: 'rotateKey',
    method: 'post',
    path: '/api/keys/rotate',
    summary: 'Replace the calling key with a new one; the old key is refused at once on every instance',
    tag: 'Keys',
    auth: 'bearer',
    metering: unmetered,
    response: { status: 200, description: 'the new key, returned only here', schema: rotatedKey },
    errors: [],
    handler: (_input, { deps, operator, apiKey }) => rotateOwnKey(deps.services.db, operator.id, apiKey),
  }),
];
