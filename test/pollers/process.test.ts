import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pollerState } from '../../postgres/queries/pollers.js';
import { FakeUnifi, PollerEnv, selfSignedCert, sleep, until } from './support.js';

/** The pipeline process runs the pollers (POLLERS_ENABLED), stores what they bring in, and releases its leases on SIGTERM. */
let env: PollerEnv;
const tls = selfSignedCert();
const creds = { username: 'poller', password: 'process-test-Password-42' };
const children: ChildProcess[] = [];

beforeAll(async () => {
  env = await PollerEnv.start('pollproc', { sink: false });
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await env?.close();
});

function pipeline(extra: Record<string, string>): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ['node_modules/vite-node/vite-node.mjs', 'apps/pipeline/main.ts'], {
    env: { ...process.env, KAFKA_TOPIC_PREFIX: env.cfg.KAFKA_TOPIC_PREFIX, LOG_LEVEL: 'debug', SHUTDOWN_TIMEOUT_MS: '20000', ...extra },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const out: string[] = [];
  child.stdout!.on('data', (d: Buffer) => out.push(d.toString('utf8')));
  child.stderr!.on('data', (d: Buffer) => out.push(d.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => out.join(''), exited };
}

describe('the pipeline process', () => {
  it('polls a UniFi controller, stores its clients, and on SIGTERM stops the pollers and releases their leases', async () => {
    const controller = await FakeUnifi.start(tls, creds);
    const { venueId, integrationId } = await env.integration('unifi', {
      controller_url: controller.url,
      username: creds.username,
      password: creds.password,
      certificate_sha256: tls.sha256,
    });
    controller.clients = [{ mac: '00:11:22:33:cc:01', last_seen: Math.floor(Date.now() / 1000) - 30 }];
    const p = pipeline({});
    try {
      await env.waitStored(venueId, 1, 30_000);
      expect((await pollerState(env.api.services.db, integrationId))!.owner).toMatch(/:\d+:[0-9a-f]{8}$/);
      p.child.kill('SIGTERM');
      expect(await p.exited).toBe(0);
      expect(await pollerState(env.api.services.db, integrationId)).toMatchObject({ owner: null, lease_until: null, failures: 0 });
      const logged = p.output();
      expect(logged).toContain('pollers running');
      expect(logged).toContain('pollers stopped');
      for (const secret of [creds.password, '00:11:22:33:cc:01', 'unifises=']) expect(logged).not.toContain(secret);
    } finally {
      await controller.close();
    }
  });

  it('polls nothing with POLLERS_ENABLED=false', async () => {
    const controller = await FakeUnifi.start(tls, creds);
    const { integrationId } = await env.integration('unifi', {
      controller_url: controller.url,
      username: creds.username,
      password: creds.password,
      certificate_sha256: tls.sha256,
    });
    const p = pipeline({ POLLERS_ENABLED: 'false' });
    try {
      await until('the pipeline running', () => p.output().includes('pipeline running'), 30_000);
      await sleep(2500);
      expect(controller.server.requests).toHaveLength(0);
      expect(await pollerState(env.api.services.db, integrationId)).toBeUndefined();
      p.child.kill('SIGTERM');
      expect(await p.exited).toBe(0);
    } finally {
      await controller.close();
    }
  });
});
