import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const manifestHash = (root) =>
  createHash('sha256')
    .update(readFileSync(join(root, 'package.json')))
    .update(existsSync(join(root, 'package-lock.json')) ? readFileSync(join(root, 'package-lock.json')) : '')
    .digest('hex');

/**
 * Installs npm dependencies when node_modules is missing or package.json / package-lock.json
 * changed since the last install. `npm install`, not `npm ci`: the npm 11 on these machines writes
 * lock files without other platforms' optional packages and its `ci` then refuses them as out of
 * sync; `install` follows the lock all the same.
 */
export function ensureNodeModules(root, log = console.log) {
  const stamp = join(root, 'node_modules', '.installed-manifest');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === manifestHash(root)) return;
  const t0 = Date.now();
  log(`npm: installing dependencies (${existsSync(stamp) ? 'package.json changed' : 'first run: about a minute'})…`);
  const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error('npm install failed; see the output above');
    process.exit(r.status ?? 1);
  }
  writeFileSync(stamp, manifestHash(root));
  log(`npm: dependencies installed in ${Math.round((Date.now() - t0) / 1000)} s`);
}

/** Compiles TypeScript to dist/ (incremental, so a second build is quick). */
export function build(root, log = console.log) {
  const t0 = Date.now();
  const first = !existsSync(join(root, 'dist'));
  if (first) log('build: compiling TypeScript (first run: about 30 s)…');
  const r = spawnSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], {
    cwd: root,
    stdio: 'inherit',
  });
  if (r.status !== 0) {
    console.error('TypeScript build failed; see the errors above');
    process.exit(r.status ?? 1);
  }
  if (first) log(`build: compiled in ${Math.round((Date.now() - t0) / 1000)} s`);
}
