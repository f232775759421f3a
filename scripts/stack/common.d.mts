// Types for the parts of common.mjs the tests use (the module itself is plain ESM).
export declare function waitFor(
  check: () => Promise<unknown> | unknown,
  o: { timeoutMs: number; alive?: () => Promise<boolean> | boolean; busy?: () => boolean; intervalMs?: number },
): Promise<'ok' | 'died' | 'timeout'>;
export declare function writtenWithin(file: string, ms: number): boolean;
export declare const ENGINE_DIRS: Readonly<Record<'postgres' | 'redis' | 'clickhouse' | 'kafka' | 'kafkaCluster', string>>;
export declare const PRIVATE_DIR_MODE: number;
