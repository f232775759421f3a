import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { screenshot, startWebStack, type WebStack } from './support.js';

const DAY = 86_400_000;
const HOUR = 3_600_000;

let stack: WebStack;
let a: TestOperator;
let b: TestOperator;
let venue: { id: string; name: string };
let hallId: string;
let otherVenue: { id: string; name: string };

beforeAll(async () => {
  // Rotated keys' live connections are closed within WS_KEY_RECHECK_MS: 500 ms here, 5 s by default.
  stack = await startWebStack({ edge: { WS_KEY_RECHECK_MS: '500' } });
  [a, b] = await Promise.all([newOperator(stack.api, 'pro'), newOperator(stack.api, 'pro')]);
  venue = await newVenue(stack.api, a.key, { name: 'Harbour Hall', timezone: 'Europe/Lisbon' });
  const zone = await request(`${stack.api.url}/api/venues/${venue.id}/zones`, {
    key: a.key,
    json: { slug: 'hall', name: 'Main hall', type: 'area', capacity: 5 },
  });
  expect(zone.status, JSON.stringify(zone.body)).toBe(201);
  hallId = zone.body.id;
  const integration = await request(`${stack.api.url}/api/venues/${venue.id}/integrations`, {
    key: a.key,
    json: { connector_type: 'density', config: { api_token: 'density-token' } },
  });
  expect(integration.status, JSON.stringify(integration.body)).toBe(201);
  otherVenue = await newVenue(stack.api, b.key, { name: 'Someone else’s venue' });
});
afterAll(async () => {
  await stack?.close();
});

/** People entering the hall through a Density doorway counter, through the front door's POST /ingest. */
async function enterHall(people: number): Promise<void> {
  const res = await request(`${stack.fd.url}/ingest`, {
    key: a.key,
    json: {
      venue_id: venue.id,
      connector_type: 'density',
      events: Array.from({ length: people }, () => ({
        type: 'entry',
        timestamp: new Date(Date.now() - 1000).toISOString(),
        payload: { space_id: 'spc_hall', doorway_id: 'drw_north', direction: 1, zone: 'hall' },
      })),
    },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  expect(res.body.accepted, JSON.stringify(res.body)).toBe(people);
}

/** An init script for a page without a live stream: its WebSocket never connects. */
const NO_LIVE_STREAM = 'window.WebSocket = class { static OPEN = 1; readyState = 0; send() {} close() {} };';

async function signIn(key: string, init?: string): Promise<Page> {
  const page = await stack.browser.newPage();
  if (init) await page.addInitScript(init);
  await page.goto(`${stack.fd.url}/`);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  return page;
}

const text = (page: Page, selector: string) =>
  page
    .locator(selector)
    .first()
    .textContent({ timeout: 1000 })
    .catch(() => null);

describe('the dashboard page in Chromium, against the running stack', () => {
  it('is served by the front door at / (the API keeps its JSON answers)', async () => {
    const page = await fetch(`${stack.fd.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    const asset = /src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(asset).toBeDefined();
    const js = await fetch(`${stack.fd.url}${asset}`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(js.headers.get('cache-control')).toContain('immutable');
    for (const path of ['/assets/missing.js', '/api/nothing-here']) {
      const res = await fetch(`${stack.fd.url}${path}`);
      expect(res.status, path).toBe(404);
      expect(await res.json(), path).toMatchObject({ code: 'NOT_FOUND' });
    }
    const post = await fetch(`${stack.fd.url}/`, { method: 'POST', body: '{}' });
    expect(post.status).toBe(405);
    expect(await post.json()).toMatchObject({ code: 'METHOD_NOT_ALLOWED' });
  });

  it('a bad key: sign-in says why in words and keeps nothing', async () => {
    const page = await signIn(`vt_live_${'0'.repeat(40)}`);
    const alert = page.locator('form.sign-in [role=alert]');
    await alert.waitFor();
    expect(await alert.textContent()).toMatch(/^Sign-in failed: .+ \(UNAUTHORIZED\)$/);
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
    // Nothing of a signed-in page shows: no Sign out, no navigation.
    expect(await page.locator('#sign-out').isVisible()).toBe(false);
    expect(await page.locator('#nav').isVisible()).toBe(false);
    await page.screenshot({ path: screenshot('sign-in') });
    await page.close();
  });

  it('signs in, lists only the operator’s own venues, and shows connector health', async () => {
    const page = await signIn(a.key);
    await page.getByRole('link', { name: 'Harbour Hall' }).waitFor();
    expect(await page.locator('#portfolio').textContent()).not.toContain(otherVenue.name);
    await page.locator('#connectors td').filter({ hasText: 'density' }).waitFor();
    expect(await page.evaluate('Object.keys(sessionStorage)')).toHaveLength(1);
    expect(await page.evaluate('localStorage.length')).toBe(0);
    await page.screenshot({ path: screenshot('overview') });
    await page.close();
  });

  it('works from the keyboard alone, and every control has a name', async () => {
    const page = await stack.browser.newPage();
    await page.goto(`${stack.fd.url}/`);
    // The key field has the focus on arrival; Enter submits.
    await page.keyboard.type(a.key);
    await page.keyboard.press('Enter');
    const link = page.getByRole('link', { name: 'Harbour Hall' });
    await link.waitFor();
    await link.focus();
    await page.keyboard.press('Enter');
    await page.locator('#occupancy table').waitFor();
    expect(await page.locator('h1').count()).toBe(1);
    expect(await page.locator('section h2').allTextContents()).toEqual(
      expect.arrayContaining([
        'Live occupancy',
        'Alarms',
        'Telemetry',
        'Dwell time',
        'Visitor loyalty',
        'Expected occupancy by day and hour',
      ]),
    );
    const unnamed = await page
      .locator('button, select, input, a')
      .evaluateAll((els) =>
        els
          .filter(
            (e) =>
              !((e as unknown as { labels?: { length: number } }).labels?.length || e.getAttribute('aria-label') || e.textContent?.trim()),
          )
          .map((e) => e.outerHTML),
      );
    expect(unnamed).toEqual([]);
    // A picker changed with the keyboard reloads its chart.
    const asked = page.waitForRequest((r) => r.url().includes('/telemetry?') && r.url().includes('agg=MAX'));
    await page.locator('#telemetry select[name=agg]').focus();
    await page.keyboard.press('ArrowDown'); // AVG → MAX
    await asked;
    await page.close();
  });

  it('another operator’s venue, or an unknown one: ONE error in words, nothing of it is shown', async () => {
    const page = await signIn(a.key);
    await page.getByRole('link', { name: 'Harbour Hall' }).waitFor();
    for (const [id, code] of [
      [otherVenue.id, /\((FORBIDDEN|NOT_FOUND)\)$/],
      ['00000000-0000-4000-8000-000000000000', /\(NOT_FOUND\)$/],
      ['not-a-venue', /\(VALIDATION_ERROR\)$/],
    ] as const) {
      await page.evaluate(`location.hash = '#/venues/${id}'`);
      const error = page.locator('main [role=alert]');
      await error.first().waitFor();
      await page.waitForTimeout(300); // nothing else comes later
      expect(await error.count(), id).toBe(1);
      expect(await error.textContent()).toMatch(/^Could not load the venue: .+/);
      expect(await error.textContent()).toMatch(code);
      expect(await page.locator('main section').count()).toBe(0);
      expect(await page.locator('.venue-title').textContent()).toBe(id === 'not-a-venue' ? 'Venue' : 'Venue not available');
    }
    expect(await page.locator('main').textContent()).not.toContain(otherVenue.name);
    await page.close();
  });

  it('shows occupancy change live, raises an alarm over capacity, and acknowledges it, without reloading', async () => {
    const page = await signIn(a.key);
    await page.getByRole('link', { name: 'Harbour Hall' }).click();
    const hall = `#occupancy tr[data-zone="${hallId}"]`;
    await page.locator(hall).waitFor();
    await page.locator('#live-status[data-state=live]').waitFor();
    // Not counted yet: a dash, not a 0.
    expect(await text(page, `${hall} .people`)).toBe('—');
    expect(await text(page, `${hall} td.updated`)).toBe('not counted yet');
    expect(await page.locator('#occupancy .status').textContent()).toBe('Live: figures change as people come and go.');
    await page.evaluate('window.sameDocument = true');

    await enterHall(3);
    await expect.poll(() => text(page, `${hall} .people`), { timeout: 30_000 }).toBe('3');
    expect(await page.locator(`${hall} .pct`).textContent()).toBe('60\u00a0%');
    expect(await page.locator('#alarms').textContent()).toContain('No alarms for this venue.');

    await enterHall(3); // 6 people for 5 places
    await expect.poll(() => text(page, `${hall} .people`), { timeout: 30_000 }).toBe('6');
    const row = page.locator('#alarms tr[data-alarm]');
    await row.first().waitFor({ timeout: 30_000 });
    await expect.poll(() => row.first().getAttribute('data-status'), { timeout: 30_000 }).toBe('ACTIVE_UNACK');
    const alarmId = (await row.first().getAttribute('data-alarm'))!;
    const shown = (await row.first().textContent())!;
    // Human words, the event time of the figure that raised it and the row's creation time.
    expect(shown).toContain('Critical');
    expect(shown).toContain('Active, unacknowledged');
    expect(shown).toContain('Zone occupancy high');
    expect(shown).toMatch(/Raised (just now|\d+ min ago) · .+ · Created /);
    expect(shown).not.toMatch(/ACTIVE_UNACK|zone_occupancy_high/);
    // The alarm keeps the figures it was raised with; while it lasts the newest are under details.latest.
    await enterHall(1); // 7 people for 5 places: still CRITICAL
    await expect.poll(() => row.first().locator('.alarm-now').textContent(), { timeout: 30_000 }).toBe('now: 140\u00a0% (7 of 5)');
    expect(await row.first().locator('.alarm-message').textContent()).toContain('(6 of 5)');

    await row
      .first()
      .getByRole('button', { name: /^Acknowledge/ })
      .click();
    await expect.poll(() => row.first().getAttribute('data-status'), { timeout: 30_000 }).toBe('ACTIVE_ACK');
    expect(await row.first().locator('.alarm-status').textContent()).toBe('Active, acknowledged');
    const listed = await request(`${stack.api.url}/api/alarms?venue_id=${venue.id}`, { key: a.key });
    expect(listed.body.alarms.find((x: { id: string }) => x.id === alarmId)).toMatchObject({ status: 'ACTIVE_ACK', severity: 'CRITICAL' });
    // The other operator sees none of it.
    const theirs = await request(`${stack.api.url}/api/alarms`, { key: b.key });
    expect(theirs.body.alarms).toEqual([]);
    expect(await page.evaluate('window.sameDocument')).toBe(true);
    await page.close();
  });

  it('switches a chart’s range, interval and aggregation, and asks the API for exactly that', async () => {
    const page = await signIn(a.key);
    await page.getByRole('link', { name: 'Harbour Hall' }).click();
    const chart = page.locator('#telemetry');
    const caption = chart.getByTestId('chart-caption');
    await caption.filter({ hasText: 'last 24 hours' }).waitFor();

    const asked = page.waitForRequest((r) => r.url().includes('/telemetry?'));
    await chart.getByLabel('Range').selectOption('7d');
    const q = new URL((await asked).url()).searchParams;
    expect(Number(q.get('endTs')) - Number(q.get('startTs'))).toBe(7 * DAY);
    expect(q.get('interval')).toBe(String(HOUR));
    await caption.filter({ hasText: 'occupancy · AVG per 1 hour · last 7 days' }).waitFor();

    // A counter is summed by default, and its axes say their units and zone.
    const summed = page.waitForRequest((r) => r.url().includes('/telemetry?') && r.url().includes('agg=SUM'));
    await chart.getByLabel('Key').selectOption('entries');
    expect(new URL((await summed).url()).searchParams.get('keys')).toBe('entries');
    expect(await chart.getByLabel('Aggregation').inputValue()).toBe('SUM');
    // The six entries of the scenario above, stored by the sink, in the hourly buckets.
    await expect
      .poll(
        async () => {
          await chart.getByLabel('Aggregation').selectOption('MAX');
          await chart.getByLabel('Aggregation').selectOption('SUM');
          return caption.textContent();
        },
        { timeout: 30_000 },
      )
      .toMatch(/^entries · SUM per 1 hour · last 7 days · [1-9]\d* points?$/);
    expect(await page.locator('#telemetry canvas').count()).toBeGreaterThan(0);
    expect(await chart.getByTestId('chart-axes').textContent()).toBe(
      'Vertical axis: entries (people per 1 hour); horizontal: time in Europe/Lisbon.',
    );
    await page.locator('#predictions').scrollIntoViewIfNeeded();
    await page
      .locator('#predictions .status')
      .filter({ hasText: /^(No history yet.*|)$/ })
      .waitFor({ timeout: 60_000 });
    await page.evaluate('window.scrollTo(0, 0)');
    await page.screenshot({ path: screenshot('venue'), fullPage: true });

    // A zone's own occupancy history: key occupancy with the zone's id.
    const zoned = page.waitForRequest((r) => r.url().includes('/telemetry?') && r.url().includes(`zoneId=${hallId}`));
    await chart.getByLabel('Zone').selectOption(hallId);
    expect(new URL((await zoned).url()).searchParams.get('keys')).toBe('occupancy');
    expect(await chart.getByLabel('Key').inputValue()).toBe('occupancy');
    await caption.filter({ hasText: /^occupancy of Main hall · AVG per 1 hour · last 7 days/ }).waitFor();
    expect(await page.locator('#telemetry [role=alert]').count()).toBe(0);

    // A range the API refuses (too many points) is said in words, not a blank chart.
    await chart.getByLabel('Range').selectOption('28d');
    await chart.getByLabel('Interval').selectOption(String(60_000));
    const error = page.locator('#telemetry [role=alert]');
    await error.waitFor();
    expect(await error.textContent()).toMatch(/^Could not load telemetry: .+ \(VALIDATION_ERROR\)$/);
    await page.close();
  });

  it('asks for the week of predictions in one request, only once the heat map is on screen', async () => {
    const page = await signIn(a.key);
    await page.setViewportSize({ width: 1280, height: 400 }); // the heat map starts below the fold
    const week: string[] = [];
    let cells = 0;
    page.on('request', (r) => {
      if (r.url().includes('/predictions/occupancy/week')) week.push(r.url());
      else if (r.url().includes('/predictions/occupancy?')) cells++;
    });
    await page.getByRole('link', { name: 'Harbour Hall' }).click();
    await page.getByTestId('chart-caption').filter({ hasText: 'last 24 hours' }).waitFor();
    expect(week).toEqual([]); // below the fold: nothing asked yet
    await page.locator('#predictions').scrollIntoViewIfNeeded();
    await page
      .locator('#predictions .status')
      .filter({ hasText: /^No history yet/ })
      .waitFor({ timeout: 30_000 });
    expect(week).toHaveLength(1);
    expect(cells).toBe(0);
    expect(await page.locator('#predictions td[aria-label$="no history"]').count()).toBe(7 * 24);
    await page.close();
  });

  it('a lost live connection says so, reconnects with backoff, and catches up', async () => {
    const page = await signIn(a.key);
    await page.getByRole('link', { name: 'Harbour Hall' }).click();
    await page.locator('#live-status[data-state=live]').waitFor();
    const hall = `#occupancy tr[data-zone="${hallId}"] .people`;
    const before = Number(await text(page, hall));
    const restart = await stack.stopEdge();
    try {
      // One check of state and text together: after the edge's 1001 the page retries at once, so
      // the message may already have moved on by a second look.
      await page
        .locator('#live-status[data-state=retrying]', { hasText: /^Live updates lost \(.+\); reconnecting/ })
        .waitFor({ timeout: 15_000 });
      // The card no longer claims to be live.
      await page.locator('#occupancy .status', { hasText: /^Live updates paused, reconnecting…/ }).waitFor({ timeout: 15_000 });
      // People arrive while the page is disconnected: it refetches on reconnecting.
      await enterHall(1);
    } finally {
      await restart();
    }
    await page.locator('#live-status[data-state=live]').waitFor({ timeout: 45_000 });
    await expect.poll(() => text(page, hall), { timeout: 30_000 }).toBe(String(before + 1));
    // And live pushes flow again on the new connection.
    await enterHall(1);
    await expect.poll(() => text(page, hall), { timeout: 30_000 }).toBe(String(before + 2));
    await page.close();
  });

  it('a key refused later sends the person back to sign-in, from the API (401) or the live stream (4001)', async () => {
    const rotate = async (op: TestOperator) => {
      const rotated = await request(`${stack.api.url}/api/keys/rotate`, { key: op.key, method: 'POST' });
      expect(rotated.status, JSON.stringify(rotated.body)).toBe(200);
    };
    const signedInAs = async (op: TestOperator, live = true) => {
      const page = await signIn(op.key, live ? undefined : NO_LIVE_STREAM);
      await page.locator('#portfolio .onboarding').waitFor();
      if (live) await page.locator('#live-status[data-state=live]').waitFor();
      return page;
    };
    // The next API call after the rotation answers 401. No live stream on this page: the edge's
    // re-check of the key would otherwise race the call and may sign the person out first.
    const rest = await newOperator(stack.api, 'pro');
    const page = await signedInAs(rest, false);
    await rotate(rest);
    await page.evaluate(`location.hash = '#/venues/${venue.id}'`);
    const notice = page.locator('form.sign-in [role=alert]');
    await notice.waitFor({ timeout: 10_000 });
    expect(await notice.textContent()).toMatch(/^Your key was refused: .+ \(UNAUTHORIZED\)\. Sign in again\.$/);
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
    expect(await page.locator('#live-status').isHidden()).toBe(true);
    await page.close();

    // Idle on the page: the edge re-checks live connections' keys within seconds and closes with 4001.
    const idle = await newOperator(stack.api, 'pro');
    const idlePage = await signedInAs(idle);
    await rotate(idle);
    const idleNotice = idlePage.locator('form.sign-in [role=alert]');
    await idleNotice.waitFor({ timeout: 30_000 });
    expect(await idleNotice.textContent()).toMatch(/^Your key was refused by the live stream: .*UNAUTHORIZED.*Sign in again\.$/);
    expect(await idlePage.evaluate('sessionStorage.length')).toBe(0);
    await idlePage.close();
  });

  it('sign out forgets the key', async () => {
    const again = await signIn(a.key);
    await again.getByRole('button', { name: 'Sign out' }).click();
    await again.getByLabel('API key').waitFor();
    const notice = again.locator('form.sign-in .status');
    expect(await notice.textContent()).toMatch(/^Signed out/);
    expect(await notice.getAttribute('role')).toBe('status');
    expect(await again.evaluate('sessionStorage.length')).toBe(0);
    expect(await again.locator('#live-status').isHidden()).toBe(true);
    await again.reload();
    await again.getByLabel('API key').waitFor();
    await again.close();
  });
});
