// The dashboard page's build (apps/web → apps/web/dist, docs/web.md): made by `npm run up` and by
// the browser tests when it is missing or older than any of its sources.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const newest = (p) => {
  const st = statSync(p);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(st.mtimeMs, ...readdirSync(p).map((f) => newest(join(p, f))));
};

/** Why the build must be (re)made, or null when apps/web/dist is up to date. */
export function webBuildReason(root) {
  const web = join(root, 'apps', 'web');
  const index = join(web, 'dist', 'index.html');
  if (!existsSync(index)) return 'not built yet';
  const sources = ['index.html', 'vite.config.mjs', 'src'].map((f) => join(web, f)).filter(existsSync);
  return Math.max(...sources.map(newest)) > statSync(index).mtimeMs ? 'sources changed since the last build' : null;
}

/** Builds the page with Vite when needed; returns what it did. Throws with Vite's output on failure. */
export function ensureWebBuild(root, log = console.log) {
  const reason = webBuildReason(root);
  if (!reason) return 'up to date';
  log(`web: building the dashboard page (${reason})…`);
  const r = spawnSync(
    process.execPath,
    [join(root, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', join(root, 'apps', 'web'), '--logLevel', 'warn'],
    {
      cwd: root,
      encoding: 'utf8',
    },
  );
  if (r.status !== 0) throw new Error(`vite build of apps/web failed:\n${r.stdout}${r.stderr}`);
  return 'built';
}
