import { z } from 'zod';
import { eventType, heartbeat, id, type ConnectorEvents } from './kit.js';

/**
 * Square payments (not a presence source): one `transaction` per `payment.created` /
 * `payment.updated` webhook, flattened. Square re-delivers webhooks, so `event_id` keys the
 * canonical event id: a re-delivery gets the same id. Only a COMPLETED payment carries the
 * `amount` metric (in the currency's minor units), so summing it never counts a payment twice.
 * `customer_id` is replaced by a keyed pseudonym.
 */
export const square: ConnectorEvents = {
  transaction: eventType(
    {
      event_id: id,
      event_type: z.enum(['payment.created', 'payment.updated']).optional(),
      payment_id: id,
      amount_money: z.object({
        amount: z.int().min(0),
        currency: z.string().regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as EUR'),
      }),
      status: z.enum(['APPROVED', 'PENDING', 'COMPLETED', 'CANCELED', 'FAILED']),
      location_id: id.optional(),
      customer_id: id.optional(),
    },
    (p) => ({
      metrics: p.status === 'COMPLETED' ? { amount: p.amount_money.amount } : {},
      vendorId: p.event_id,
      pseudonymise: ['customer_id'],
    }),
    {
      event_id: '6a8f5f28-54a1-4eb0-a98a-3111513fd4fc',
      event_type: 'payment.updated',
      payment_id: 'KkAkhdMsgzn59SM8A89WgKwekxLZY',
      amount_money: { amount: 1250, currency: 'EUR' },
      status: 'COMPLETED',
      location_id: 'L88917AVBK2S5',
      customer_id: 'W92WH6P11H4Z77CTET0RNTGFW8',
      zone: 'counter-1',
    },
  ),
  heartbeat: heartbeat(),
};
