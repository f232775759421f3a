import { z } from 'zod';
import { changePlan, createOperator, rotateKeyAsAdmin } from '../../../domain/tenants/operators.js';
import { PLANS, SELF_SERVICE_PLANS } from '../../../domain/tenants/plans.js';
import { displayText } from '../../../lib/validate.js';
import { operation } from './operation.js';
import { timestamp, uuid } from './schemas.js';

const createOperatorBody = z.strictObject({
  name: displayText(200),
  email: z.email().max(320),
  plan: z.enum(SELF_SERVICE_PLANS).default('free'),
});
const operatorParams = z.object({ id: uuid() });
const setPlanBody = z.strictObject({ plan: z.enum(PLANS) });

const createdOperator = z.object({
  operator_id: z.uuid(),
  api_key: z.string().describe('shown only in this response'),
  api_key_prefix: z.string(),
});
export const rotatedKey = z.object({
  operator_id: z.uuid(),
  api_key: z.string().describe('the new key, shown only in this response'),
  api_key_prefix: z.string(),
  rotated_at: timestamp.describe('when the previous key stopped working'),
});
const planChanged = z.object({ operator_id: z.uuid(), plan: z.enum(PLANS), plan_name: z.string() });

/** Admin endpoints, authenticated by X-Admin-Key instead of a bearer key; the secret is checked before the input. */
export const operatorOperations = [
  operation({
    id: 'createOperator',
    method: 'post',
    path: '/api/operators',
    summary: 'Create an operator (tenant) and its first API key',
    tag: 'Operators',
    auth: 'admin',
    body: createOperatorBody,
    response: { status: 201, description: 'created; the key is returned only here', schema: createdOperator },
    errors: [],
    handler: ({ body }, { deps }) => createOperator(deps.services.db, body),
  }),
  operation({
    id: 'rotateOperatorKey',
    method: 'post',
    path: '/api/operators/{id}/rotate-key',
    summary: "Replace an operator's API key (for a lost key); the old key stops working at once",
    tag: 'Operators',
    auth: 'admin',
    params: operatorParams,
    response: { status: 200, description: 'the new key, returned only here', schema: rotatedKey },
    errors: [404],
    handler: ({ params }, { deps }) => rotateKeyAsAdmin(deps.services.db, params.id),
  }),
  operation({
    id: 'setOperatorPlan',
    method: 'put',
    path: '/api/operators/{id}/plan',
    summary: "Change an operator's plan; the only way to Enterprise",
    tag: 'Operators',
    auth: 'admin',
    params: operatorParams,
    body: setPlanBody,
    response: { status: 200, description: 'the plan now in force', schema: planChanged },
    errors: [404],
    handler: ({ params, body }, { deps }) => changePlan(deps.services.db, params.id, body.plan),
  }),
];
