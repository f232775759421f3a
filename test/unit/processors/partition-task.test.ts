import type { Cluster, Producer } from 'kafkajs';
import { AssignerProtocol } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../lib/logger.js';
import { coPartitioned } from '../../../pipeline/processors/assignor.js';
import { ChangelogLayout } from '../../../pipeline/processors/changelog.js';
import { MAX_HELD, PartitionTask } from '../../../pipeline/processors/partition-task.js';
import type { Effects, InputMessage, Processor } from '../../../pipeline/processors/processor.js';

const log = createLogger('test', 'silent');

/** A processor that counts its input values per key; `fail` makes the next batch throw. */
function counter(outputs = true): Processor<Map<string, number>> & { seen: InputMessage[]; fail?: boolean } {
  const seen: InputMessage[] = [];
  const p = {
    name: 'count',
    inputs: ['in.a', 'in.b'],
    commitIntervalMs: 1000,
    seen,
    fail: false as boolean | undefined,
    createState: () => new Map<string, number>(),
    restore: (s: Map<string, number>, key: string, value: Buffer | null) =>
      value === null ? s.delete(key) : s.set(key, Number(value.toString())),
    entry: (s: Map<string, number>, key: string) => (s.has(key) ? Buffer.from(String(s.get(key))) : null),
    size: (s: Map<string, number>) => s.size,
    async process(s: Map<string, number>, messages: InputMessage[]): Promise<Effects> {
      if (p.fail) throw new Error('processing failed');
      const effects: Effects = { outputs: [], changed: new Set() };
      for (const m of messages) {
        seen.push(m);
        const key = m.value!.toString();
        s.set(key, (s.get(key) ?? 0) + 1);
        effects.changed.add(key);
        if (outputs) effects.outputs.push({ topic: 'out', key, value: Buffer.from(String(s.get(key))) });
      }
      return effects;
    },
    async tick(s: Map<string, number>, ctx: { caughtUp: boolean }): Promise<Effects> {
      return ctx.caughtUp
        ? { outputs: [{ topic: 'out', key: 'tick', value: Buffer.from(String(s.size)) }], changed: new Set() }
        : { outputs: [], changed: new Set() };
    },
  };
  return p;
}

interface Sent {
  records: Array<{ topic: string; key: string; partition: number }>;
  offsets: Array<{ topic: string; partition: number; offset: string }>;
  group?: string;
  outcome?: 'committed' | 'aborted';
}

/** Stands in for kafkajs's transactional producer: records what each transaction sent and how it ended. */
function fakeProducer(opts: { failCommit?: () => boolean } = {}): { producer: Producer; txns: Sent[]; closed: () => boolean } {
  const txns: Sent[] = [];
  let closed = false;
  const producer = {
    async transaction() {
      const t: Sent = { records: [], offsets: [] };
      txns.push(t);
      return {
        async sendBatch({
          topicMessages,
        }: {
          topicMessages: Array<{ topic: string; messages: Array<{ key: string; partition: number }> }>;
        }) {
          for (const tm of topicMessages)
            for (const m of tm.messages) t.records.push({ topic: tm.topic, key: m.key, partition: m.partition });
        },
        async sendOffsets({
          consumerGroupId,
          topics,
        }: {
          consumerGroupId: string;
          topics: Array<{ topic: string; partitions: Array<{ partition: number; offset: string }> }>;
        }) {
          t.group = consumerGroupId;
          for (const tp of topics) for (const p of tp.partitions) t.offsets.push({ topic: tp.topic, ...p });
        },
        async commit() {
          if (opts.failCommit?.()) throw new Error('commit refused');
          t.outcome = 'committed';
        },
        async abort() {
          t.outcome = 'aborted';
        },
      };
    },
    async disconnect() {
      closed = true;
    },
  } as unknown as Producer;
  return { producer, txns, closed: () => closed };
}

function task(processor: Processor<Map<string, number>>, producer: Producer, committed: Record<string, bigint> = {}) {
  const counters = { transactions: 0, aborts: 0 };
  const t = new PartitionTask({
    processor,
    partition: 3,
    state: processor.createState(),
    layout: new ChangelogLayout(),
    producer,
    committed: new Map(Object.entries(committed)),
    group: 'g',
    changelog: 'g.changelog',
    counters,
    log,
  });
  return { t, counters };
}

const batch = (topic: string, from: number, values: string[], highWatermark = from + values.length) => ({
  topic,
  messages: values.map((v, i) => ({ offset: String(from + i), value: Buffer.from(v) })),
  lastOffset: String(from + values.length - 1),
  highWatermark: String(highWatermark),
});

describe('a partition task (no engines)', () => {
  it('holds what its batches produce and commits it with the changelog entries and the offsets read in one transaction', async () => {
    const processor = counter();
    const fake = fakeProducer();
    const { t, counters } = task(processor, fake.producer);
    await t.process(batch('in.a', 0, ['x', 'y']), 0);
    await t.process(batch('in.b', 0, ['x']), 0);
    expect(fake.txns).toHaveLength(0);
    expect(t.holding).toBe(true);
    await t.commit();
    expect(fake.txns).toHaveLength(1);
    const [txn] = fake.txns;
    expect(txn!.outcome).toBe('committed');
    expect(txn!.group).toBe('g');
    expect(txn!.records.filter((r) => r.topic === 'out').map((r) => r.key)).toEqual(['x', 'y', 'x']);
    expect(txn!.records.some((r) => r.topic === 'g.changelog')).toBe(true);
    expect(txn!.records.every((r) => r.partition === 3)).toBe(true);
    expect(txn!.offsets).toEqual([
      { topic: 'in.a', partition: 3, offset: '2' },
      { topic: 'in.b', partition: 3, offset: '1' },
    ]);
    expect(counters).toEqual({ transactions: 1, aborts: 0 });
    expect([...t.committedOffsets()]).toEqual([
      ['in.a', 2n],
      ['in.b', 1n],
    ]);
    expect(t.holding).toBe(false);
    await t.commit();
    expect(fake.txns).toHaveLength(1);
  });

  it('skips what its restored state already reflects', async () => {
    const processor = counter();
    const { t } = task(processor, fakeProducer().producer, { 'in.a': 5n, 'in.b': 0n });
    await t.process(batch('in.a', 3, ['a', 'b', 'c', 'd']), 0);
    expect(processor.seen.map((m) => m.offset)).toEqual(['5', '6']);
    expect(processor.seen.every((m) => m.partition === 3 && m.topic === 'in.a')).toBe(true);
  });

  it('commits at once when it holds MAX_HELD outputs and changed entries', async () => {
    const processor = counter();
    const fake = fakeProducer();
    const { t } = task(processor, fake.producer);
    const values = Array.from({ length: MAX_HELD / 2 }, (_, i) => `k${i}`);
    await t.process(batch('in.a', 0, values), 0);
    expect(fake.txns).toHaveLength(1);
    expect(fake.txns[0]!.offsets).toEqual([{ topic: 'in.a', partition: 3, offset: String(values.length) }]);
  });

  it('aborts a failed transaction, counts it, keeps its held work and its last commit, and throws', async () => {
    const processor = counter();
    let refuse = false;
    const fake = fakeProducer({ failCommit: () => refuse });
    const { t, counters } = task(processor, fake.producer);
    await t.process(batch('in.a', 0, ['x']), 0);
    await t.commit();
    await t.process(batch('in.a', 1, ['y']), 0);
    refuse = true;
    await expect(t.commit()).rejects.toThrow('commit refused');
    expect(fake.txns.map((x) => x.outcome)).toEqual(['committed', 'aborted']);
    expect(counters).toEqual({ transactions: 1, aborts: 1 });
    expect(t.committedOffsets().get('in.a')).toBe(1n);
    await t.close();
    expect(fake.closed()).toBe(true);
    expect(t.holding).toBe(false);
  });

  it('lets a failed batch throw without moving its position', async () => {
    const processor = counter();
    const { t } = task(processor, fakeProducer().producer);
    processor.fail = true;
    await expect(t.process(batch('in.a', 0, ['x']), 0)).rejects.toThrow('processing failed');
    processor.fail = false;
    await t.process(batch('in.a', 0, ['x']), 0);
    expect(processor.seen.map((m) => m.offset)).toEqual(['0']);
  });

  it('runs its timers as caught up only once every input was read to its end', async () => {
    const processor = counter(false);
    const fake = fakeProducer();
    const { t } = task(processor, fake.producer);
    await t.tick(0);
    expect(t.holding).toBe(false);
    await t.process(batch('in.a', 0, ['x'], 1), 0);
    t.setEnd('in.b', 4n);
    expect(t.caughtUp()).toBe(false);
    await t.tick(0);
    expect(t.holding).toBe(true);
    await t.commit();
    expect(fake.txns[0]!.records.filter((r) => r.topic === 'out')).toEqual([]);
    t.setEnd('in.b', 0n);
    expect(t.caughtUp()).toBe(true);
    await t.tick(0);
    await t.commit();
    expect(fake.txns[1]!.records.filter((r) => r.topic === 'out').map((r) => r.key)).toEqual(['tick']);
  });
});

describe('the co-partitioned assignor', () => {
  it('gives partition p of every input topic to the same member, round robin in member-id order', async () => {
    const cluster = { findTopicPartitionMetadata: () => [0, 1, 2, 3, 4].map((partitionId) => ({ partitionId })) } as unknown as Cluster;
    const assigner = coPartitioned({ cluster, groupId: 'g', logger: undefined as never });
    const members = ['m-b', 'm-a'].map((memberId) => ({ memberId, memberMetadata: Buffer.alloc(0) }));
    const out = await assigner.assign({ members, topics: ['in.a', 'in.b'] });
    const byMember = Object.fromEntries(
      out.map((a) => [a.memberId, AssignerProtocol.MemberAssignment.decode(a.memberAssignment)!.assignment]),
    );
    expect(byMember['m-a']).toEqual({ 'in.a': [0, 2, 4], 'in.b': [0, 2, 4] });
    expect(byMember['m-b']).toEqual({ 'in.a': [1, 3], 'in.b': [1, 3] });
  });
});
