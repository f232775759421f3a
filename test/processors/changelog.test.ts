import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inSends, MAX_BYTES_PER_SEND, topicOffsets } from '../../lib/kafka.js';
import { ChangelogLayout, SLOT_BYTES, SLOT_KEY_PREFIX, type ChangelogRecord } from '../../pipeline/processors/changelog.js';
import { openProcHarness, waitFor, type ProcHarness } from './harness.js';
import { createMissingTopics } from '../../lib/topology.js';

/*
 * The changelog layout against a real compacted topic: the entries a processor holds must come
 * back from the topic exactly (nothing lost, nothing deleted coming back), before and after the
 * broker compacts it, after the layout itself was restored, and from a changelog written one
 * record per entry (before slots).
 */

let h: ProcHarness;
let topic: string;
/** What the processor holds: the truth a restore must give back. */
const held = new Map<string, string>();
let slotRecords = 0;

let seed = 11;
const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
const pick = (n: number) => Math.floor(random() * n);

async function send(records: ChangelogRecord[]): Promise<void> {
  for (const batch of inSends([{ topic, messages: records.map((r) => ({ key: r.key, value: r.value, partition: 0 })) }])) {
    await h.producer.sendBatch({ acks: -1, topicMessages: batch });
  }
  slotRecords += records.filter((r) => r.key.startsWith(SLOT_KEY_PREFIX)).length;
}

interface Stored {
  key: string;
  value: Buffer | null;
}

/** The topic's records from its start to its end. */
async function readTopic(): Promise<Stored[]> {
  const out: Stored[] = [];
  const [end] = await topicOffsets(h.admin, topic);
  const high = Number(end!.high);
  const groupId = `changelog-read-${randomUUID()}`;
  const reader = h.kafka.consumer({ groupId, maxWaitTimeInMs: 100 });
  let done = high === 0;
  await reader.connect();
  await reader.subscribe({ topic, fromBeginning: true });
  await reader.run({
    eachMessage: async ({ message }) => {
      const offset = Number(message.offset);
      if (offset >= high) return;
      out.push({ key: message.key!.toString(), value: message.value });
      if (offset >= high - 1) done = true;
    },
  });
  await waitFor('the changelog read to its end', async () => done, 30_000);
  await reader.disconnect();
  await h.admin.deleteGroups([groupId]).catch(() => undefined);
  return out;
}

/** A new layout and state from records, as the runtime restores them. */
function restoreFrom(records: Stored[]): { layout: ChangelogLayout; state: Map<string, string> } {
  const layout = new ChangelogLayout();
  const state = new Map<string, string>();
  for (const r of records) layout.restore(r.key, r.value, (k, v) => (v ? state.set(k, v.toString()) : state.delete(k)));
  return { layout, state };
}

/**
 * What the broker's cleaner may leave once it has compacted the records before `upTo`: of those,
 * the last per key, deletions dropped (their retention passed); the rest as written.
 */
function compacted(records: Stored[], upTo: number): Stored[] {
  const last = new Map<string, number>();
  records.slice(0, upTo).forEach((r, i) => last.set(r.key, i));
  return records.filter((r, i) => i >= upTo || (last.get(r.key) === i && r.value !== null));
}

async function restore(): Promise<{ layout: ChangelogLayout; state: Map<string, string> }> {
  return restoreFrom(await readTopic());
}

/** The keys one transaction changes (in `held`): new and changed entries, deletions; now and then large values, so it spans several slots. */
function changes(round: number): string[] {
  const out: string[] = [];
  const large = round % 17 === 5;
  const n = large ? 150 : 1 + pick(40);
  for (let i = 0; i < n; i++) {
    const key = `k${pick(700)}`;
    const value = `${key}@${round}:${'x'.repeat(large ? 3000 : pick(200))}`;
    held.set(key, value);
    out.push(key);
  }
  const keys = [...held.keys()];
  for (let i = pick(8); i > 0 && keys.length > 0; i--) {
    const key = keys[pick(keys.length)]!;
    if (!held.delete(key)) continue;
    out.push(key);
  }
  return out;
}

async function rounds(layout: ChangelogLayout, from: number, to: number): Promise<void> {
  for (let round = from; round < to; round++) {
    await send(layout.write(changes(round), (key) => (held.has(key) ? Buffer.from(held.get(key)!) : null)));
  }
}

beforeAll(async () => {
  h = await openProcHarness();
  topic = `${h.prefix}.changelog-layout`;
  await createMissingTopics(h.admin, [{ topic, numPartitions: 1, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] }]);
  // The layout before slots: one record per entry, a deletion included.
  const legacy: ChangelogRecord[] = [];
  for (let i = 0; i < 50; i++) {
    held.set(`k${i}`, `legacy-${i}`);
    legacy.push({ key: `k${i}`, value: Buffer.from(`legacy-${i}`) });
  }
  held.delete('k3');
  legacy.push({ key: 'k3', value: null });
  await send(legacy);
});

afterAll(async () => {
  await h.close();
});

describe('the changelog layout', () => {
  it('gives back exactly the entries held, through slot turns, deletions, multi-slot writes and its own restore, before and after compaction', async () => {
    const upgraded = await restore();
    expect(upgraded.state).toEqual(held);

    // Writes go on from the restored layout: its first write moves the per-entry records into slots.
    await rounds(upgraded.layout, 0, 70);
    const midway = await restore();
    expect(midway.state).toEqual(held);
    // The ring (16 slots at this size) turned several times; the large writes took two slots.
    expect(slotRecords).toBeGreaterThan(4 * 16);

    // A layout restored from the topic goes on where the written one was.
    await rounds(midway.layout, 70, 140);
    expect((await restore()).state).toEqual(held);

    // Whatever part of the topic the broker has compacted (superseded slot records, the old per-entry
    // records and the deletions gone), a restore gives back the same.
    const records = await readTopic();
    for (let upTo = 0; upTo <= records.length; upTo += 7) {
      const { state } = restoreFrom(compacted(records, upTo));
      expect(state, `compacted up to record ${upTo} of ${records.length}`).toEqual(held);
    }
    // Fully compacted: one record per slot is left, the old per-entry records are gone.
    const whole = compacted(records, records.length);
    expect(whole.length).toBeLessThan(records.length / 4);
    expect(whole.every((r) => r.key.startsWith(SLOT_KEY_PREFIX))).toBe(true);
    expect(restoreFrom(whole).state).toEqual(held);
    expect(held.size).toBeGreaterThan(300);
  }, 120_000);

  it('keeps each record under its byte budget, and a small write small whatever the state held', () => {
    const layout = new ChangelogLayout();
    const value = Buffer.alloc(100, 1);
    const all = Array.from({ length: 20_000 }, (_, i) => `e${i}`);
    const first = layout.write(all, () => value);
    expect(first.length).toBeGreaterThan(5);
    expect(first.every((r) => r.key.startsWith(SLOT_KEY_PREFIX) && r.value!.length <= SLOT_BYTES)).toBe(true);
    // Through two turns of the ring: each one-entry write rewrites at most one slot's worth (what it carries), not the state.
    for (let i = 0; i < 400; i++) {
      const next = layout.write([`e${i}`], () => value);
      expect(next.length).toBeLessThanOrEqual(2);
      expect(next.reduce((n, r) => n + r.value!.length, 0)).toBeLessThanOrEqual(2 * SLOT_BYTES);
    }
  });

  it('is sent in requests under the default 1 MB a broker takes, in order', () => {
    const layout = new ChangelogLayout();
    const value = Buffer.alloc(1000, 1);
    const records = layout.write(
      Array.from({ length: 2000 }, (_, i) => `e${i}`),
      () => value,
    );
    const sends = inSends([{ topic: 'changelog', messages: records.map((r) => ({ key: r.key, value: r.value })) }]);
    expect(sends.length).toBeGreaterThan(2);
    for (const send of sends) {
      expect(send.flatMap((t) => t.messages).reduce((n, m) => n + (m.value as Buffer).length, 0)).toBeLessThanOrEqual(MAX_BYTES_PER_SEND);
    }
    expect(sends.flatMap((send) => send.flatMap((t) => t.messages.map((m) => m.key)))).toEqual(records.map((r) => r.key));
  });
});
