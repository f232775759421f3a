// Types for scripts/lib/chromium.mjs (plain ESM).
import type { BrowserContext } from 'playwright-core';
export declare const CHROMIUM: string;
export declare const CHROMIUM_FLAGS: readonly string[];
export declare function launchChromium(o?: {
  width?: number;
  height?: number;
}): Promise<{ context: BrowserContext; close(): Promise<void> }>;
