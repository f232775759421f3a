import { existsSync, statSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

/** Runs `npm ci` only when node_modules is missing or older than package-lock.json. */
export function ensureNodeModules(root, log = console.log) {
  const marker = join(root, 'node_modules', '.package-lock.json');
  const lock = join(root, 'package-lock.json');
  if (existsSync(marker) && statSync(marker).mtimeMs >= statSync(lock).mtimeMs) return;
  log('npm: installing dependencies (first run only)…');
  const r = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error('npm ci failed; see the output above');
    process.exit(r.status ?? 1);
  }
}

/** Compiles TypeScript to dist/ (incremental, so a second build is quick). */
export function build(root) {
  const r = spawnSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], {
    cwd: root,
    stdio: 'inherit',
  });
  if (r.status !== 0) {
    console.error('TypeScript build failed; see the errors above');
    process.exit(r.status ?? 1);
  }
}
