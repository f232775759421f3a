import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { trustedPeers } from '../../apps/api/middleware/request.js';
import { ConfigError } from '../../lib/config.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { request } from '../support/http.js';
import { freshWindow } from '../support/windows.js';

/** Issue 29: X-Forwarded-For is believed only from a trusted proxy (docs/security.md). */
const LIMIT = 3;
const wrongKey = `vt_live_${'x'.repeat(28)}`;
let direct: RunningApi;
let behindLoopback: RunningApi;

beforeAll(async () => {
  [direct, behindLoopback] = await Promise.all([
    startApi(testConfig({ TRUSTED_PROXIES: '', UNAUTHENTICATED_RATE_LIMIT: String(LIMIT) })),
    startApi(testConfig({ TRUSTED_PROXIES: '127.0.0.1,::1', UNAUTHENTICATED_RATE_LIMIT: String(LIMIT) })),
  ]);
});
afterAll(async () => {
  await Promise.all([direct?.close(), behindLoopback?.close()]);
});

// Fresh addresses per run: the budgets live in Redis for a minute.
const run = randomBytes(4).toString('hex');
const forwarded = (i: number) => `2001:db8:${run.slice(0, 4)}:${run.slice(4)}::${i}`;

describe('the client address behind TRUSTED_PROXIES', () => {
  it('from an untrusted peer ignores X-Forwarded-For: new forwarded addresses share the socket address budget', async () => {
    await freshWindow();
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT + 2; i++) {
      const res = await request(`${direct.url}/api/venues`, { key: wrongKey, headers: { 'x-forwarded-for': forwarded(100 + i) } });
      statuses.push(res.status);
    }
    // The first ones may already count against 127.0.0.1 (other tests share it), but the tail is 429.
    expect(statuses.slice(-2)).toEqual([429, 429]);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(2);
  });

  it('from a trusted peer uses the last X-Forwarded-For entry: two forwarded addresses have separate budgets', async () => {
    await freshWindow();
    const a: number[] = [];
    const b: number[] = [];
    for (let i = 0; i < LIMIT + 1; i++) {
      // The first entry is the client's own, to forge; the last is what the proxy saw.
      a.push(
        (
          await request(`${behindLoopback.url}/api/venues`, {
            key: wrongKey,
            headers: { 'x-forwarded-for': `203.0.113.${i}, ${forwarded(1)}` },
          })
        ).status,
      );
    }
    expect(a).toEqual([...Array(LIMIT).fill(401), 429]);
    b.push((await request(`${behindLoopback.url}/api/venues`, { key: wrongKey, headers: { 'x-forwarded-for': forwarded(2) } })).status);
    expect(b).toEqual([401]);
    // A forwarded entry that is no address falls back to the peer, never to a made-up budget.
    const junk = await request(`${behindLoopback.url}/api/venues`, {
      key: wrongKey,
      headers: { 'x-forwarded-for': `${forwarded(1)}, not-an-ip` },
    });
    expect([401, 429]).toContain(junk.status);
  });
});

describe('TRUSTED_PROXIES', () => {
  it('defaults to loopback and the Docker pools the compose front door comes from', () => {
    const cfg = testConfig();
    const trusted = trustedPeers(cfg.TRUSTED_PROXIES);
    for (const addr of ['127.0.0.1', '::1', '::ffff:127.0.0.1', '172.18.0.5', '192.168.16.3']) expect(trusted(addr), addr).toBe(true);
    for (const addr of ['203.0.113.9', '10.1.2.3', '8.8.8.8', '2001:db8::1', '', 'unknown']) expect(trusted(addr), addr).toBe(false);
  });

  it('takes addresses and CIDR blocks, empty for none, and names a bad entry', () => {
    expect(testConfig({ TRUSTED_PROXIES: '' }).TRUSTED_PROXIES).toEqual([]);
    const cfg = testConfig({ TRUSTED_PROXIES: ' 10.0.0.0/8, fd00::/8 ,192.0.2.7' });
    expect(cfg.TRUSTED_PROXIES).toEqual(['10.0.0.0/8', 'fd00::/8', '192.0.2.7']);
    const trusted = trustedPeers(cfg.TRUSTED_PROXIES);
    expect([trusted('10.9.9.9'), trusted('fd00::5'), trusted('192.0.2.7'), trusted('192.0.2.8'), trusted('127.0.0.1')]).toEqual([
      true,
      true,
      true,
      false,
      false,
    ]);
    for (const bad of ['localhost', '10.0.0.0/33', '::1/129', '1.2.3.4/8/1', '1.2.3']) {
      expect(() => testConfig({ TRUSTED_PROXIES: bad }), bad).toThrow(ConfigError);
    }
  });
});
