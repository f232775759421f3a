import { createRequire } from 'node:module';
import type { EachBatchHandler } from 'kafkajs';

interface ConsumerGroup {
  joinAndSync(): Promise<void>;
}
interface Runner {
  eachBatch: EachBatchHandler | null;
  consumerGroup: ConsumerGroup;
  start(): Promise<void>;
}

/** What a member must finish before it joins its group again. */
export type RejoinGate = () => Promise<void>;

/** Gates by the eachBatch handler they were registered for (a consumer's runner, remade after each crash, keeps its handler). */
const byHandler = new WeakMap<EachBatchHandler, RejoinGate>();
const byGroup = new WeakMap<ConsumerGroup, RejoinGate>();
let installed = false;

/**
 * Makes the consumer running `eachBatch` await `gate` each time before kafkajs 2.2.4 (it has no
 * later release) sends JoinGroup: at its start, after a rebalance or a lapsed session, after a
 * crash, after stale metadata. kafkajs itself waits only for the `eachBatch` calls in flight, so
 * work a handler carries on after its call returned (the events sink's write of a batch it held,
 * pipeline/sink/sink.ts) could otherwise overlap the writes of the member the partition goes to
 * next: the coordinator hands partitions over only once every member has joined again (or the
 * rebalance timeout passed). Register before `consumer.run`. Throws when kafkajs no longer has the
 * methods: the guarantee the gate gives must not be lost silently.
 */
export function gateRejoins(eachBatch: EachBatchHandler, gate: RejoinGate): void {
  install();
  byHandler.set(eachBatch, gate);
}

function install(): void {
  if (installed) return;
  const req = createRequire(import.meta.url);
  const Runner = req('kafkajs/src/consumer/runner.js') as { prototype: Runner };
  const ConsumerGroup = req('kafkajs/src/consumer/consumerGroup.js') as { prototype: ConsumerGroup };
  const { start } = Runner.prototype as Partial<Runner>;
  const { joinAndSync } = ConsumerGroup.prototype as Partial<ConsumerGroup>;
  if (typeof start !== 'function' || typeof joinAndSync !== 'function') {
    throw new Error(
      'kafkajs changed its consumer: a consumer can no longer be made to finish its work before it rejoins (lib/kafkajs-rejoin-gate.ts)',
    );
  }
  Runner.prototype.start = function (this: Runner) {
    const gate = this.eachBatch ? byHandler.get(this.eachBatch) : undefined;
    if (gate) byGroup.set(this.consumerGroup, gate);
    return start.call(this);
  };
  ConsumerGroup.prototype.joinAndSync = async function (this: ConsumerGroup) {
    await byGroup.get(this)?.();
    return joinAndSync.call(this);
  };
  installed = true;
}
