import { Random } from '../random.js';
import { event, inWindow, type GeneratedEvent, type Generator } from './types.js';

/** MyWiFi captive portal: a guest who logs in is one `device_seen` (login method and consent, no personal data). */
export const mywifi: Generator = (w, venue, state) => {
  const out: GeneratedEvent[] = [];
  for (const plan of state.plansFor(venue, w.from, w.to)) {
    plan.visits.forEach((v, i) => {
      if (v.portalAt === null || !v.device || !inWindow(w, v.portalAt)) return;
      const rng = Random.for(state.seed, venue.key, plan.date, 'portal', i);
      out.push(
        event(v.portalAt, 'device_seen', {
          mac: v.device.mac.replace(/:/g, '-').toUpperCase(),
          ssid: venue.ssid,
          login_method: rng.weighted([
            ['email', 35],
            ['social', 25],
            ['click_through', 25],
            ['phone', 10],
            ['voucher', 5],
          ] as const),
          consent: rng.chance(0.8),
          zone: v.zone,
        }),
      );
    });
  }
  return out;
};
