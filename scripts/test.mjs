#!/usr/bin/env node
// `npm test`: installs what is missing, then runs vitest; its global setup starts the local stack.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureNodeModules } from './lib/deps.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
ensureNodeModules(root);
const vitest = join(root, 'node_modules', 'vitest', 'vitest.mjs');
const r = spawnSync(process.execPath, [vitest, 'run', ...process.argv.slice(2)], { cwd: root, stdio: 'inherit' });
process.exit(r.status ?? 1);
