import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BODY_BYTES } from '../../apps/api/middleware/body.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { freePort, startDeployFrontDoor, startFrontDoor, type FrontDoor } from '../support/frontdoor.js';
import { newOperator, type TestOperator } from '../support/tenants.js';

// Issue 29: a body under the limit must stay in memory. nginx writes a body larger than
// client_body_buffer_size to a temporary file, which it unlinks at once but keeps open until the
// request ends; its "buffered to a temporary file" warning is below the `crit` error log. So the
// check is the workers' open descriptors while a ~1.5 MB body is still arriving.

const sizes: Record<string, number> = { k: 1024, m: 1024 * 1024 };
const bytes = (v: string) => Number(/^(\d+)([km]?)$/i.exec(v)![1]) * (sizes[/[km]$/i.exec(v)?.[0].toLowerCase() ?? ''] ?? 1);

/** Every value of `directive` in the files the front door's nginx.conf is made of. */
function values(dir: string, directive: string): number[] {
  const text = ['nginx.conf', 'frontdoor-errors.conf', 'frontdoor-logging.conf', 'frontdoor-web.conf']
    .map((f) => fs.readFileSync(path.join(dir, f), 'utf8'))
    .join('\n');
  return [...text.matchAll(new RegExp(`^\\s*${directive}\\s+(\\S+);`, 'gm'))].map((m) => bytes(m[1]!));
}

/** Pids of the workers of the nginx running from `dir`. */
function workers(dir: string): number[] {
  const pids = fs
    .readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .map(Number);
  const cmd = (pid: number) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      return '';
    }
  };
  const ppid = (pid: number) => {
    try {
      return Number(fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
    } catch {
      return -1;
    }
  };
  const master = pids.find((p) => cmd(p).startsWith('nginx') && cmd(p).includes(`${dir}/`));
  if (!master) throw new Error(`no nginx master for ${dir}`);
  return pids.filter((p) => ppid(p) === master);
}

/** Files the workers hold open that are deleted: nginx's request-body temp files. */
function tempFilesOpen(dir: string): string[] {
  const out: string[] = [];
  for (const pid of workers(dir)) {
    let fds: string[] = [];
    try {
      fds = fs.readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const f of fds) {
      try {
        const target = fs.readlinkSync(`/proc/${pid}/fd/${f}`);
        if (target.endsWith(' (deleted)') || target.includes('client_body') || target.startsWith('/var/lib/nginx/body')) out.push(target);
      } catch {
        /* closed meanwhile */
      }
    }
  }
  return out;
}

/** Sends all but the last bytes of `body`, collects the temp files seen meanwhile, then the rest. */
function postHolding(door: FrontDoor, key: string, body: Buffer): Promise<{ status: number; seen: string[] }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port: door.port, host: '127.0.0.1' });
    let got = '';
    const seen = new Set<string>();
    socket.on('data', (c: Buffer) => {
      got += c.toString('latin1');
      if (/\r\n\r\n/.test(got)) socket.destroy();
    });
    socket.on('error', reject);
    socket.on('close', () => resolve({ status: Number(got.split(' ')[1]), seen: [...seen] }));
    const head = [
      'POST /ingest HTTP/1.1',
      'Host: 127.0.0.1',
      `Authorization: Bearer ${key}`,
      'Content-Type: application/json',
      `Content-Length: ${body.length}`,
      'Connection: close',
      '',
      '',
    ].join('\r\n');
    socket.write(head);
    socket.write(body.subarray(0, body.length - 16), async () => {
      for (let i = 0; i < 20; i++) {
        for (const f of tempFilesOpen(door.dir)) seen.add(f);
        await new Promise((r) => setTimeout(r, 50));
      }
      socket.write(body.subarray(body.length - 16)); // not end(): nginx takes a half-close for an abort
    });
  });
}

let api: RunningApi;
let a: TestOperator;
let fd: FrontDoor;
let deploy: FrontDoor;
beforeAll(async () => {
  api = await startApi(testConfig({ RATE_LIMITS_ENABLED: 'false' }));
  a = await newOperator(api, 'pro');
  const apiPort = Number(new URL(api.url).port);
  fd = await startFrontDoor({ apiPort, edgePort: await freePort() });
  deploy = await startDeployFrontDoor({ apiPort, edgePort: await freePort() });
});
afterAll(async () => {
  await fd?.close();
  await deploy?.close();
  await api?.close();
});

describe('the front door keeps an allowed body in memory (issue 29)', () => {
  const doors = () =>
    [
      ['local stack', fd],
      ['compose (deploy/nginx.conf)', deploy],
    ] as const;

  it("buffers the whole body limit: client_body_buffer_size equals client_max_body_size, the api's limit", () => {
    for (const [, door] of doors()) {
      expect(values(door.dir, 'client_max_body_size')).toContain(MAX_BODY_BYTES);
      expect(new Set(values(door.dir, 'client_max_body_size'))).toEqual(new Set([MAX_BODY_BYTES]));
      expect(new Set(values(door.dir, 'client_body_buffer_size'))).toEqual(new Set([MAX_BODY_BYTES]));
    }
  });

  it('a ~1.5 MB body is never written to a temporary file', async () => {
    const pad = 'x'.repeat(1.5 * 1024 * 1024);
    const body = Buffer.from(JSON.stringify({ venue_id: 'v', connector_type: 'test', events: [], pad }));
    expect(body.length).toBeGreaterThan(1024 * 1024);
    expect(body.length).toBeLessThan(MAX_BODY_BYTES);
    const results: unknown[] = [];
    for (const [name, door] of doors()) results.push({ name, ...(await postHolding(door, a.key, body)) });
    // 400: the api read the body (and refused the unknown field); seen: no temp file open meanwhile.
    expect(results).toEqual(doors().map(([name]) => ({ name, status: 400, seen: [] })));
  });
});
