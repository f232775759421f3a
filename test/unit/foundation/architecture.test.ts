import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../../lib/paths.js';

/**
 * The layers, top to bottom: a file may import its own layer or any layer below it, never one above.
 * The processes and tools (apps, simulator, scripts) sit on top; lib knows nothing of the rest.
 */
const LAYER: Record<string, number> = {
  apps: 4,
  simulator: 4,
  scripts: 4,
  pipeline: 3,
  domain: 2,
  postgres: 1,
  clickhouse: 1,
  lib: 0,
};
/** A source file past this many lines is doing more than one job (tests and benchmarks aside). */
const MAX_LINES = 400;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) return [];
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.(ts|mts|mjs)$/.test(name) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

const files = Object.keys(LAYER).flatMap((top) => sourceFiles(join(ROOT, top)).map((f) => relative(ROOT, f)));
const known = new Set(files);
const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s*['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g;

/** The repository files a source file imports (relative imports only; packages are not layers). */
function importsOf(file: string): string[] {
  const src = readFileSync(join(ROOT, file), 'utf8');
  return [...src.matchAll(IMPORT)].flatMap((m) => {
    const target = relative(ROOT, join(ROOT, dirname(file), m[1] ?? m[2] ?? ''));
    const hit = [target, target.replace(/\.js$/, '.ts'), `${target}.ts`, join(target, 'index.ts')].find((c) => known.has(c));
    return hit ? [hit] : [];
  });
}

const graph = new Map(files.map((f) => [f, importsOf(f)]));
const layerOf = (file: string) => LAYER[file.split('/')[0] ?? ''] ?? -1;

/** Strongly connected components of more than one file (Tarjan), or a file importing itself. */
function cycles(): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)!.includes(v)) found.push(component.sort());
  };
  for (const f of files) if (!index.has(f)) visit(f);
  return found;
}

describe('architecture', () => {
  it('finds the source files and their imports (the checks below are not vacuous)', () => {
    expect(files.length).toBeGreaterThan(200);
    expect(graph.get('apps/api/main.ts')).toContain('lib/config.ts');
    expect(graph.get('pipeline/processors/run.ts')!.length).toBeGreaterThan(3);
  });

  it('no import runs up a layer (apps → pipeline → domain → postgres/clickhouse → lib)', () => {
    const upward = files.flatMap((f) =>
      graph
        .get(f)!
        .filter((t) => layerOf(t) > layerOf(f))
        .map((t) => `${f} → ${t}`),
    );
    expect(upward).toEqual([]);
  });

  it('no imports form a cycle', () => {
    expect(cycles()).toEqual([]);
  });

  it(`no source file outside tests and benchmarks passes ${MAX_LINES} lines`, () => {
    const long = files
      .map((f) => ({ f, lines: readFileSync(join(ROOT, f), 'utf8').trimEnd().split('\n').length }))
      .filter(({ lines }) => lines > MAX_LINES)
      .map(({ f, lines }) => `${f}: ${lines}`);
    expect(long).toEqual([]);
  });
});
