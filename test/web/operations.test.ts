// The operations manager's views in Chromium against the real stack: the portfolio, the alarm list
// (filters, sort, bulk acknowledge), setup from the page (venue → zone → integration, secrets
// write-only, errors beside their fields), and every view at 390 and 1366 px without sideways scroll.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { screenshot, startWebStack, type WebStack } from './support.js';

let stack: WebStack;
let op: TestOperator;
let busy: { id: string; name: string };
let quiet: { id: string; name: string };
const zones: Record<string, string> = {};

const api = (path: string, opts: Parameters<typeof request>[1] = {}) => request(`${stack.api.url}${path}`, { key: op.key, ...opts });

/** A Density occupancy count for a zone of the busy venue, or (zone null) the whole venue. */
async function count(zone: string | null, occupancy: number): Promise<void> {
  const res = await request(`${stack.fd.url}/ingest`, {
    key: op.key,
    json: {
      venue_id: busy.id,
      connector_type: 'density',
      events: [
        {
          type: 'occupancy',
          timestamp: new Date(Date.now() - 1000).toISOString(),
          payload: { space_id: `spc_${zone ?? 'venue'}`, update_type: 'live', occupancy, ...(zone ? { zone } : {}) },
        },
      ],
    },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  expect(res.body.accepted, JSON.stringify(res.body)).toBe(1);
}

beforeAll(async () => {
  stack = await startWebStack();
  op = await newOperator(stack.api, 'pro');
  quiet = await newVenue(stack.api, op.key, { name: 'Quiet Café', timezone: 'America/New_York' });
  busy = await newVenue(stack.api, op.key, { name: 'Harbour Hall', timezone: 'Europe/Lisbon' });
  for (const [slug, name] of [
    ['hall', 'Main hall'],
    ['bar', 'Bar'],
    ['terrace', 'Terrace'],
  ]) {
    const z = await api(`/api/venues/${busy.id}/zones`, { json: { slug, name, type: 'area', capacity: 40 } });
    expect(z.status, JSON.stringify(z.body)).toBe(201);
    zones[slug!] = z.body.id;
  }
  const q = await api(`/api/venues/${quiet.id}/zones`, { json: { slug: 'room', name: 'Room', type: 'area', capacity: 10 } });
  expect(q.status).toBe(201);
  for (const [venue, json] of [
    [busy.id, { connector_type: 'density', config: { api_token: 'density-token' } }],
    [quiet.id, { connector_type: 'meraki', config: { api_key: 'meraki-key', org_id: '1234' } }],
  ] as const) {
    const i = await api(`/api/venues/${venue}/integrations`, { json });
    expect(i.status, JSON.stringify(i.body)).toBe(201);
  }
  // Three alarms of three severities in the busy venue: 41 of 40 (CRITICAL), 37 (MAJOR), 33 (WARNING).
  await Promise.all([count('hall', 41), count('bar', 37), count('terrace', 33), count(null, 60)]);
  let severities: string[] = [];
  for (const until = Date.now() + 30_000; Date.now() < until; await new Promise((r) => setTimeout(r, 250))) {
    severities = (await api('/api/alarms?status=ACTIVE_UNACK')).body.alarms.map((a: { severity: string }) => a.severity).sort();
    if (severities.length === 3) break;
  }
  expect(severities).toEqual(['CRITICAL', 'MAJOR', 'WARNING']);
});
afterAll(async () => {
  await stack?.close();
});

async function signIn(key: string, width = 1366, height = 768, init?: string, hook?: (page: Page) => void): Promise<Page> {
  const page = await stack.browser.newPage();
  hook?.(page);
  await page.setViewportSize({ width, height });
  if (init) await page.addInitScript(init);
  await page.goto(`${stack.fd.url}/`);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#nav a').first().waitFor();
  return page;
}

// Evaluated in the page (strings: the test's tsconfig has no DOM types).
/** Every section has its answer (none says "Loading…"), and the charts drawn with it have been laid out. */
const loaded = async (page: Page) => {
  await page.waitForFunction(`![...document.querySelectorAll('.status')].some((s) => s.textContent.startsWith('Loading'))`);
  await page.evaluate('new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))');
};
const noSidewaysScroll = (page: Page) =>
  page.evaluate('({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth })') as Promise<{
    scroll: number;
    inner: number;
  }>;

describe('the operations views in Chromium, against the running stack', () => {
  it('the portfolio: every venue with occupancy, alarms by severity and connector health, what needs attention first', async () => {
    const frames: string[] = [];
    const page = await signIn(op.key, 1366, 768, undefined, (p) =>
      p.on('websocket', (ws) => {
        ws.on('framereceived', (f) => void frames.push(`< ${String(f.payload).slice(0, 200)}`));
        ws.on('framesent', (f) => void frames.push(`> ${String(f.payload).slice(0, 200)}`));
      }),
    );
    const rows = page.locator('#portfolio tbody tr[data-venue]');
    await rows.nth(1).waitFor();
    expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-venue')))).toEqual([busy.id, quiet.id]);
    const first = rows.first();
    expect(await first.locator('[data-severity=CRITICAL]').textContent()).toBe('1 Critical');
    expect(await first.locator('[data-severity=MAJOR]').textContent()).toBe('1 Major');
    expect(await first.locator('[data-severity=WARNING]').textContent()).toBe('1 Warning');
    // The whole venue: 60 people of the three areas' 120 places.
    await expect.poll(() => first.locator('.occ').textContent(), { timeout: 15_000 }).toMatch(/^60 of 120.*50\u00a0%/);
    expect(await rows.nth(1).textContent()).toContain('Waiting for first data');
    expect(await rows.nth(1).locator('.alarm-counts').textContent()).toBe('none');
    // The operator's totals and event volume are shown.
    await page.locator('#stats .tile').first().waitFor();
    expect(await page.locator('#stats').textContent()).toContain('Active venues2');
    await page
      .getByTestId('events-caption')
      .filter({ hasText: /total [\d,]+ events/ })
      .waitFor();
    expect(await page.locator('#events canvas').count()).toBeGreaterThan(0);
    // Live: a new count moves the venue's figure without a reload.
    await page.locator('#live-status[data-state=live]').waitFor();
    await count(null, 90);
    try {
      await expect.poll(() => first.locator('.occ').textContent(), { timeout: 30_000 }).toMatch(/^90 of 120.*75\u00a0%/);
    } catch (err) {
      throw new Error(`${(err as Error).message}\nframes:\n${frames.join('\n')}`);
    }
    await page.screenshot({ path: screenshot('portfolio') });
    // The alarm counts lead to the alarm list of that venue.
    await first.getByRole('link', { name: /^Active alarms: 1 critical, 1 major, 1 warning$/ }).click();
    await page.locator('#alarm-list tbody tr[data-alarm]').nth(2).waitFor();
    await expect.poll(() => page.locator('#alarm-list').getByLabel('Venue').inputValue()).toBe(busy.id);
    await page.close();
  });

  it('the alarm list: active only by default, filters by severity and venue, sorts, and acknowledges in bulk', async () => {
    // No live stream on this page, so an alarm acknowledged elsewhere stays selected: its 409 is counted as done.
    const page = await signIn(op.key, 1366, 768, 'window.WebSocket = class { static OPEN = 1; readyState = 0; send() {} close() {} };');
    await page.evaluate('location.hash = "#/alarms"');
    const list = page.locator('#alarm-list');
    const rows = list.locator('tbody tr[data-alarm]');
    await rows.nth(2).waitFor();
    expect(await rows.count()).toBe(3);
    expect(await list.getByLabel('Active only').isChecked()).toBe(true);
    expect(await rows.first().textContent()).toContain('Zone occupancy high');
    expect(await rows.first().textContent()).toContain('Active, unacknowledged');
    expect(await rows.first().textContent()).toMatch(/Raised .+ · Created /);

    await list.getByLabel('Sort').selectOption('severity');
    expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-severity')))).toEqual(['CRITICAL', 'MAJOR', 'WARNING']);
    const filtered = page.waitForRequest((r) => r.url().includes('/api/alarms?') && r.url().includes('severity=CRITICAL'));
    await list.getByLabel('Severity').selectOption('CRITICAL');
    await filtered;
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.first().getAttribute('data-severity')).toBe('CRITICAL');
    await list.getByLabel('Severity').selectOption('');
    await list.getByLabel('Venue').selectOption(quiet.id);
    await list.getByText('No active alarms match these filters.').waitFor();
    await list.getByLabel('Venue').selectOption('');
    await expect.poll(() => rows.count()).toBe(3);

    // Select all; meanwhile someone else acknowledges the WARNING.
    await list.getByLabel('Select every unacknowledged alarm shown').check();
    const warning = (await rows.nth(2).getAttribute('data-alarm'))!;
    expect((await api(`/api/alarms/${warning}/ack`, { method: 'POST' })).status).toBe(200);
    await list.getByRole('button', { name: 'Acknowledge selected (3)' }).click();
    await list.getByTestId('bulk-summary').filter({ hasText: '2 acknowledged, 1 already was.' }).waitFor();
    const states = (await api('/api/alarms?status=ACTIVE_ACK')).body.alarms.map((a: { severity: string }) => a.severity).sort();
    expect(states).toEqual(['CRITICAL', 'MAJOR', 'WARNING']);
    await expect
      .poll(() => rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-status'))))
      .toEqual(['ACTIVE_ACK', 'ACTIVE_ACK', 'ACTIVE_ACK']);
    await page.close();
  });

  it('setup from the page: a first venue, a zone, an integration whose secret is then write-only, errors beside their fields', async () => {
    const fresh = await newOperator(stack.api, 'pro');
    const page = await signIn(fresh.key);
    await page.locator('#portfolio .onboarding').waitFor();
    await page.getByRole('link', { name: 'Create your first venue' }).click();
    const form = page.locator('#venue-form');
    await form.getByLabel('Name').fill('Dock Seven');
    await form.getByLabel('Time zone').fill('Mars/Olympus_Mons');
    await form.getByRole('button', { name: 'Create venue' }).click();
    const tzError = form.locator('[data-error-for=timezone]');
    await tzError.filter({ hasText: /.+/ }).waitFor();
    expect(await form.locator('[data-error-for=name]').textContent()).toBe('');
    expect(await form.getByLabel('Time zone').getAttribute('aria-invalid')).toBe('true');
    await form.getByLabel('Time zone').fill('Europe/Lisbon');
    await form.getByRole('button', { name: 'Create venue' }).click();
    await page.waitForURL(/#\/venues\/[0-9a-f-]{36}\/setup$/);
    const venueId = /venues\/([0-9a-f-]{36})/.exec(page.url())![1]!;
    await page.getByTestId('next-step').filter({ hasText: 'add a zone' }).waitFor();

    const zone = page.locator('#zone-form');
    await zone.getByLabel('Name').fill('Main hall');
    await zone.getByLabel('Slug').fill('Main Hall'); // not URL-safe: its error is beside the slug
    await zone.getByLabel('Capacity (people)').fill('40');
    await zone.getByRole('button', { name: 'Add zone' }).click();
    await page.locator('#zone-form [data-error-for=slug]').filter({ hasText: /.+/ }).waitFor();
    await page.locator('#zone-form').getByLabel('Slug').fill('main-hall');
    await page.locator('#zone-form').getByRole('button', { name: 'Add zone' }).click();
    await page.locator('#zones-card tbody tr').filter({ hasText: 'Main hall' }).waitFor();
    await page.getByTestId('next-step').filter({ hasText: 'connect an integration' }).waitFor();
    // Editing the zone: its capacity.
    await page.getByRole('button', { name: 'Edit Main hall' }).click();
    await page.locator('#zone-edit').getByLabel('Capacity (people)').fill('45');
    await page.locator('#zone-edit').getByRole('button', { name: 'Save zone' }).click();
    await page.locator('#zones-card tbody tr').filter({ hasText: '45' }).waitFor();

    const integ = page.locator('#integration-form');
    await integ.getByLabel('Connector').selectOption('density');
    await page.locator('#integration-form').getByLabel('API token').fill('density-secret-token');
    await page.locator('#integration-form').getByLabel('Space ids').fill('spc_1, spc_2');
    await page.locator('#integration-form').getByRole('button', { name: 'Connect' }).click();
    const row = page.locator('#integrations-card tbody tr').filter({ hasText: 'density' });
    await row.waitFor();
    expect(await row.locator('.secrets').textContent()).toBe('api_token: •••• set');
    expect(await page.locator('body').textContent()).not.toContain('density-secret-token');
    // Editing: the secret is "•••• set" with an empty replace field; saving keeps it.
    await row.getByRole('button', { name: 'Edit density' }).click();
    const edit = page.locator('#integration-edit');
    expect(await edit.locator('.set-marker').first().textContent()).toBe('•••• set');
    expect(await edit.getByLabel('Replace api token').inputValue()).toBe('');
    await edit.getByLabel('Space ids').fill('spc_1, spc_3');
    await edit.getByRole('button', { name: 'Save integration' }).click();
    await page.locator('#integrations-card .status').filter({ hasText: /^$/ }).first().waitFor();
    await page.locator('#integration-form').waitFor();
    const stored = await request(`${stack.api.url}/api/venues/${venueId}/integrations`, { key: fresh.key });
    expect(stored.body.data[0].config).toMatchObject({ api_token: '[REDACTED]', space_ids: ['spc_1', 'spc_3'] });
    expect(await page.getByTestId('next-step').isHidden()).toBe(true);

    // Thresholds: an inconsistent one is named beside its field.
    const rules = page.locator('#rules-form');
    await rules.getByLabel('Major from (%)').fill('50');
    await rules.getByRole('button', { name: 'Save thresholds' }).click();
    await rules.locator('[data-error-for="zone_occupancy.major_percent"]').filter({ hasText: /.+/ }).waitFor();
    await rules.getByLabel('Major from (%)').fill('92');
    await rules.getByRole('button', { name: 'Save thresholds' }).click();
    await rules
      .locator('.status')
      .filter({ hasText: /^Saved/ })
      .waitFor();
    expect(
      (await request(`${stack.api.url}/api/venues/${venueId}/alarm-rules`, { key: fresh.key })).body.zone_occupancy.major_percent,
    ).toBe(92);

    // The new venue is on the portfolio, with its integration waiting for first data.
    await page.evaluate('location.hash = "#/"');
    await page.locator(`#portfolio tr[data-venue="${venueId}"]`).filter({ hasText: 'Waiting for first data' }).waitFor();
    await page.screenshot({ path: screenshot('setup') });

    // Rotating the key from the page: the new key is shown once and the page goes on with it.
    await page.evaluate('location.hash = "#/setup"');
    page.once('dialog', (d) => void d.accept());
    const sockets: string[] = [];
    page.on('websocket', (ws) => void sockets.push(ws.url()));
    await page.getByRole('button', { name: 'Rotate the key' }).click();
    const shown = page.getByLabel('New API key');
    await shown.waitFor();
    const newKey = await shown.inputValue();
    expect(newKey).toMatch(/^vt_/);
    expect(newKey).not.toBe(fresh.key);
    expect(await page.evaluate('Object.values(sessionStorage)')).toContain(newKey);
    expect((await request(`${stack.api.url}/api/venues`, { key: fresh.key })).status).toBe(401);
    await page.evaluate('location.hash = "#/"');
    await page.locator(`#portfolio tr[data-venue="${venueId}"]`).waitFor();
    await page.locator('#live-status[data-state=live]').waitFor({ timeout: 15_000 });
    // The live stream was reopened with the new key (the old one's connection closed by the page, not by a 4001).
    expect(sockets.at(-1)).toContain(encodeURIComponent(newKey));
    expect(await page.locator('form.sign-in').count()).toBe(0);
    await page.close();
  });

  for (const [width, height] of [
    [390, 844],
    [1366, 768],
  ] as const) {
    it(`every view fits ${width} px without sideways scroll; alarm actions stay in their cell`, async () => {
      const page = await signIn(op.key, width, height);
      const views: Array<[string, string]> = [
        ['#/', '#portfolio tbody tr[data-venue]'],
        ['#/alarms', '#alarm-list .status:not(:empty)'],
        [`#/venues/${busy.id}`, '#alarms tbody tr[data-alarm]'],
        ['#/setup', '#setup-venues li'],
        [`#/venues/${busy.id}/setup`, '#zones-card tbody tr'],
      ];
      for (const [hash, ready] of views) {
        await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
        await page.locator(ready).first().waitFor();
        await loaded(page);
        const m = await noSidewaysScroll(page);
        expect(m.scroll, `${hash} at ${width} px`).toBeLessThanOrEqual(m.inner);
        // The portfolio and alarm tables fit their card: nothing to scroll to inside it either.
        const overflowing = await page.evaluate(
          `[...document.querySelectorAll('#portfolio .table-wrap, #alarm-list .table-wrap, #alarms .table-wrap')].filter((w) => w.scrollWidth > w.clientWidth + 1).length`,
        );
        expect(overflowing, `${hash} at ${width} px`).toBe(0);
        // Every control of every view has a name.
        const unnamed = await page.evaluate(
          `[...document.querySelectorAll('button, select, input, a')].filter((e) => !(e.labels?.length || e.getAttribute('aria-label') || e.textContent.trim())).map((e) => e.outerHTML)`,
        );
        expect(unnamed, hash).toEqual([]);
      }
      // The venue view: each alarm's buttons inside the table and the screen; "41 %"-style loads on one line.
      await page.evaluate(`location.hash = "#/venues/${busy.id}"`);
      await page.locator('#alarms tbody tr[data-alarm]').first().waitFor();
      await page.locator('#occupancy .pct').first().waitFor();
      const layout = (await page.evaluate(`(() => {
        const table = document.querySelector('#alarms table').getBoundingClientRect();
        const buttons = [...document.querySelectorAll('#alarms td.actions-cell button')].map((b) => b.getBoundingClientRect());
        const cells = [...document.querySelectorAll('#alarms td.actions-cell')].map((c) => c.getBoundingClientRect());
        const pct = [...document.querySelectorAll('#occupancy .pct')].map((p) => p.getClientRects().length);
        return {
          inTable: buttons.every((b) => b.left >= table.left - 1 && b.right <= table.right + 1 && b.right <= window.innerWidth),
          inCells: buttons.every((b) => cells.some((c) => b.left >= c.left - 1 && b.right <= c.right + 1 && b.top >= c.top - 1 && b.bottom <= c.bottom + 1)),
          buttons: buttons.length,
          pctOneLine: pct.every((n) => n === 1),
        };
      })()`)) as { buttons: number };
      expect(layout.buttons).toBeGreaterThan(0);
      expect(layout).toMatchObject({ inTable: true, inCells: true, pctOneLine: true });
      // The heat map at this width: every cell at least 1.6 rem wide (numbers never overlap).
      await page.locator('#predictions').scrollIntoViewIfNeeded();
      await page
        .locator('#predictions .status')
        .filter({ hasText: /^(No history yet.*|)$/ })
        .waitFor({ timeout: 60_000 });
      const narrowest = await page
        .locator('#predictions tbody td')
        .evaluateAll((tds) => Math.min(...tds.map((td) => td.getBoundingClientRect().width)));
      expect(narrowest).toBeGreaterThanOrEqual(width < 640 ? 30 : 20);
      const m = await noSidewaysScroll(page);
      expect(m.scroll).toBeLessThanOrEqual(m.inner);
      // Times are the venue's unless the person picks the browser's zone.
      expect(await page.locator('.venue-sub').textContent()).toContain('times venue-local (Europe/Lisbon)');
      if (width > 1000) {
        await page.getByLabel('Show times in').selectOption('browser');
        await page.locator('.venue-sub', { hasText: "times in this browser's zone" }).waitFor();
        await page.getByLabel('Show times in').selectOption('venue');
        await page.locator('.venue-sub', { hasText: 'times venue-local (Europe/Lisbon)' }).waitFor();
      }
      await page.evaluate('window.scrollTo(0, 0)');
      await page.screenshot({ path: screenshot(`venue-${width}`), fullPage: true });
      await page.close();
    });
  }
});
