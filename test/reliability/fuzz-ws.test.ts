import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TELEMETRY_KEYS } from '../../lib/events/vocabulary.js';
import { startApi, testConfig, type RunningApi } from '../support/env.js';
import { newOperator, newVenue, type TestOperator } from '../support/tenants.js';
import { Client, ingestDensity, startTestEdge, type Msg, type TestEdge } from '../edge/support.js';
import { checkProperty, junkNumber, junkString, junkValue, leaksOf, newVictim, type Victim } from './support.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 400);
/** The liveness probe's subscription: re-subscribing the same cmdId replaces it, so it never counts twice. */
const PROBE = 2_147_483_000;

let api: RunningApi;
let edge: TestEdge;
let me: TestOperator;
let victim: Victim;
let myVenueId: string;

beforeAll(async () => {
  api = await startApi(testConfig({ RATE_LIMITS_ENABLED: 'false' }));
  me = await newOperator(api, 'enterprise');
  victim = await newVictim(api);
  myVenueId = (await newVenue(api, me.key, { name: 'WS fuzz' })).id;
  edge = await startTestEdge();
});
afterAll(async () => {
  await edge?.close();
  await api.close();
});

const venueArb = fc.oneof(
  {
    weight: 3,
    arbitrary: fc
      .constantFrom('mine', 'victim', 'victimZone', 'victimAlarm')
      .map((w) => ({ mine: myVenueId, victim: victim.venueId, victimZone: victim.zoneId, victimAlarm: victim.alarmId })[w]!),
  },
  { weight: 1, arbitrary: fc.uuid() },
  { weight: 2, arbitrary: junkValue },
);
const cmdIdArb = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 1000 }) },
  { weight: 1, arbitrary: junkNumber },
  { weight: 1, arbitrary: junkValue },
);
const keysArb = fc.oneof(
  { weight: 3, arbitrary: fc.uniqueArray(fc.constantFrom(...TELEMETRY_KEYS), { minLength: 1 }) },
  { weight: 1, arbitrary: fc.array(fc.oneof(fc.constantFrom(...TELEMETRY_KEYS), junkString), { maxLength: 40 }) },
  { weight: 1, arbitrary: junkValue },
);
const entryArb = fc.oneof(
  { weight: 4, arbitrary: fc.record({ cmdId: cmdIdArb, entityId: venueArb, keys: keysArb }, { requiredKeys: [] }) },
  {
    weight: 1,
    arbitrary: fc.record(
      { cmdId: cmdIdArb, entityId: venueArb, unsubscribe: fc.oneof(fc.constant(true), junkValue) },
      { requiredKeys: [] },
    ),
  },
  { weight: 1, arbitrary: junkValue },
);
const commandArb = fc.record(
  {
    tsSubCmds: fc.oneof(fc.array(entryArb, { maxLength: 5 }), junkValue),
    tsUnsubCmds: fc.oneof(fc.array(fc.record({ cmdId: cmdIdArb, entityId: venueArb }, { requiredKeys: [] }), { maxLength: 3 }), junkValue),
  },
  { requiredKeys: [] },
);

/** Text frames: commands with junk inside, other JSON, non-JSON, many entries, and messages over the 32 KiB limit. */
const frameArb: fc.Arbitrary<string | Buffer> = fc.oneof(
  { weight: 6, arbitrary: commandArb.map((c) => JSON.stringify(c)) },
  {
    weight: 1,
    arbitrary: fc.record({ attrSubCmds: junkValue, tsSubCmds: fc.array(entryArb, { maxLength: 2 }) }).map((c) => JSON.stringify(c)),
  },
  { weight: 1, arbitrary: junkValue.map((v) => JSON.stringify(v) ?? 'undefined') },
  { weight: 1, arbitrary: junkString },
  {
    weight: 1,
    arbitrary: fc.constantFrom('{', '['.repeat(5_000), '{"tsSubCmds":' + '['.repeat(3_000), 'null', '', '\u0000', '{"tsSubCmds":[]}'),
  },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 101, max: 150 })
      .map((n) =>
        JSON.stringify({ tsSubCmds: Array.from({ length: n }, (_, i) => ({ cmdId: i, entityId: myVenueId, keys: ['occupancy'] })) }),
      ),
  },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 33, max: 100 })
      .map((kib) => JSON.stringify({ tsSubCmds: [{ cmdId: 1, entityId: 'x'.repeat(kib * 1024), keys: ['occupancy'] }] })),
  },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)) },
);

/** A reply is the ack of a command, an error in the protocol's form, or a push. */
function wellFormed(m: Msg): boolean {
  if (m.unparsable !== undefined) return false;
  if (m.errorCode !== undefined) {
    return (
      Object.keys(m).sort().join(',') === 'cmdId,errorCode,errorMsg' &&
      (m.cmdId === null || Number.isInteger(m.cmdId)) &&
      typeof m.errorCode === 'string' &&
      typeof m.errorMsg === 'string'
    );
  }
  if (m.data !== undefined) return Number.isInteger(m.cmdId) && m.data.venueId === myVenueId;
  return ['subscribed', 'unsubscribed'].includes(m.type) && (m.cmdId === null || Number.isInteger(m.cmdId));
}

describe('fuzzing /ws commands on a real edge', () => {
  it('answers every junk frame in the protocol’s form, keeps the connection (a frame above 4× the limit is dropped, as documented), and never subscribes to another operator’s venue', async () => {
    let client = await Client.connected(edge.url, me.key);
    let dropped = 0;
    await checkProperty(
      fc.asyncProperty(frameArb, async (frame) => {
        const from = client.messages.length;
        if (typeof frame === 'string') client.send(frame);
        else client.ws.send(frame, { binary: true });
        if (Buffer.byteLength(frame) > 4 * edge.cfg.WS_MAX_MESSAGE_BYTES) {
          // Documented: uWebSockets.js drops a connection sending a frame this large without reading it.
          expect((await client.waitClose(5_000)).code).toBe(1006);
          dropped++;
          client = await Client.connected(edge.url, me.key);
          return;
        }
        // The edge handles a connection's frames in order: once the probe is answered, so was the junk.
        const probe = await client
          .command({ tsSubCmds: [{ cmdId: PROBE, entityId: myVenueId, keys: ['occupancy'] }] }, PROBE)
          .catch((err: Error) => {
            const shown =
              typeof frame === 'string'
                ? `text ${JSON.stringify(frame.slice(0, 200))} (${frame.length} chars)`
                : `binary ${frame.toString('hex').slice(0, 100)}`;
            throw new Error(
              `no answer to the probe after ${shown}; closed ${JSON.stringify(client.closed)}; last ${JSON.stringify(client.messages.slice(-3)).slice(0, 600)} (${err.message.slice(0, 60)})`,
            );
          });
        expect(probe, JSON.stringify(probe)).toMatchObject({ cmdId: PROBE });
        expect(client.closed, 'connection closed').toBeNull();
        const replies = client.messages.slice(from);
        const sent = typeof frame === 'string' ? frame : '';
        for (const m of replies) {
          const text = JSON.stringify(m);
          expect(wellFormed(m), `malformed reply ${text.slice(0, 300)} to ${sent.slice(0, 300)}`).toBe(true);
          expect(leaksOf(victim, sent, text), text.slice(0, 300)).toEqual([]);
          if (m.type === 'subscribed') expect(m.entityId, text).toBe(myVenueId);
        }
      }),
      RUNS,
    );

    expect(dropped).toBeGreaterThan(0);
    // Pushes still flow for the caller's venue, and none of the other operator's events reach it.
    await ingestDensity(api, victim.op.key, victim.venueId, [{ type: 'entry', count: 5 }]);
    await ingestDensity(api, me.key, myVenueId, [{ type: 'entry', count: 2 }]);
    await client.next((m) => m.data?.venueId === myVenueId && m.cmdId === PROBE, 15_000);
    expect(client.pushes().filter((m) => m.data.venueId !== myVenueId)).toEqual([]);
    expect(client.messages.some((m) => JSON.stringify(m).includes(victim.venueName))).toBe(false);
    client.close();
  });
});
