import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BrowserContext } from 'playwright-core';
import type { Config } from '../../lib/config.js';
import { repoPath } from '../../lib/paths.js';
import { launchChromium } from '../../scripts/lib/chromium.mjs';
import { ensureWebBuild } from '../../scripts/lib/web.mjs';
import { startTestEdge } from '../edge/support.js';
import type { RunningApi } from '../support/env.js';
import { startServiceStack } from '../support/service-stack.js';
import { startFrontDoor, type FrontDoor } from '../support/frontdoor.js';

/**
 * The whole product on loopback for the browser: a real api and a real edge behind a real nginx
 * of the stack (serving the built page), the events sink, the stream processors and the alarm
 * rules, all on a topic prefix of their own; and Chromium with a fresh profile.
 */
export interface WebStack {
  cfg: Config;
  api: RunningApi;
  fd: FrontDoor;
  browser: BrowserContext;
  /** Shuts the edge down in order (clients get 1001); the returned function starts a new one on the same port. */
  stopEdge(): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/** `edge`: settings of the edge only (e.g. a shorter key re-check, so a test need not wait 5 s for it). */
export async function startWebStack(opts: { edge?: Partial<Record<keyof Config, string>> } = {}): Promise<WebStack> {
  ensureWebBuild(repoPath(), () => undefined);
  const { cfg, overrides: shared, api, stops, close } = await startServiceStack('web');
  const overrides = { ...shared, ...opts.edge };
  try {
    let edge = await startTestEdge(overrides);
    stops.push(() => edge.close());
    const stopEdge = async () => {
      const port = edge.port;
      await edge.close();
      return async () => {
        edge = await startTestEdge({ ...overrides, EDGE_PORT: String(port) });
      };
    };
    const fd = await startFrontDoor({ apiPort: Number(new URL(api.url).port), edgePort: edge.port });
    stops.push(() => fd.close());
    const chromium = await launchChromium();
    stops.push(() => chromium.close());
    const browser = chromium.context;
    return { cfg, api, fd, browser, stopEdge, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * Where a run keeps its screenshot of each main view (to look at after a failure). Not docs/:
 * a test run must not change tracked files; `npm run screenshots` writes those.
 */
export const SCREENSHOTS = path.join(os.tmpdir(), 'venue-web-screenshots');
export function screenshot(name: string): string {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  return path.join(SCREENSHOTS, `${name}.png`);
}
