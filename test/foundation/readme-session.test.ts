import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoPath } from '../../lib/paths.js';
import { startServiceStack, type ServiceStack } from '../support/service-stack.js';

let stack: ServiceStack;

beforeAll(async () => {
  stack = await startServiceStack('readme');
});

afterAll(async () => {
  await stack?.close();
});

/** The README's curl session, as written: its first shell block after the heading. */
function session(): string {
  const readme = readFileSync(repoPath('README.md'), 'utf8');
  const from = readme.indexOf('## A first session with curl');
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(from));
  if (from < 0 || !block) throw new Error('README: no curl session found');
  return block[1]!;
}

function bash(script: string, env: Record<string, string>): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    // No start-up files: a machine's bashrc (through BASH_ENV) is not the README's business.
    const { BASH_ENV: _bashEnv, ENV: _env, ...inherited } = process.env;
    const child = spawn('bash', ['--noprofile', '--norc', '-euo', 'pipefail', '-c', script], {
      cwd: repoPath(),
      env: { ...inherited, ...env },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('close', (code) => resolve({ code, out, err }));
  });
}

describe('the README curl session', () => {
  it('runs as written from a clean start: every step answers as its comment says', async () => {
    const { code, out, err } = await bash(session(), { B: stack.api.url });
    expect(err).toBe('');
    expect(code).toBe(0);
    const lines = out.trim().split('\n');
    expect(lines[0]).toMatch(/^vt_live_[A-Za-z0-9]{28}$/);
    const json = lines.slice(1).map((l) => JSON.parse(l) as Record<string, unknown>);
    const [zone, integration, ingest, telemetry, density, alarms, ack, again] = json;
    expect(zone).toMatchObject({ slug: 'entrance', capacity: 40 });
    expect(integration).toMatchObject({
      connector_type: 'meraki',
      config: { org_id: '549236', api_key: '[REDACTED]', webhook_secret: '[REDACTED]' },
    });
    expect(ingest).toMatchObject({ accepted: 1, rejected: 1 });
    expect(telemetry).toMatchObject({ devices: [expect.objectContaining({ value: 1 })] });
    expect(density).toEqual({ accepted: 1, rejected: 0, errors: [] });
    expect(alarms).toMatchObject({ total: 1, alarms: [{ severity: 'MAJOR', status: 'ACTIVE_UNACK', type: 'zone_occupancy_high' }] });
    expect(ack).toMatchObject({ status: 'ACTIVE_ACK' });
    expect(again).toMatchObject({ code: 'ALREADY_ACKNOWLEDGED' });
  });
});
