import { Random } from '../random.js';
import { event, inWindow, type GeneratedEvent, type Generator } from './types.js';
import { apMac, sightingsIn } from './wifi.js';

/**
 * Ubiquiti UniFi: only associated clients are visible (no passers-by). The first sighting of a visit
 * is the controller's `EVT_WU_Connected`, later ones are `stat/sta` polls (now and then a roam), and
 * the departure is a `device_left` with `EVT_WU_Disconnected`.
 */
export const unifi: Generator = (w, venue, state) => {
  const out: GeneratedEvent[] = [];
  for (const s of sightingsIn(w, venue, state, { passers: false, associatedOnly: true })) {
    const rng = Random.for(state.seed, venue.key, 'unifi', s.key, s.ts);
    const base = {
      mac: s.device.mac,
      ap_mac: apMac(state, venue, s.zone),
      essid: venue.ssid,
      rssi: Math.round(-90 + 50 * s.strength + rng.normal(0, 2)),
      is_guest: true,
      first_seen: Math.floor(s.arrive / 1000),
      last_seen: Math.floor(s.ts / 1000),
      ...(s.zone ? { zone: s.zone } : {}),
    };
    const key = s.first ? 'EVT_WU_Connected' : rng.chance(0.1) ? 'EVT_WU_Roam' : undefined;
    out.push(event(s.ts, 'device_seen', key ? { ...base, key } : base));
  }
  // Disconnects fall at the visit's end, which a window may hold without any sighting.
  for (const d of disconnectsIn(w, venue, state)) out.push(d);
  return out;
};

function disconnectsIn(w: Parameters<Generator>[0], venue: Parameters<Generator>[1], state: Parameters<Generator>[2]): GeneratedEvent[] {
  const out: GeneratedEvent[] = [];
  for (const plan of state.plansFor(venue, w.from, w.to)) {
    for (const v of plan.visits) {
      if (!v.device || !v.associated || !inWindow(w, v.leave)) continue;
      out.push(
        event(v.leave, 'device_left', {
          mac: v.device.mac,
          ap_mac: apMac(state, venue, v.zone),
          essid: venue.ssid,
          is_guest: true,
          first_seen: Math.floor(v.arrive / 1000),
          last_seen: Math.floor(v.leave / 1000),
          key: 'EVT_WU_Disconnected',
          zone: v.zone,
        }),
      );
    }
  }
  return out;
}
