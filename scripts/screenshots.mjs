#!/usr/bin/env node
// `npm run screenshots -- --key KEY [--url http://127.0.0.1:8080] [--venue ID]`: signs in to the
// running dashboard (`npm run up`, best after `npm run simulate -- --backfill 7d`) in headless
// Chromium and writes docs/screenshots/sign-in.png, overview.png and venue.png (the first venue
// unless --venue). The browser tests take the same views into the temp directory, not docs/.
import { parseArgs } from 'node:util';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChromium } from './lib/chromium.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({ options: { key: { type: 'string' }, url: { type: 'string', default: 'http://127.0.0.1:8080' }, venue: { type: 'string' } } });
if (!values.key) {
  console.error('usage: npm run screenshots -- --key <operator API key> [--url http://127.0.0.1:8080] [--venue <venue id>]');
  process.exit(2);
}
const out = (name) => join(root, 'docs', 'screenshots', `${name}.png`);
const browser = await launchChromium();
try {
  const page = await browser.context.newPage();
  await page.goto(`${values.url}/`);
  await page.getByLabel('API key').waitFor();
  await page.screenshot({ path: out('sign-in') });
  await page.getByLabel('API key').fill(values.key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  const first = page.locator('#venues a.venue-link').first();
  await first.waitFor({ timeout: 15_000 }).catch(async () => {
    throw new Error(`no venue appeared: ${await page.locator('main').innerText()}`);
  });
  await page.locator('#connectors table, #connectors .status:not(:empty)').first().waitFor();
  await page.screenshot({ path: out('overview') });
  if (values.venue) await page.goto(`${values.url}/#/venues/${values.venue}`);
  else await first.click();
  await page.locator('#occupancy table').waitFor();
  await page.locator('#predictions').scrollIntoViewIfNeeded();
  // Every section settled: no status line still says "Loading".
  await page.waitForFunction(() => ![...document.querySelectorAll('.status')].some((s) => s.textContent?.startsWith('Loading')), null, { timeout: 120_000 });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: out('venue'), fullPage: true });
  console.log(`wrote ${['sign-in', 'overview', 'venue'].map(out).join(', ')}`);
} finally {
  await browser.close();
}
