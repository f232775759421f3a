import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../apps/api/app.js';
import { createApiDeps } from '../../apps/api/deps.js';
import { closeServices, createServices } from '../../apps/shared/services.js';
import { API_KEY_PREFIX, generateApiKey } from '../../domain/tenants/api-keys.js';
import { createLogger, maskApiKeys } from '../../lib/logger.js';
import { testConfig } from '../support/env.js';
import { request } from '../support/http.js';

/** Issue 29: a key in a URL never reaches the api's log in clear (docs/security.md). */
function capture(): { lines: string[]; sink: Writable } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  return { lines, sink };
}

describe('maskApiKeys', () => {
  const key = generateApiKey().key;
  const secret = key.slice(API_KEY_PREFIX.length);

  it('keeps the prefix the domain issues and hides the rest', () => {
    expect(maskApiKeys(key)).toBe(`${API_KEY_PREFIX}…[REDACTED]`);
    expect(maskApiKeys(`/api/venues/${key}/zones`)).toBe(`/api/venues/${API_KEY_PREFIX}…[REDACTED]/zones`);
    expect(maskApiKeys(`token=${key}&limit=5`)).toBe(`token=${API_KEY_PREFIX}…[REDACTED]&limit=5`);
    expect(maskApiKeys(`a=${key}&b=${key}`)).toBe(`a=${API_KEY_PREFIX}…[REDACTED]&b=${API_KEY_PREFIX}…[REDACTED]`);
    for (const plain of [
      '/api/venues/2564f27b-315e-404f-8035-3162add0ceda',
      `keys=devices&startTs=1764213600000&digest=${'ab'.repeat(32)}`,
    ])
      expect(maskApiKeys(plain)).toBe(plain);
    // Idempotent: the serializers may see a masked text again.
    expect(maskApiKeys(maskApiKeys(key))).toBe(maskApiKeys(key));
  });

  it('hides a key however the URL spells it: letter case, escapes, wrong length', () => {
    for (const text of [
      key.toUpperCase(),
      `vt%5Flive%5F${secret}`,
      `v%74_live_${secret}`,
      `/x/vt_live_${secret.slice(0, 10)}%41${secret.slice(10)}`,
      `${key}EXTRA`,
      key.slice(0, 20),
      `/api/venues?token=${secret}`,
    ]) {
      const masked = maskApiKeys(text);
      expect(masked, text).not.toContain(secret.slice(0, 10));
      expect(masked, text).not.toContain(secret.slice(-10));
      expect(masked.toUpperCase(), text).not.toContain(secret.slice(0, 10).toUpperCase());
    }
  });

  it('is applied by every logger to path, url, query and error messages and stacks', () => {
    const { lines, sink } = capture();
    const log = createLogger('mask-test', 'info', sink);
    log.info({ path: `/api/venues/${key}`, url: `http://h/x?token=${key}`, query: `token=${key}` }, 'probe');
    log.error({ err: new Error(`no route for GET /api/venues/${key}`) }, 'failed');
    log.child({ path: `/p/${key}` }).info('child');
    const all = lines.join('');
    expect(lines).toHaveLength(3);
    expect(all).not.toContain(secret);
    expect(all).toContain(`"path":"/api/venues/${API_KEY_PREFIX}…[REDACTED]"`);
    expect(all).toContain(`"query":"token=${API_KEY_PREFIX}…[REDACTED]"`);
    expect(all).toContain(`no route for GET /api/venues/${API_KEY_PREFIX}…[REDACTED]`);
    expect(JSON.parse(lines[1]!).err.stack).toContain('[REDACTED]');
  });
});

describe('the api request log', () => {
  it('never holds a key sent in a path or a query; it shows the prefix', async () => {
    const { lines, sink } = capture();
    const cfg = testConfig();
    const services = await createServices(cfg, createLogger('api-mask-test', 'info', sink));
    const server = createServer(createApp(createApiDeps(services)).callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const created = await request(`${url}/api/operators`, {
        headers: { 'x-admin-key': cfg.ADMIN_SECRET },
        json: { name: 'Mask', email: 'mask@example.com' },
      });
      expect(created.status).toBe(201);
      const key: string = created.body.api_key;
      const secret = key.slice(API_KEY_PREFIX.length);
      const before = lines.length;

      expect([400, 404]).toContain((await request(`${url}/api/venues/${key}`, { key })).status);
      expect((await request(`${url}/api/venues?token=${key}`)).status).toBe(401);
      expect((await request(`${url}/api/venues?limit=5&token=${key}`, { key })).status).toBe(200);
      expect((await request(`${url}/no/such/${key}`)).status).toBe(404);

      const requestLines = lines
        .slice(before)
        .map((l) => JSON.parse(l))
        .filter((l) => l.msg === 'request');
      expect(requestLines).toHaveLength(4);
      const all = lines.join('');
      expect(all).not.toContain(secret);
      expect(all).not.toContain(secret.slice(0, 12));
      expect(requestLines.map((l) => [l.path, l.query])).toEqual([
        [`/api/venues/${API_KEY_PREFIX}…[REDACTED]`, undefined],
        ['/api/venues', `token=${API_KEY_PREFIX}…[REDACTED]`],
        ['/api/venues', `limit=5&token=${API_KEY_PREFIX}…[REDACTED]`],
        [`/no/such/${API_KEY_PREFIX}…[REDACTED]`, undefined],
      ]);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await closeServices(services);
    }
  });

  it('writes the access line at the configured level: at debug it stays out of an info log', async () => {
    for (const [loggerLevel, expected] of [
      ['info', 0],
      ['debug', 1],
    ] as const) {
      const { lines, sink } = capture();
      const services = await createServices(testConfig({ ACCESS_LOG_LEVEL: 'debug' }), createLogger('api-access-test', loggerLevel, sink));
      const server = createServer(createApp(createApiDeps(services)).callback());
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        expect((await request(`http://127.0.0.1:${(server.address() as AddressInfo).port}/health`)).status).toBeLessThan(600);
        const access = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request');
        expect(access, loggerLevel).toHaveLength(expected);
        for (const line of access) expect(line.level).toBe(20);
      } finally {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await closeServices(services);
      }
    }
  });
});
