// Types for the parts of nginx.mjs the front-door tests use (the module itself is plain ESM).
export declare const LOG_FILES: readonly string[];
export declare const LOG_MODE: number;
export declare function nginxBinary(): string | null;
export declare const WEB_ROOT: string;
export declare function renderConfig(o: {
  prefix: string;
  port: number;
  apiPort: number | number[];
  edgePort: number;
  webRoot?: string;
}): string;
export declare function writeFrontDoor(
  prefix: string,
  o: { port: number; apiPort: number | number[]; edgePort: number; webRoot?: string },
): { changed: boolean; emptied: string[] };
export declare function nginxArgs(prefix: string, extra?: string[]): string[];
export declare function runFrontDoor(
  dir: string,
  args?: string[],
): Promise<{ port: number; url: string; pid: number; output(): string; stop(): Promise<void> }>;
