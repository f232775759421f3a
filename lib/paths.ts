import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root, found from this file so it is the same from `lib/` (tests) and `dist/lib/` (built). */
function findRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'postgres'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the repository root above ' + fileURLToPath(import.meta.url));
    dir = parent;
  }
}

export const ROOT = findRoot();
export const repoPath = (...parts: string[]): string => join(ROOT, ...parts);
