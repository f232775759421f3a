import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

/**
 * A module run in a worker thread: its own event loop and heap, so its synchronous work and its
 * garbage collections do not hold up the thread that started it. `entry` is the module's URL as
 * the caller sees it (`new URL('./x.js', import.meta.url)`). Built code runs it as it is; source
 * run by vite-node (tests, `vite-node apps/…`) has `.ts` files Node cannot load, so vite-node
 * runs it in the thread too.
 */
export function startThread(entry: URL, workerData: unknown): Worker {
  const built = fileURLToPath(entry);
  const source = fileURLToPath(import.meta.url).endsWith('.ts');
  if (!source) return new Worker(built, { workerData });
  const viteNode = join(dirname(createRequire(import.meta.url).resolve('vite-node/package.json')), 'vite-node.mjs');
  return new Worker(viteNode, { argv: [built.replace(/\.js$/, '.ts')], workerData });
}
