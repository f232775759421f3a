import type { Batch } from 'kafkajs';
import { describeError } from './dead-letter.js';
import type { Item } from './pending.js';
import type { SinkRow, SinkTarget } from './target.js';
import type { VenueContexts } from './venue-context.js';

/**
 * A fetched batch → one item per message element: its row, or its dead letter with the reason
 * (not of the topic's type, unknown venue, venue of another operator, a row that cannot be made).
 * The venues of the whole batch are looked up at once; a lookup failure throws (it is retried).
 */
export async function decodeBatch<R extends SinkRow>(target: SinkTarget<R>, contexts: VenueContexts, batch: Batch): Promise<Item<R>[]> {
  const what = target.name === 'events' ? 'event' : `${target.name} message`;
  const decoded = batch.messages.map((message) => {
    try {
      return { message, parts: target.decode(message.value) };
    } catch (err) {
      return { message, error: `undecodable ${what}: ${describeError(err)}` };
    }
  });
  const venueIds: string[] = [];
  for (const d of decoded) for (const p of d.parts ?? []) if ('venueId' in p) venueIds.push(p.venueId);
  const found = await contexts.resolve(venueIds);
  const items: Item<R>[] = [];
  for (const { message, parts, error } of decoded) {
    const at = { partition: batch.partition, offset: message.offset, done: false };
    if (!parts) {
      items.push({ ...at, index: 0, poison: { letter: message, error: error! } });
      continue;
    }
    for (let index = 0; index < parts.length; index++) {
      const part = parts[index]!;
      const item: Item<R> = { partition: batch.partition, offset: message.offset, done: false, index };
      let reason: string | undefined;
      if ('error' in part) reason = `undecodable ${what}: ${part.error}`;
      else {
        const ctx = found.get(part.venueId);
        if (!ctx) reason = `unknown venue ${part.venueId}`;
        else if (ctx.operatorId !== part.operatorId) reason = `venue ${part.venueId} belongs to another operator`;
        else {
          try {
            item.row = part.toRow({ topic: batch.topic, partition: batch.partition, offset: message.offset, index }, ctx);
          } catch (err) {
            // e.g. a time zone the runtime does not know
            reason = describeError(err);
          }
        }
      }
      if (reason !== undefined) {
        // An element of a message holding several is dead-lettered alone: a replay must not repeat the others.
        const value = parts.length === 1 ? message.value : Buffer.from(JSON.stringify(part.raw));
        item.poison = { letter: { key: message.key, value, headers: message.headers }, error: reason };
      }
      items.push(item);
    }
  }
  return items;
}
