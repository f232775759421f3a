#!/usr/bin/env node
// `npm test`: installs what is missing, then lint (ESLint, Prettier, tsc --noEmit), the unit tests (no engines),
// the e2e tests (their global setup starts the local stack). Every step runs even after a failure,
// so CI gets all the figures; the exit code is non-zero if any failed. The last lines are plain
// `lint: …`, `unit: …`, `e2e: …` and `vitest: N passed, N failed` that any CI can read.
// `npm test -- <vitest arguments>` runs only vitest with them (e.g. one file), without lint.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureNodeModules } from './lib/deps.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
ensureNodeModules(root);
const bin = (...path) => join(root, 'node_modules', ...path);
mkdirSync(join(root, '.stack'), { recursive: true });

/** Runs vitest; the counts of its JSON report (null when it wrote none: vitest itself failed). */
function vitest(name, args) {
  const report = join(root, '.stack', `vitest-report-${name}.json`);
  rmSync(report, { force: true });
  const r = spawnSync(
    process.execPath,
    [bin('vitest', 'vitest.mjs'), 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...args],
    { cwd: root, stdio: 'inherit' },
  );
  if (!existsSync(report)) return { ok: false, counts: null };
  const { numPassedTests = 0, numFailedTests = 0, numPendingTests = 0 } = JSON.parse(readFileSync(report, 'utf8'));
  return { ok: r.status === 0, counts: { passed: numPassedTests, failed: numFailedTests, skipped: numPendingTests } };
}

const countsLine = (c, showSkipped = c.skipped > 0) =>
  `${c.passed} passed, ${c.failed} failed${showSkipped ? `, ${c.skipped} skipped` : ''}`;

/** A command's exit code and captured output (asynchronous, so ESLint and Prettier share the two cores). */
function capture(args) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: root });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/**
 * ESLint, `prettier --check` and the type check (vitest strips types, so a test's type error shows
 * nowhere else): the number of errors and unformatted files (warnings do not fail).
 */
async function lint() {
  // Caches in node_modules/.cache, as with `npm run lint`: a second run checks only changed files.
  const [eslint, prettier, tsc] = await Promise.all([
    capture([bin('eslint', 'bin', 'eslint.js'), '.', '--cache', '--cache-location', bin('.cache', 'eslint') + '/', '--format', 'json']),
    capture([bin('prettier', 'bin', 'prettier.cjs'), '--list-different', '--cache', '.']),
    capture([bin('typescript', 'bin', 'tsc'), '--noEmit', '-p', 'tsconfig.json', '--pretty', 'false']),
  ]);
  let errors = 0;
  let warnings = 0;
  try {
    for (const file of JSON.parse(eslint.stdout)) {
      errors += file.errorCount;
      warnings += file.warningCount;
      for (const m of file.messages) {
        const where = `${file.filePath.slice(root.length + 1)}:${m.line}:${m.column}`;
        console.log(`${where} ${m.severity === 2 ? 'error' : 'warning'} ${m.message} (${m.ruleId ?? 'eslint'})`);
      }
    }
  } catch {
    // No JSON: ESLint itself failed (a broken config); its reason is on stderr.
    process.stderr.write(eslint.stderr);
    errors += 1;
  }
  const unformatted = prettier.stdout.split('\n').filter(Boolean);
  for (const file of unformatted) console.log(`${file}: not formatted (npm run format)`);
  // Exit code 2: Prettier could not run or parse a file.
  const broken = prettier.status === 2 ? 1 : 0;
  if (broken) process.stderr.write(prettier.stderr);
  const typeErrors = tsc.stdout.split('\n').filter((l) => /error TS\d+/.test(l));
  for (const l of typeErrors) console.log(l);
  // Any other failure of tsc (a broken tsconfig) counts as one problem, with its output.
  const tscBroken = tsc.status !== 0 && typeErrors.length === 0 ? 1 : 0;
  if (tscBroken) process.stderr.write(tsc.stdout + tsc.stderr);
  const problems = errors + unformatted.length + broken + typeErrors.length + tscBroken;
  const detail = `${errors} ESLint errors, ${warnings} warnings, ${unformatted.length} files not formatted, ${typeErrors.length} type errors`;
  return {
    ok: problems === 0,
    line: problems === 0 ? `ok${warnings ? ` (${warnings} warnings)` : ''}` : `${problems} problems (${detail})`,
  };
}

// `node scripts/test.mjs -- file` passes the `--` through; vitest would take what follows for options.
const args = process.argv.slice(2).filter((a, i) => !(i === 0 && a === '--'));
if (args.length > 0) {
  // One file at a time unless told otherwise: the SERIAL files must not meet another.
  const run = vitest('args', args.some((a) => a.startsWith('--maxWorkers')) ? args : ['--maxWorkers=1', '--minWorkers=1', ...args]);
  if (run.counts) console.log(`vitest: ${countsLine(run.counts)}`);
  process.exit(run.ok ? 0 : 1);
}

console.log('lint: ESLint, Prettier and tsc…');
const linted = await lint();
const unit = vitest('unit', ['--project', 'unit']);
// The e2e files that must run alone (vitest.config.ts SERIAL) follow the others, which run three at a time.
const e2eRuns = [
  vitest('e2e', ['--project', 'e2e', '--maxWorkers=3', '--minWorkers=3']),
  vitest('e2e-serial', ['--project', 'e2e-serial', '--maxWorkers=1', '--minWorkers=1']),
];
const e2e = {
  ok: e2eRuns.every((r) => r.ok),
  counts: e2eRuns.every((r) => r.counts)
    ? Object.fromEntries(['passed', 'failed', 'skipped'].map((k) => [k, e2eRuns.reduce((n, r) => n + r.counts[k], 0)]))
    : null,
};
const total = { passed: 0, failed: 0, skipped: 0 };
for (const run of [unit, e2e]) for (const k of Object.keys(total)) total[k] += run.counts?.[k] ?? 0;

console.log(`lint: ${linted.line}`);
// The e2e figures always name skipped tests: opt-in suites (KAFKA_CLUSTER_TEST …) skip without them.
for (const [name, run] of Object.entries({ unit, e2e })) {
  console.log(`${name}: ${run.counts ? countsLine(run.counts, name === 'e2e') : 'no results (vitest stopped early; see above)'}`);
}
console.log(`vitest: ${countsLine(total)}`);
process.exit(linted.ok && unit.ok && e2e.ok ? 0 : 1);
