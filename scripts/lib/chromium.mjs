// Debian's Chromium driven by playwright-core (browser tests, `npm run screenshots`).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

/** Installed by the stack script when missing (scripts/stack/packages.mjs). */
export const CHROMIUM = '/usr/bin/chromium';
/** Without these the browser tries to reach the network (updates, sync, QUIC) and hangs on a machine without one. */
export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * A headless Chromium with a fresh, throwaway profile (a persistent context is Playwright's one way
 * to pass our own --user-data-dir). close() also removes the profile.
 */
export async function launchChromium({ width = 1280, height = 900 } = {}) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'venue-chromium-'));
  try {
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_FLAGS,
      viewport: { width, height },
    });
    return {
      context,
      async close() {
        await context.close();
        fs.rmSync(profile, { recursive: true, force: true });
      },
    };
  } catch (err) {
    fs.rmSync(profile, { recursive: true, force: true });
    throw err;
  }
}
