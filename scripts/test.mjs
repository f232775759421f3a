#!/usr/bin/env node
// `npm test`: installs what is missing, then runs vitest; its global setup starts the local stack.
// Ends with a plain `vitest: N passed, N failed` line that any CI can read.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureNodeModules } from './lib/deps.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
ensureNodeModules(root);
const vitest = join(root, 'node_modules', 'vitest', 'vitest.mjs');
const report = join(root, '.stack', 'vitest-report.json');
mkdirSync(dirname(report), { recursive: true });
rmSync(report, { force: true });
const r = spawnSync(
  process.execPath,
  [vitest, 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...process.argv.slice(2)],
  { cwd: root, stdio: 'inherit' },
);
if (existsSync(report)) {
  const { numPassedTests = 0, numFailedTests = 0, numPendingTests = 0 } = JSON.parse(readFileSync(report, 'utf8'));
  console.log(`vitest: ${numPassedTests} passed, ${numFailedTests} failed${numPendingTests ? `, ${numPendingTests} skipped` : ''}`);
}
process.exit(r.status ?? 1);
