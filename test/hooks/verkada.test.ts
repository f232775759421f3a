import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verkadaSignature } from '../../domain/ingest/receivers/verkada.js';
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

const SECRET = 'verkada-webhook-shared-secret';

async function verkadaVenue(): Promise<{ venueId: string; hookId: string }> {
  const venueId = (await newVenue(stack.api, op.key)).id;
  return {
    venueId,
    hookId: await newIntegration(stack.api, op.key, venueId, 'verkada', { org_id: 'org-1', api_key: 'vkd-key', webhook_secret: SECRET }),
  };
}

const nowS = () => Math.floor(Date.now() / 1000);

/** Verkada's documented sensor alert webhook, with recent times. */
function sensorAlert(opts: { reading?: string; value?: number; createdAt?: number; alertId?: string } = {}) {
  const createdAt = opts.createdAt ?? nowS() - 20;
  return {
    org_id: '3c85f39b-0d3d-4288-9c7e-cdec0b5b4ac5',
    webhook_type: 'sensor_alert',
    created_at: createdAt,
    webhook_id: 'bafdfe28-abcc-478c-a5cc-b465e293bc43',
    data: {
      alert_event_id: opts.alertId ?? 'e006ef1c-e039-43e0-88f5-093b17ccc2dc',
      start_time: createdAt - 1.154117,
      end_time: null,
      most_extreme_value: opts.value ?? 38.725012367437245,
      is_above_max_event: true,
      threshold: 35,
      reading: opts.reading ?? 'calibrated_temperature',
      device_id: 'e637120c-09bb-4601-a8bf-dcf54d46aece',
      device_name: 'Lobby Sensor',
      device_serial: 'JQ9E-R9CG-RF6X',
    },
  };
}

const signed = (raw: string, timestamp = nowS(), secret = SECRET) => ({
  'Verkada-Signature': `${timestamp}|${verkadaSignature(secret, raw, String(timestamp))}`,
});

describe('POST /hooks/{id}: Verkada', () => {
  it('stores a signed sensor alert as an environment event with its reading as the metric', async () => {
    const { venueId, hookId } = await verkadaVenue();
    const body = sensorAlert();
    const raw = JSON.stringify(body);
    const res = await deliver(stack.api, hookId, raw, signed(raw));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ accepted: 1, rejected: 0, ignored: 0 });
    const [e] = await waitForStored(stack.api, venueId, 1);
    expect(e!.event_type).toBe('environment');
    expect(e!.connector_type).toBe('verkada');
    expect(e!.ts_ms).toBe(body.created_at * 1000);
    expect(e!.metric_names).toEqual(['temperature']);
    expect(e!.metric_values[0]).toBeCloseTo(38.725, 3);
    expect(JSON.parse(e!.payload)).toMatchObject({ device_id: 'e637120c-09bb-4601-a8bf-dcf54d46aece', temperature: 38.725012367437245 });
  });

  it('refuses a stale or future timestamp (over 60 s), a wrong or missing signature with 401, stores nothing, and reports it', async () => {
    const { venueId, hookId } = await verkadaVenue();
    const raw = JSON.stringify(sensorAlert());
    const stale = await deliver(stack.api, hookId, raw, signed(raw, nowS() - 120));
    expect(stale.status).toBe(401);
    expect(stale.body).toEqual({ error: expect.stringMatching(/at most 60 s/), code: 'UNAUTHORIZED' });
    expect((await deliver(stack.api, hookId, raw, signed(raw, nowS() + 120))).status).toBe(401);
    const wrong = await deliver(stack.api, hookId, raw, signed(raw, nowS(), 'other-secret'));
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toContain('Verkada-Signature header does not match');
    expect((await deliver(stack.api, hookId, raw)).body.error).toContain('Verkada-Signature header is missing');
    expect((await deliver(stack.api, hookId, raw, { 'Verkada-Signature': 'garbage' })).body.error).toContain('malformed');
    const report = await stack.reports.waitFor(
      (r) => r.source?.integrationId === hookId && r.source.ok === false && /60 s/.test(r.source.error ?? ''),
    );
    expect(report).toMatchObject({ connectorType: 'verkada', source: { link: 'webhook', ok: false } });
    await expectNothingStored(stack.api, venueId);
  });

  it('stores a replayed delivery once (same webhook, new signature time)', async () => {
    const { venueId, hookId } = await verkadaVenue();
    const raw = JSON.stringify(sensorAlert());
    expect((await deliver(stack.api, hookId, raw, signed(raw))).body.accepted).toBe(1);
    expect((await deliver(stack.api, hookId, raw, signed(raw, nowS() - 5))).body.accepted).toBe(1);
    await waitForStored(stack.api, venueId, 1);
    // A later alert is a new event.
    const later = JSON.stringify(sensorAlert({ reading: 'humidity', value: 81, alertId: 'f1a2' }));
    expect((await deliver(stack.api, hookId, later, signed(later))).body.accepted).toBe(1);
    const stored = await waitForStored(stack.api, venueId, 2);
    expect(stored.flatMap((e) => e.metric_names).sort()).toEqual(['humidity', 'temperature']);
  });

  it('accepts and ignores webhook types and readings without telemetry', async () => {
    const { venueId, hookId } = await verkadaVenue();
    const notification = {
      org_id: '1455hjew-ghg5-4125-a1a7-954ea4e911fe',
      webhook_type: 'notification',
      created_at: nowS(),
      webhook_id: '2fd2826d-4645-47ac-b0e6-a4b2ae634480',
      data: { camera_id: 'cam-1', objects: '[]', notification_type: 'motion', image_url: null, created: nowS(), person_label: null },
    };
    for (const body of [notification, sensorAlert({ reading: 'motion' })]) {
      const raw = JSON.stringify(body);
      const res = await deliver(stack.api, hookId, raw, signed(raw));
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ accepted: 0, rejected: 0, ignored: 1 });
    }
    await expectNothingStored(stack.api, venueId);
  });

  it('answers 400 naming the field for a signed body that is not a Verkada webhook', async () => {
    const { hookId } = await verkadaVenue();
    const raw = JSON.stringify({ org_id: 'o', created_at: nowS(), data: {} });
    const res = await deliver(stack.api, hookId, raw, signed(raw));
    expect(res.status).toBe(400);
    expect(res.body.details).toEqual([{ field: 'webhook_type', message: 'required' }]);
  });
});
