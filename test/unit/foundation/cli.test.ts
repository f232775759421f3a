import { afterEach, describe, expect, it, vi } from 'vitest';
import { cliArgs } from '../../../lib/cli.js';

const spec = { options: { rate: { type: 'string' as const, default: '1000' }, quiet: { type: 'boolean' as const } } };

/** Runs cliArgs with argv, catching its exit and what it printed. */
function run(argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((s) => (out.push(String(s)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((s) => (err.push(String(s)), true));
  vi.spyOn(process, 'exit').mockImplementation((code) => {
    throw new Error(`exit ${code}`);
  });
  try {
    return { parsed: cliArgs('npm run bench:x --', 'What x measures.', spec, argv), out: out.join(''), err: err.join('') };
  } catch (e) {
    return { exit: (e as Error).message, out: out.join(''), err: err.join('') };
  } finally {
    vi.restoreAllMocks();
  }
}

afterEach(() => vi.restoreAllMocks());

describe('the command-line entry points (lib/cli.ts)', () => {
  it('parse their options with the defaults', () => {
    expect(run(['--rate', '500', '--quiet']).parsed?.values).toEqual({ rate: '500', quiet: true });
    expect(run([]).parsed?.values).toEqual({ rate: '1000' });
  });

  it('print the usage with every option and its default for --help, and exit 0', () => {
    const r = run(['--help']);
    expect(r.exit).toBe('exit 0');
    expect(r.out).toContain('usage: npm run bench:x -- [options]\n\nWhat x measures.\n\nOptions:\n');
    expect(r.out).toMatch(/--rate <value> +default 1000\n/);
    expect(r.out).toMatch(/--quiet\n/);
    expect(run(['-h']).exit).toBe('exit 0');
  });

  it('refuse an unknown option or a missing value with the reason and the usage, exit 2, no stack trace', () => {
    const unknown = run(['--rtae', '5']);
    expect(unknown.exit).toBe('exit 2');
    expect(unknown.err).toMatch(/^Unknown option '--rtae'\n\nusage: npm run bench:x/);
    const missing = run(['--rate']);
    expect(missing.exit).toBe('exit 2');
    expect(missing.err).toMatch(/^Option '--rate <value>' argument missing\n\nusage:/);
  });
});
