import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testConfig } from '../support/env.js';
import { sleep } from './support.js';

let api: ChildProcess;
let port: number;
let exited: Promise<number | null>;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port: p } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return p;
}

beforeAll(async () => {
  port = await freePort();
  api = spawn(process.execPath, ['node_modules/vite-node/vite-node.mjs', 'apps/api/main.ts'], {
    env: { ...process.env, API_PORT: String(port), API_HOST: '127.0.0.1', SHUTDOWN_TIMEOUT_MS: '20000' },
    stdio: 'ignore',
  });
  exited = new Promise((resolve) => api.on('exit', (code) => resolve(code)));
  const until = Date.now() + 30_000;
  for (;;) {
    const up = await fetch(`http://127.0.0.1:${port}/api/status`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (Date.now() > until) throw new Error('the api did not start');
    await sleep(200);
  }
});

afterAll(() => {
  if (api.exitCode === null) api.kill('SIGKILL');
});

describe('the api process on SIGTERM', () => {
  it('answers a request in flight on a keep-alive connection, closes that connection and exits 0 well before its timeout', async () => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString()));
    // An admin request, so the api reads the body (a request without a key is answered before its body).
    const body = '{"events":[]}';
    const admin = testConfig().ADMIN_SECRET;
    socket.write(
      `POST /api/operators HTTP/1.1\r\nHost: api\r\nConnection: keep-alive\r\nX-Admin-Key: ${admin}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    socket.write(body.slice(0, 5));
    await sleep(300);
    const signalled = Date.now();
    api.kill('SIGTERM');
    await sleep(300);
    socket.write(body.slice(5));

    const code = await Promise.race([exited, sleep(10_000).then(() => 'still running')]);
    expect(code).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(10_000);
    // The request was answered (an invalid operator body: 400), and the server said it would close the connection.
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer.toLowerCase()).toContain('connection: close');
    socket.destroy();
  });
});
