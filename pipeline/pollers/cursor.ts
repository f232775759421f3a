/**
 * The cursor of a "latest state" feed (UniFi's stat/sta, ALE's presence): each poll answers every
 * current record with a time in epoch seconds, so the cursor is the newest second published plus
 * the ids published at that second. A record of the same second as the cursor but not yet
 * published (it arrived after the poll that set the cursor) is still taken; one at or before it
 * already published is not taken again.
 */
export interface SecondCursor {
  /** Newest record time published, epoch seconds. */
  at: number;
  /** Keyed ids (never raw MACs) of the records published at `at`. */
  ids: string[];
}

/** The records past the cursor, oldest first (ties by id), and the cursor once they are published. */
export function pastCursor<R extends { id: string; at: number }>(
  records: readonly R[],
  cursor: SecondCursor | undefined,
): { fresh: R[]; cursor: SecondCursor | undefined } {
  const atCursor = new Set(cursor?.ids ?? []);
  const fresh = records.filter((r) => !cursor || r.at > cursor.at || (r.at === cursor.at && !atCursor.has(r.id)));
  fresh.sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const last = fresh.at(-1);
  if (!last) return { fresh, cursor };
  const ids = [...new Set(fresh.filter((r) => r.at === last.at).map((r) => r.id))];
  // Records already published at that second stay in the set when the cursor did not move.
  const next = cursor && cursor.at === last.at ? [...new Set([...cursor.ids, ...ids])] : ids;
  return { fresh, cursor: { at: last.at, ids: next } };
}
