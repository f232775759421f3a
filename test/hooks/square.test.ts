import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { squareSignature } from '../../domain/ingest/receivers/square.js';
import { request } from '../support/http.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { deliver, expectNothingStored, newIntegration, startHookStack, waitForStored, type HookStack } from './support.js';

let stack: HookStack;
let op: TestOperator;
beforeAll(async () => {
  stack = await startHookStack();
  op = await newOperator(stack.api, 'pro');
});
afterAll(async () => {
  await stack?.close();
});

const KEY = 'sq0whsig-test-signature-key';
const URL_ = 'https://venues.example.com/hooks/square-1';
const LOCATION = 'S8GWD5R9QB376';

async function squareVenue(): Promise<{ venueId: string; hookId: string }> {
  const venueId = (await newVenue(stack.api, op.key)).id;
  const hookId = await newIntegration(stack.api, op.key, venueId, 'square', {
    location_id: LOCATION,
    access_token: 'EAAA-square-token',
    webhook_signature_key: KEY,
    notification_url: URL_,
  });
  return { venueId, hookId };
}

/** Square's documented payment notification, with a recent time. */
function notification(opts: { type?: string; eventId?: string; status?: string; location?: string; createdAt?: string } = {}) {
  return {
    merchant_id: '6SSW7HV8K2ST5',
    type: opts.type ?? 'payment.updated',
    event_id: opts.eventId ?? randomUUID(),
    created_at: opts.createdAt ?? new Date(Date.now() - 30_000).toISOString(),
    data: {
      type: 'payment',
      id: 'hYy9pRFVxpDsO1FB05SunFWUe9JZY',
      object: {
        payment: {
          id: 'hYy9pRFVxpDsO1FB05SunFWUe9JZY',
          created_at: '2020-11-22T21:16:51.086Z',
          updated_at: '2020-11-22T21:19:00.831Z',
          amount_money: { amount: 1250, currency: 'EUR' },
          status: opts.status ?? 'COMPLETED',
          source_type: 'CARD',
          card_details: { status: 'CAPTURED', card: { card_brand: 'VISA', last_4: '1111', exp_month: 11, exp_year: 2030 } },
          location_id: opts.location ?? LOCATION,
          order_id: '03O3USaPaAaFnI6kkwB1JxGgBsUZY',
          customer_id: 'W92WH6P11H4Z77CTET0RNTGFW8',
          buyer_email_address: 'buyer@example.com',
          version: 2,
        },
      },
    },
  };
}

const signed = (raw: string, key = KEY, url = URL_) => ({ 'x-square-hmacsha256-signature': squareSignature(key, url, raw) });

describe('POST /hooks/{id}: Square', () => {
  it('stores a signed payment notification as a transaction at its time, customer pseudonymised, no card or e-mail', async () => {
    const { venueId, hookId } = await squareVenue();
    const body = notification({ createdAt: new Date(Date.now() - 60_000).toISOString() });
    const raw = JSON.stringify(body);
    const res = await deliver(stack.api, hookId, raw, signed(raw));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ accepted: 1, rejected: 0, ignored: 0 });
    const [e] = await waitForStored(stack.api, venueId, 1);
    expect(e!.event_type).toBe('transaction');
    expect(e!.connector_type).toBe('square');
    expect(e!.ts_ms).toBe(Date.parse(body.created_at));
    expect(e!.metric_names).toEqual(['amount']);
    expect(e!.metric_values).toEqual([1250]);
    const payload = JSON.parse(e!.payload);
    expect(payload).toMatchObject({
      event_id: body.event_id,
      event_type: 'payment.updated',
      payment_id: 'hYy9pRFVxpDsO1FB05SunFWUe9JZY',
      status: 'COMPLETED',
      location_id: LOCATION,
    });
    expect(payload.customer_id).toMatch(/^[0-9a-f]{32}$/);
    expect(e!.payload).not.toContain('buyer@example.com');
    expect(e!.payload).not.toContain('1111');
  });

  it('refuses a wrong, missing or other-URL signature with 401 and stores nothing; reports it', async () => {
    const { venueId, hookId } = await squareVenue();
    const raw = JSON.stringify(notification());
    const wrongKey = await deliver(stack.api, hookId, raw, signed(raw, 'another-key'));
    expect(wrongKey.status).toBe(401);
    expect(wrongKey.body).toEqual({ error: expect.stringContaining('x-square-hmacsha256-signature'), code: 'UNAUTHORIZED' });
    expect((await deliver(stack.api, hookId, raw, signed(raw, KEY, 'https://other.example.com/hook'))).status).toBe(401);
    expect((await deliver(stack.api, hookId, raw)).body.error).toContain('header is missing');
    // A body changed after signing.
    expect((await deliver(stack.api, hookId, raw.replace('1250', '9999'), signed(raw))).status).toBe(401);
    const report = await stack.reports.waitFor((r) => r.source?.integrationId === hookId && r.source.ok === false);
    expect(report.source!.error).toContain('x-square-hmacsha256-signature');
    expect(JSON.stringify(report)).not.toContain(KEY);
    await expectNothingStored(stack.api, venueId);
  });

  it('stores a re-delivered event_id once, in separate deliveries and through /ingest', async () => {
    const { venueId, hookId } = await squareVenue();
    const body = notification();
    const raw = JSON.stringify(body);
    expect((await deliver(stack.api, hookId, raw, signed(raw))).body.accepted).toBe(1);
    expect((await deliver(stack.api, hookId, raw, signed(raw))).body.accepted).toBe(1);
    // Square re-delivers with the same event_id (a later retry may be serialised anew).
    const again = JSON.stringify({ ...body, data: { ...body.data } });
    expect((await deliver(stack.api, hookId, again, signed(again))).status).toBe(200);
    // The same Square event sent by a connector of the operator's own to /ingest: the same canonical id.
    const payment = body.data.object.payment;
    const ingested = await request(`${stack.api.url}/ingest`, {
      key: op.key,
      json: {
        venue_id: venueId,
        connector_type: 'square',
        events: [
          {
            type: 'transaction',
            timestamp: body.created_at,
            event_id: body.event_id,
            payload: { event_id: body.event_id, payment_id: payment.id, amount_money: payment.amount_money, status: payment.status },
          },
        ],
      },
    });
    expect(ingested.body).toMatchObject({ accepted: 1 });
    await waitForStored(stack.api, venueId, 1);
    const other = JSON.stringify(notification({ status: 'APPROVED', type: 'payment.created' }));
    expect((await deliver(stack.api, hookId, other, signed(other))).status).toBe(200);
    await waitForStored(stack.api, venueId, 2);
  });

  it("accepts and ignores another location's payment and non-payment notifications", async () => {
    const { venueId, hookId } = await squareVenue();
    for (const body of [notification({ location: 'LOTHER123' }), notification({ type: 'refund.created' })]) {
      const raw = JSON.stringify(body);
      const res = await deliver(stack.api, hookId, raw, signed(raw));
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ accepted: 0, rejected: 0, ignored: 1 });
    }
    // The link works: health hears of it.
    await stack.reports.waitFor((r) => r.source?.integrationId === hookId && r.source.ok === true);
    await expectNothingStored(stack.api, venueId);
  });

  it('answers 400 naming the field for a signed body that is not a Square notification', async () => {
    const { hookId } = await squareVenue();
    const raw = JSON.stringify({ type: 'payment.updated', created_at: new Date().toISOString(), data: {} });
    const res = await deliver(stack.api, hookId, raw, signed(raw));
    expect(res.status).toBe(400);
    expect(res.body.details).toEqual([{ field: 'event_id', message: 'required' }]);
    const noPayment = JSON.stringify({ type: 'payment.updated', event_id: 'e1', data: { object: {} } });
    expect((await deliver(stack.api, hookId, noPayment, signed(noPayment))).body.details[0].field).toBe('data.object.payment');
  });
});
