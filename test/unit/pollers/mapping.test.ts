import { describe, expect, it } from 'vitest';
import { backoffMs, jittered } from '../../../lib/timers.js';
import { pastCursor } from '../../../pipeline/pollers/cursor.js';
import { mapUnifiClients } from '../../../pipeline/pollers/unifi.js';
import { mapVerkadaTrends } from '../../../pipeline/pollers/verkada.js';
import { mapAlePresence } from '../../../pipeline/pollers/aruba-ale.js';
import { describeUrl } from '../../../pipeline/pollers/http.js';
import { checkEvents } from '../../../domain/ingest/ingest.js';

/** The vendors' pure mapping and cursor functions, and that what they map is what ingest accepts. */
const idOf = (s: string) => `id(${s})`;
const NOW = Date.parse('2026-11-27T12:00:00Z');
const accepted = (connector: 'unifi' | 'verkada' | 'aruba', events: unknown[]) =>
  checkEvents(events, connector, NOW, { days: 365, plan: 'Business' });

describe('cursor of a latest-state feed', () => {
  it('takes records past the cursor, and records of the cursor second not yet published', () => {
    const r = (id: string, at: number) => ({ id, at });
    expect(pastCursor([r('b', 10), r('a', 10), r('c', 5)], undefined)).toEqual({
      fresh: [r('c', 5), r('a', 10), r('b', 10)],
      cursor: { at: 10, ids: ['a', 'b'] },
    });
    // c is older, a already published at 10; d is new at the cursor's very second.
    expect(pastCursor([r('a', 10), r('c', 9), r('d', 10)], { at: 10, ids: ['a', 'b'] })).toEqual({
      fresh: [r('d', 10)],
      cursor: { at: 10, ids: ['a', 'b', 'd'] },
    });
    expect(pastCursor([r('a', 10)], { at: 10, ids: ['a'] })).toEqual({ fresh: [], cursor: { at: 10, ids: ['a'] } });
    expect(pastCursor([r('a', 12)], { at: 10, ids: ['a'] })).toEqual({ fresh: [r('a', 12)], cursor: { at: 12, ids: ['a'] } });
  });
});

describe('UniFi stat/sta → device_seen', () => {
  it('maps clients to events ingest accepts, time = last_seen, no hostname, deterministic ids', () => {
    const t = Math.floor(NOW / 1000) - 60;
    const { events, cursor, skipped } = mapUnifiClients(
      [
        {
          mac: 'AA-BB-CC-00-11-22',
          ap_mac: 'f0:9f:c2:aa:bb:01',
          essid: 'Guest',
          rssi: 35,
          signal: -61,
          first_seen: t - 100,
          last_seen: t,
          is_guest: true,
          hostname: 'laptop',
        } as never,
        { mac: 'aabb.cc00.1133', last_seen: t - 5, rssi: -80 },
        { mac: 'garbage', last_seen: t },
        { mac: 'aa:bb:cc:00:11:44' },
        null as never,
      ],
      undefined,
      idOf,
    );
    expect(skipped).toBe(3);
    expect(events).toEqual([
      {
        type: 'device_seen',
        timestamp: new Date((t - 5) * 1000).toISOString(),
        event_id: `unifi:id(aa:bb:cc:00:11:33):${t - 5}`,
        payload: { mac: 'aa:bb:cc:00:11:33', last_seen: t - 5, rssi: -80 },
      },
      {
        type: 'device_seen',
        timestamp: new Date(t * 1000).toISOString(),
        event_id: `unifi:id(aa:bb:cc:00:11:22):${t}`,
        payload: {
          mac: 'aa:bb:cc:00:11:22',
          last_seen: t,
          ap_mac: 'f0:9f:c2:aa:bb:01',
          essid: 'Guest',
          rssi: -61,
          is_guest: true,
          first_seen: t - 100,
        },
      },
    ]);
    expect(cursor).toEqual({ at: t, ids: ['id(aa:bb:cc:00:11:22)'] });
    const checked = accepted('unifi', events);
    expect(checked.errors).toEqual([]);
    expect(checked.valid).toHaveLength(2);
  });
});

describe('Verkada trends → entry/exit', () => {
  it('takes complete buckets after the cursor with people in them; the cursor is the newest complete end', () => {
    const nowS = Math.floor(NOW / 1000);
    const cur = Math.floor(nowS / 900) * 900;
    const { events, until } = mapVerkadaTrends(
      'cam-1',
      {
        presets: [
          {
            preset_id: 'door',
            trend_in: [
              [cur - 2700, cur - 1800, 4],
              [cur - 1800, cur - 900, 0],
              [cur - 900, cur, 2],
              [cur, cur + 900, 5],
            ],
            trend_out: [[cur - 3600, cur - 2700, 9], 'x', [cur - 1800, cur - 900, 3]],
          },
        ],
      },
      cur - 2700,
      nowS,
    );
    const complete = cur <= nowS - 60;
    expect(events.map((e) => [e.type, e.payload.count, e.event_id])).toEqual([
      ['entry', 4, `verkada:cam-1:door:${cur - 2700}:in`],
      ['exit', 3, `verkada:cam-1:door:${cur - 1800}:out`],
      ...(complete ? [['entry', 2, `verkada:cam-1:door:${cur - 900}:in`]] : []),
    ]);
    expect(until).toBe(complete ? cur : cur - 900);
    expect(events[0]!.timestamp).toBe(new Date((cur - 2700) * 1000).toISOString());
    expect(accepted('verkada', events).errors).toEqual([]);
    // A preset id that could not stand in an event id is hashed there (the payload keeps it).
    const long = mapVerkadaTrends(
      'cam-3',
      { presets: [{ preset_id: 'Entrée principale '.repeat(3), trend_in: [[cur - 1800, cur - 900, 2]] }] },
      0,
      nowS,
    ).events;
    expect(long[0]!.event_id).toMatch(new RegExp(`^verkada:cam-3:h[0-9a-f]{16}:${cur - 1800}:in$`));
    expect(long[0]!.payload.line_id).toBe('Entrée principale '.repeat(3));
    expect(accepted('verkada', long).errors).toEqual([]);
    // Top-level trends (one line): preset "all".
    expect(mapVerkadaTrends('cam-2', { trend_out: [[cur - 1800, cur - 900, 1]] }, 0, nowS).events[0]!.event_id).toBe(
      `verkada:cam-2:all:${cur - 1800}:out`,
    );
  });
});

describe('Aruba ALE presence → device_seen', () => {
  it('reads ALE records ({msg, ts}, {addr} MACs) and flat ones; a station MAC or its hash, never both', () => {
    const ts = Math.floor(NOW / 1000) - 30;
    const { events, skipped } = mapAlePresence(
      [
        {
          msg: { sta_eth_mac: { addr: 'DA:A1:19:0B:7C:2E' }, associated: true, ap_name: 'AP-1', radio_mac: { addr: '00:24:6C:AA:BB:CC' } },
          ts,
        },
        { hashed_sta_eth_mac: 'AB'.repeat(20), associated: false, ts: ts + 1 },
        { msg: { sta_eth_mac: { addr: 'nope' } }, ts },
        { msg: { hashed_sta_eth_mac: 'ab'.repeat(20) } },
      ],
      undefined,
      idOf,
    );
    expect(skipped).toBe(2);
    expect(events.map((e) => e.payload)).toEqual([
      { sta_eth_mac: 'da:a1:19:0b:7c:2e', associated: true, ap_name: 'AP-1', radio_mac: '00:24:6c:aa:bb:cc' },
      { hashed_sta_eth_mac: 'ab'.repeat(20), associated: false },
    ]);
    expect(events[1]!.event_id).toBe(`aruba:id(hashed_sta_eth_mac:${'ab'.repeat(20)}):${ts + 1}`);
    expect(accepted('aruba', events).errors).toEqual([]);
  });
});

describe('timers and URLs', () => {
  it('backs off exponentially up to the cap, with jitter within ±10 %', () => {
    expect([0, 1, 2, 3, 4, 10, 100].map((f) => backoffMs(f, 1000, 300_000))).toEqual([0, 1000, 2000, 4000, 8000, 300_000, 300_000]);
    expect(jittered(1000, 0.1, () => 0)).toBe(900);
    expect(jittered(1000, 0.1, () => 1)).toBe(1100);
  });

  it('names a URL without query string or credentials', () => {
    expect(describeUrl(new URL('https://user:pw@ctrl.example:8443/api/s/x/stat/sta?token=abc'))).toBe(
      'https://ctrl.example:8443/api/s/x/stat/sta',
    );
  });
});

describe('which integrations are polled', () => {
  it('every UniFi and ALE integration unless its config says polling: false; Verkada only with cameras; never Aruba Central', async () => {
    const { unifiPoller } = await import('../../../pipeline/pollers/unifi.js');
    const { arubaAlePoller } = await import('../../../pipeline/pollers/aruba-ale.js');
    const { verkadaPoller } = await import('../../../pipeline/pollers/verkada.js');
    const { CONNECTORS } = await import('../../../domain/integrations/config-schemas.js');
    const unifi = CONNECTORS.unifi.config.parse({ controller_url: 'https://unifi.example', username: 'u', password: 'p' });
    expect(unifi.polling).toBe(true);
    expect(unifiPoller.polls(unifi)).toBe(true);
    expect(unifiPoller.polls({ ...unifi, polling: false })).toBe(false);
    expect(arubaAlePoller.polls({ mode: 'ale', base_url: 'https://ale.example', username: 'u', polling: true })).toBe(true);
    expect(arubaAlePoller.polls({ mode: 'ale', base_url: 'https://ale.example', username: 'u', polling: false })).toBe(false);
    expect(arubaAlePoller.polls({ mode: 'central', base_url: 'https://central.example' })).toBe(false);
    expect(verkadaPoller.polls({ org_id: 'o', camera_ids: ['cam-1'] })).toBe(true);
    expect(verkadaPoller.polls({ org_id: 'o' })).toBe(false);
  });
});
