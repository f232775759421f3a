/**
 * The service processes, the Node flags each starts with and their CPU priority, for every
 * launcher: `npm run up` (scripts/up.mjs), the benchmarks (benchmarks/lib/harness.ts) and
 * docker-compose.yml, which test/unit/foundation/deploy.test.ts holds equal to these.
 */
export const PROCESS_ENTRIES = {
  api: 'dist/apps/api/main.js',
  edge: 'dist/apps/edge/main.js',
  pipeline: 'dist/apps/pipeline/main.js',
} as const;
export type ServiceProcess = keyof typeof PROCESS_ENTRIES;

/**
 * The api streams answers of a megabyte and more, and V8 counts those buffers against an old
 * generation limit it keeps close to the api's small live heap: without headroom, a full
 * mark-compact lands in the tail of the telemetry latency. The flag cannot be set through
 * NODE_OPTIONS nor at run time, hence this list. Measurements: benchmarks/README.md#benchquery.
 */
const API_HEAP = '--initial-old-space-size=128';

/**
 * Larger semi-spaces: fewer, not longer, young-generation collections. The pipeline holds each
 * fetched batch for up to PIPELINE_BATCH_MS while it writes, and a 1,000-event ingest request
 * allocates megabytes; with V8's default young generation that work is promoted and collected
 * twice, and scavenges overlap more requests. Trade-off and figures: docs/decisions.md (Node
 * flags), benchmarks/README.md#benchingest.
 */
const LARGE_YOUNG = '--max-semi-space-size=64';

export const NODE_FLAGS: Record<ServiceProcess, string[]> = {
  api: ['--enable-source-maps', API_HEAP, LARGE_YOUNG],
  edge: ['--enable-source-maps'],
  pipeline: ['--enable-source-maps', LARGE_YOUNG],
};

/**
 * glibc's allocator settings for every service process (read at start, so set by the launcher).
 * By default a buffer over 128 KB (a request body, a Kafka produce request or fetch response, an
 * INSERT chunk run) gets its own mmap, returned on free, and every page of it faults again on the
 * next one. Up to 16 MB comes from the heap, which keeps up to 128 MB free at its top. Cost of the
 * mmap path: benchmarks/README.md#benchingest.
 */
export const PROCESS_ENV: Readonly<Record<string, string>> = {
  MALLOC_MMAP_THRESHOLD_: String(16 * 1024 * 1024),
  MALLOC_TRIM_THRESHOLD_: String(128 * 1024 * 1024),
};

/**
 * CPU priority (nice) where the processes share a machine. The pipeline's work is batch work that
 * Kafka buffers: it runs on what the api and the edge leave, so a burst of it (a batch of inserts,
 * a processor's transaction) does not delay the answer to an ingest request or a push; under
 * overload the pipeline falls behind instead of the api. Effect on /ingest latency:
 * benchmarks/README.md#benchingest.
 */
export const NICE: Record<ServiceProcess, number> = { api: 0, edge: 0, pipeline: 10 };

/** The same weight as a container's `cpu_shares` (the kernel's weight of nice n is ~1024 / 1.25ⁿ). */
export const cpuShares = (name: ServiceProcess): number => Math.round(1024 / 1.25 ** NICE[name]);

/** The Node flags, environment and nice value of a process started from `entry` (a dist/ path); none for anything else. */
export function launchOf(entry: string): { flags: string[]; env: Readonly<Record<string, string>>; nice: number } {
  const name = (Object.keys(PROCESS_ENTRIES) as ServiceProcess[]).find((p) => PROCESS_ENTRIES[p] === entry);
  return name ? { flags: NODE_FLAGS[name], env: PROCESS_ENV, nice: NICE[name] } : { flags: [], env: {}, nice: 0 };
}
