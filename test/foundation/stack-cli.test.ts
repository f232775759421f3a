import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { registerProcess, timed, unregisterProcess } from '../../scripts/stack/state.mjs';

const run = promisify(execFile);
const stack = (...args: string[]) =>
  run(process.execPath, ['scripts/stack.mjs', ...args]).then(
    (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout, err: e.stderr }),
  );

describe('the stack command line', () => {
  it('prints its usage for --help and refuses an unknown option or command with it, not a Node stack trace', async () => {
    const help = await stack('--help');
    expect(help.code).toBe(0);
    expect(help.out).toContain('usage: node scripts/stack.mjs <command>');
    expect(help.out).toContain('status   one line per engine, then the service processes');

    const bogus = await stack('status', '--bogus');
    expect(bogus.code).toBe(2);
    expect(bogus.err).toMatch(/^Unknown option '--bogus'\n\nusage:/);
    expect(bogus.err).not.toMatch(/\n\s+at /);

    const unknown = await stack('frob');
    expect(unknown.code).toBe(2);
    expect(unknown.err).toMatch(/^unknown command 'frob'/);
  });

  it('lists the service processes a launcher registered, with port and health, and drops exited ones', async () => {
    const server = createServer((_req, res) => res.end(JSON.stringify({ status: 'healthy' })));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    try {
      registerProcess('test-proc', { pid: process.pid, port, health: `http://127.0.0.1:${port}/health` });
      // A process that exited without unregistering (killed) is not shown.
      registerProcess('test-gone', { pid: 2 ** 22 + 7, port: 1 });
      const status = await stack('status');
      expect(status.code).toBe(0);
      const line = status.out.split('\n').find((l) => l.startsWith('test-proc'));
      expect(line).toMatch(new RegExp(`^test-proc\\s+running\\s+127\\.0\\.0\\.1:${port}\\s+pid ${process.pid}\\s+health: healthy`));
      expect(status.out).not.toContain('test-gone');
    } finally {
      unregisterProcess('test-proc');
      unregisterProcess('test-gone');
      server.close();
    }
  });

  it('reports a long first-run step while it runs and how long it took', async () => {
    const lines: string[] = [];
    const result = await timed(
      'packages   apt-get',
      (l) => lines.push(l),
      () => new Promise((r) => setTimeout(() => r(42), 130)),
      50,
    );
    expect(result).toBe(42);
    expect(lines.filter((l) => /^packages {3}apt-get … still running \(\d+ s\)$/.test(l)).length).toBeGreaterThanOrEqual(2);
    expect(lines.at(-1)).toMatch(/^packages {3}apt-get done in \d+ s$/);
  });
});
