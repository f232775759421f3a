// Types for scripts/lib/web.mjs (plain ESM), used by the browser tests.
export declare function webBuildReason(root: string): string | null;
export declare function ensureWebBuild(root: string, log?: (line: string) => void): 'up to date' | 'built';
