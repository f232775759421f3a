import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import SwaggerParser from '@apidevtools/swagger-parser';
import Router from '@koa/router';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError, type ErrorCode } from '../../lib/errors.js';
import { errorEnvelope as renderErrors } from '../../apps/api/middleware/errors.js';
import { errorEnvelope } from '../../apps/api/http/openapi.js';
import { OPERATIONS } from '../../apps/api/operations/index.js';
import { billingPeriodStart } from '../../domain/limits/quotas.js';
import { startApi, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { newOperator, registeredRoutes } from '../support/tenants.js';

let api: RunningApi;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
let doc: any;
beforeAll(async () => {
  api = await startApi();
  const res = await request(`${api.url}/openapi.json`);
  expect(res.status).toBe(200);
  doc = res.body;
});
afterAll(async () => {
  await api.close();
});

const toOpenApiPath = (koaPath: string) => koaPath.replace(/:(\w+)/g, '{$1}');

/** Follows a local `#/...` reference. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const resolve = (ref: string): any =>
  ref
    .slice(2)
    .split('/')
    .reduce((node, part) => node?.[part], doc);

describe('GET /openapi.json', () => {
  it('is a public OpenAPI 3.1 document with both security schemes, never rate limited', async () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info).toMatchObject({ title: expect.any(String), version: '1' });
    expect(doc.servers).toEqual([{ url: api.services.cfg.PUBLIC_URL }]);
    expect(doc.components.securitySchemes).toEqual({
      bearerAuth: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
      adminKey: expect.objectContaining({ type: 'apiKey', in: 'header', name: 'X-Admin-Key' }),
    });
    const res = await request(`${api.url}/openapi.json`);
    expect(res.headers.get('ratelimit-limit')).toBeNull();
  });

  it('documents exactly the routes the routers register', () => {
    const registered = registeredRoutes(api).map((r) => `${r.method} ${toOpenApiPath(r.path)}`);
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops as object).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(new Set(registered).size).toBe(registered.length);
    expect(documented.sort()).toEqual([...registered].sort());
    // Every operation, plus the MCP transport and the webhook receiver's GET and POST.
    expect(OPERATIONS.length + 3).toBe(documented.length);
  });

  it('gives each operation its security, parameters and error responses, all references resolving', () => {
    for (const [path, ops] of Object.entries(doc.paths)) {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      for (const [method, op] of Object.entries(ops as Record<string, any>)) {
        const where = `${method} ${path}`;
        const scheme = op.security[0] ? Object.keys(op.security[0])[0] : 'public';
        const pathParams = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
        expect(
          op.parameters.filter((p: { in: string }) => p.in === 'path').map((p: { name: string }) => p.name),
          where,
        ).toEqual(pathParams);
        expect(op.responses['500'], where).toBeDefined();
        if (scheme === 'bearerAuth') {
          expect(op.responses['401'], where).toBeDefined();
          expect(op.responses['429'], where).toBeDefined();
        }
        if (scheme === 'adminKey') expect(op.responses['401'], where).toBeDefined();
        if (op.requestBody) expect(op.responses['400'] && op.responses['413'], where).toBeTruthy();
        for (const [status, response] of Object.entries(op.responses)) {
          // eslint-disable-next-line @typescript-eslint/no-explicit-any
          const r = (response as any).$ref ? resolve((response as any).$ref) : response;
          expect(r, `${where} ${status}`).toBeDefined();
          if (Number(status) >= 400 && !(path === '/health' && status === '503')) {
            expect(r.content['application/json'].schema, `${where} ${status}`).toEqual({ $ref: '#/components/schemas/Error' });
          }
        }
      }
    }
    const refs = JSON.stringify(doc).match(/"\$ref":"[^"]+"/g) ?? [];
    for (const ref of refs) expect(resolve(JSON.parse(`{${ref}}`).$ref), ref).toBeDefined();
  });

  it('passes a real OpenAPI validator (swagger-parser: the 3.1 meta-schema and every reference)', async () => {
    await expect(SwaggerParser.validate(structuredClone(doc))).resolves.toMatchObject({ openapi: '3.1.0' });
  });

  it('describes every tag and gives each operation a unique id', () => {
    const used = new Set(
      Object.values(doc.paths).flatMap((ops) => Object.values(ops as Record<string, { tags: string[] }>).flatMap((op) => op.tags)),
    );
    expect(doc.tags.map((t: { name: string }) => t.name).sort()).toEqual([...used].sort());
    for (const tag of doc.tags) expect(tag.description, tag.name).toEqual(expect.any(String));
    const ids = Object.values(doc.paths).flatMap((ops) =>
      Object.values(ops as Record<string, { operationId: string }>).map((op) => op.operationId),
    );
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('uses JSON Schema 2020-12 (OpenAPI 3.1), not the 3.0 dialect', () => {
    const text = JSON.stringify(doc);
    expect(text).not.toContain('"nullable"');
    expect(text).not.toContain('"$schema"');
    const venue = doc.paths['/api/keys'].get.responses['200'].content['application/json'].schema;
    expect(venue.properties.data.items.properties.revoked_at).toMatchObject({ anyOf: expect.arrayContaining([{ type: 'null' }]) });
    expect(doc.components.schemas.Error).toMatchObject({ type: 'object', required: ['error', 'code'] });
  });

  it("describes request bodies from the routes' own zod schemas", () => {
    const body = doc.paths['/api/operators'].post.requestBody.content['application/json'].schema;
    expect(body.required.sort()).toEqual(['email', 'name']);
    expect(body.properties.plan).toMatchObject({ enum: ['free', 'starter', 'pro'], default: 'free' });
    expect(doc.paths['/api/keys'].get.parameters).toEqual([expect.objectContaining({ name: 'limit', in: 'query', required: false })]);
  });
});

describe('documented responses match what the API sends', () => {
  it('parses real success bodies with the documented schemas', async () => {
    const op = await newOperator(api);
    const schemaFor = (method: string, path: string, status: number) => {
      const op = OPERATIONS.find((d) => d.method === method && d.path === path)!;
      return status === op.response.status ? op.response.schema : op.otherResponses?.[status]?.schema;
    };
    const checks: Array<[string, string, () => Promise<{ status: number; body: unknown }>]> = [
      ['get', '/health', () => request(`${api.url}/health`)],
      ['get', '/api/status', () => request(`${api.url}/api/status`)],
      ['get', '/api/keys', () => request(`${api.url}/api/keys`, { key: op.key })],
      ['get', '/api/usage', () => request(`${api.url}/api/usage`, { key: op.key })],
      [
        'put',
        '/api/operators/{id}/plan',
        () =>
          request(`${api.url}/api/operators/${op.id}/plan`, {
            method: 'PUT',
            headers: { 'x-admin-key': api.services.cfg.ADMIN_SECRET },
            json: { plan: 'pro' },
          }),
      ],
      ['post', '/api/keys/rotate', () => request(`${api.url}/api/keys/rotate`, { method: 'POST', key: op.key })],
    ];
    for (const [method, path, call] of checks) {
      const res = await call();
      const schema = schemaFor(method, path, res.status);
      expect(schema, `${method} ${path} ${res.status}`).toBeDefined();
      const parsed = schema!.safeParse(res.body);
      expect(parsed.success, `${method} ${path}: ${JSON.stringify(parsed.error?.issues)}`).toBe(true);
    }
  });

  it('renders every documented error status with the envelope schema, provoked for real where reachable', async () => {
    const op = await newOperator(api);
    const admin = { 'x-admin-key': api.services.cfg.ADMIN_SECRET };
    const real: Record<number, () => Promise<{ status: number; body: unknown }>> = {
      400: () => request(`${api.url}/api/keys?limit=x`, { key: op.key }),
      401: () => request(`${api.url}/api/keys`),
      404: () => request(`${api.url}/api/operators/00000000-0000-0000-0000-000000000000/rotate-key`, { method: 'POST', headers: admin }),
      405: () => request(`${api.url}/api/keys`, { method: 'PUT', key: op.key }),
      413: () => request(`${api.url}/api/operators`, { headers: admin, json: { name: 'x'.repeat(3 * 1024 * 1024) } }),
    };
    for (const [status, call] of Object.entries(real)) {
      const res = await call();
      expect(res.status).toBe(Number(status));
      expect(errorEnvelope.safeParse(res.body).success, JSON.stringify(res.body)).toBe(true);
    }

    // 429 for real: the quota on a Free operator (fast to reach by setting the counter).
    const { rows } = await api.services.db.query(`SELECT billing_anchor FROM operators WHERE id = $1`, [op.id]);
    await api.services.db.query(`INSERT INTO usage_counters (operator_id, period_start, api_calls) VALUES ($1, $2, 500)`, [
      op.id,
      billingPeriodStart(rows[0].billing_anchor),
    ]);
    const quota = await request(`${api.url}/api/venues`, { key: op.key });
    expect(quota.status).toBe(429);
    expect(errorEnvelope.safeParse(quota.body).success).toBe(true);

    // Every status the document names, through the same error middleware the API uses.
    const documented = new Set<number>(Object.keys(doc.components.responses).map((name) => Number(name.replace('Error', ''))));
    const codeFor: Record<number, ErrorCode> = {
      400: 'VALIDATION_ERROR',
      401: 'UNAUTHORIZED',
      403: 'FORBIDDEN',
      404: 'NOT_FOUND',
      405: 'METHOD_NOT_ALLOWED',
      409: 'CONFLICT',
      413: 'PAYLOAD_TOO_LARGE',
      415: 'UNSUPPORTED_MEDIA_TYPE',
      429: 'RATE_LIMITED',
      500: 'INTERNAL_ERROR',
      503: 'SERVICE_UNAVAILABLE',
    };
    const mini = new Koa();
    mini.use(renderErrors);
    const router = new Router();
    router.get('/boom/:status', (ctx) => {
      const status = Number(ctx.params.status);
      if (status === 500) throw new Error('unexpected');
      throw new AppError(status, codeFor[status]!, 'provoked', status === 400 ? [{ field: 'x', message: 'bad' }] : undefined);
    });
    mini.use(router.routes());
    const server = createServer(mini.callback());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      for (const status of documented) {
        expect(codeFor[status], `no code for documented status ${status}`).toBeDefined();
        const res = await request(`http://127.0.0.1:${(server.address() as AddressInfo).port}/boom/${status}`);
        expect(res.status).toBe(status);
        expect(errorEnvelope.safeParse(res.body).success, JSON.stringify(res.body)).toBe(true);
      }
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
