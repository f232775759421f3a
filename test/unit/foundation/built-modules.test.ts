import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { repoPath } from '../../../lib/paths.js';

// Tests run the TypeScript through vite-node, which lets a named import take any export of a
// CommonJS package; Node's own loader, which runs dist/ (`npm run up`, the image), sees only the
// names its lexer finds (kafkajs's spread-in error classes are not among them). This builds the
// project as `npm run build` does and links every module with Node without running one: the first
// module the check imports exits the process before any other is evaluated, and a module that
// cannot be linked fails the whole graph before that. Not incremental: dist/'s build info must not
// learn of this output.
const OUT = repoPath('node_modules', '.cache', 'built-modules');

function modulesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return modulesUnder(p);
    return e.name.endsWith('.js') ? [p] : [];
  });
}

describe('the built modules', () => {
  it('link under Node’s own ES module loader, each of them', { timeout: 180_000 }, () => {
    fs.rmSync(OUT, { recursive: true, force: true });
    const tsc = spawnSync(
      process.execPath,
      [repoPath('node_modules/typescript/bin/tsc'), '-p', repoPath('tsconfig.build.json'), '--outDir', OUT, '--incremental', 'false'],
      {
        encoding: 'utf8',
      },
    );
    expect(tsc.status, tsc.stdout + tsc.stderr).toBe(0);
    const modules = modulesUnder(OUT);
    expect(modules.length).toBeGreaterThan(100);
    const stop = path.join(OUT, 'link-check-stop.mjs');
    fs.writeFileSync(stop, 'process.exit(0);\n');
    const check = path.join(OUT, 'link-check.mjs');
    fs.writeFileSync(check, [stop, ...modules].map((m) => `import ${JSON.stringify(pathToFileURL(m).href)};`).join('\n') + '\n');
    const linked = spawnSync(process.execPath, [check], { encoding: 'utf8', timeout: 60_000 });
    expect(linked.stderr).toBe('');
    expect(linked.status).toBe(0);
  });
});
