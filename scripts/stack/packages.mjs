// Installs (with apt-get, as root) the Debian packages the local engines need and lacks.
// Each engine module says what it misses through `missingPackages()`.

import { FILES, isRoot, rel, run, which } from './common.mjs';
import { timed } from './state.mjs';

/** Debian's Chromium, driven by the browser tests (test/web/) through playwright-core. */
export const chromium = {
  name: 'chromium',
  missingPackages: () => (which('chromium') ? [] : ['chromium']),
};

/**
 * OpenSSL's command line: the pollers' tests and `simulate --native` make self-signed certificates
 * for their fake vendor servers with it.
 */
export const openssl = {
  name: 'openssl',
  missingPackages: () => (which('openssl') ? [] : ['openssl']),
};

const missingOf = (services) => [...new Set(services.flatMap((s) => s.missingPackages()))];

export async function ensurePackages(services, log, quiet) {
  const pkgs = missingOf(services);
  if (!pkgs.length) return;
  if (!isRoot()) {
    throw new Error(`stack: missing packages ${pkgs.join(' ')} — install them first: sudo apt-get install -y ${pkgs.join(' ')}`);
  }
  log(`packages   installing ${pkgs.join(' ')} (apt-get; output in ${rel(FILES.apt)})`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const opts = quiet ? { env, outFile: FILES.apt } : { env, inherit: true };
  await timed('packages   apt-get', log, async () => {
    const upd = await run('apt-get', ['update'], opts);
    if (upd.code !== 0) throw new Error(`stack: apt-get update failed (exit ${upd.code}${quiet ? `, see ${rel(FILES.apt)}` : ''})`);
    const inst = await run('apt-get', ['install', '-y', '--no-install-recommends', ...pkgs], opts);
    if (inst.code !== 0)
      throw new Error(`stack: apt-get install ${pkgs.join(' ')} failed (exit ${inst.code}${quiet ? `, see ${rel(FILES.apt)}` : ''})`);
  });
  const still = missingOf(services);
  if (still.length) throw new Error(`stack: still missing after apt-get install: ${still.join(' ')}`);
}
