// Types for the parts of state.mjs the tests use (the module itself is plain ESM).
export declare function timed<T>(label: string, log: (line: string) => void, fn: () => Promise<T>, everyMs?: number): Promise<T>;
export declare function registerProcess(name: string, info: { pid: number; port?: number; health?: string }): void;
export declare function unregisterProcess(name: string, pid?: number): void;
