import { squareLocation, counterZone } from '../venues.js';
import { event, inWindow, type GeneratedEvent, type Generator } from './types.js';

/**
 * Square: a paying visitor's payment is a `payment.created` webhook (APPROVED) at the till and a
 * `payment.updated` a few seconds later (COMPLETED, or FAILED / CANCELED now and then). Each carries
 * Square's own `event_id`, so a re-delivery is recognised.
 */
export const square: Generator = (w, venue, state) => {
  const out: GeneratedEvent[] = [];
  const zone = counterZone(venue)?.slug;
  const location = squareLocation(venue);
  for (const plan of state.plansFor(venue, w.from, w.to)) {
    for (const v of plan.visits) {
      const p = v.purchase;
      if (!p) continue;
      const common = {
        payment_id: p.paymentId,
        amount_money: { amount: p.amount, currency: venue.currency },
        location_id: location,
        ...(v.customerId ? { customer_id: v.customerId } : {}),
        ...(zone ? { zone } : {}),
      };
      if (inWindow(w, p.at)) {
        out.push(event(p.at, 'transaction', { event_id: p.createdEventId, event_type: 'payment.created', status: 'APPROVED', ...common }));
      }
      if (inWindow(w, p.updatedAt)) {
        out.push(
          event(p.updatedAt, 'transaction', { event_id: p.updatedEventId, event_type: 'payment.updated', status: p.status, ...common }),
        );
      }
    }
  }
  return out;
};
