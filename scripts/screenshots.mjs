#!/usr/bin/env node
// `npm run screenshots -- [--key KEY] [--url http://127.0.0.1:8080] [--venue ID] [--simulate 2d]`:
// signs in to the running dashboard (`npm run up`) in headless Chromium and writes the images of
// docs/screenshots/: sign-in, overview (the portfolio), alarms, venue (1366 px, whole page),
// venue-phone (390 px, whole page) and setup (a venue's settings). With --simulate SPAN it first
// runs the simulator (`npm run simulate -- --backfill SPAN --no-live`) so there is something to
// show; without --key it uses the simulated operator's key from the simulator's state file.
// The browser tests take the same views into the temp directory, not docs/.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { launchChromium } from './lib/chromium.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const USAGE =
  'usage: npm run screenshots -- [--key <operator API key>] [--url http://127.0.0.1:8080] [--venue <venue id>] [--simulate <span, e.g. 2d>]';
let values;
try {
  ({ values } = parseArgs({
    options: {
      key: { type: 'string' },
      url: { type: 'string', default: 'http://127.0.0.1:8080' },
      venue: { type: 'string' },
      simulate: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  }));
} catch (err) {
  console.error(`${err.message}\n${USAGE}`);
  process.exit(2);
}
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const stateFile = join(root, '.stack', 'simulator', 'simulated-venues.json');
if (values.simulate) {
  console.log(`running the simulator: a ${values.simulate} backfill against ${values.url} …`);
  const run = spawnSync(
    'npm',
    ['run', '-s', 'simulate', '--', '--url', values.url, '--backfill', values.simulate, '--no-live', '--faults'],
    { cwd: root, stdio: 'inherit' },
  );
  if (run.status !== 0) process.exit(run.status ?? 1);
}
const key = values.key ?? (fs.existsSync(stateFile) ? JSON.parse(fs.readFileSync(stateFile, 'utf8')).operator?.key : undefined);
if (!key) {
  console.error(`no key: pass --key, or run with --simulate 2d first\n${USAGE}`);
  process.exit(2);
}
const out = (name) => join(root, 'docs', 'screenshots', `${name}.png`);
const written = [];
const shot = async (page, name, opts = {}) => {
  await page.screenshot({ path: out(name), ...opts });
  written.push(out(name));
};
/** Every section settled: no status line still says "Loading". */
const settled = (page) =>
  page.waitForFunction(() => ![...document.querySelectorAll('.status')].some((s) => s.textContent?.startsWith('Loading')), null, {
    timeout: 120_000,
  });

const browser = await launchChromium({ width: 1366, height: 768 });
try {
  const page = await browser.context.newPage();
  await page.goto(`${values.url}/`);
  await page.getByLabel('API key').waitFor();
  await shot(page, 'sign-in');
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  const first = page.locator('#portfolio a.venue-link').first();
  await first.waitFor({ timeout: 15_000 }).catch(async () => {
    throw new Error(`no venue appeared: ${await page.locator('main').innerText()}`);
  });
  await settled(page);
  await page.waitForTimeout(500);
  await shot(page, 'overview', { fullPage: true });
  // The venue that needs attention most (the portfolio's first row), unless --venue.
  const venueHash = `#/venues/${values.venue ?? (await first.getAttribute('href')).split('/').pop()}`;

  await page.evaluate(() => (location.hash = '#/alarms'));
  await page.locator('#alarm-list .status:not(:empty)').waitFor();
  await settled(page);
  await shot(page, 'alarms');

  const openVenue = async () => {
    await page.evaluate((h) => (location.hash = h), venueHash);
    await page.locator('#occupancy table').waitFor();
    await page.locator('#predictions').scrollIntoViewIfNeeded();
    await settled(page);
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.waitForTimeout(500);
  };
  await openVenue();
  await shot(page, 'venue', { fullPage: true });

  await page.evaluate((h) => (location.hash = `${h}/setup`), venueHash);
  await page.locator('#zones-card table').waitFor();
  await settled(page);
  await shot(page, 'setup', { fullPage: true });

  await page.setViewportSize({ width: 390, height: 844 });
  await page.evaluate(() => (location.hash = '#/'));
  await openVenue();
  await shot(page, 'venue-phone', { fullPage: true });
  await page.evaluate(() => (location.hash = '#/'));
  await page.locator('#portfolio a.venue-link').first().waitFor();
  await settled(page);
  await shot(page, 'overview-phone', { fullPage: true });
  console.log(`wrote ${written.join(', ')}`);
} finally {
  await browser.close();
}
