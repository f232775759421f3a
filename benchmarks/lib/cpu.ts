import { cliArgs } from '../../lib/cli.js';
import { Pseudonyms } from '../../domain/ingest/pseudonyms.js';
import { PLAN_LIMITS } from '../../domain/tenants/plans.js';
import { randomMac, type BenchVenue } from './requests.js';
import { machine, percentile, round, writeResult } from './harness.js';

/**
 * What bench:api-cpu and bench:sink-cpu share: one operator on the Pro plan with a Meraki and a
 * Density venue (the connectors bench:ingest sends), and the timing of a per-request function,
 * stage by stage, on one thread.
 */
export const operatorId = '7d8f3c4e-9b1a-4f2e-8c3d-5a6b7c8d9e0f';
export const limits = PLAN_LIMITS.pro;
export const pseudonyms = new Pseudonyms('bench-cpu-pseudonym-secret-0123456789abcdef');
export const venues: BenchVenue[] = [
  { venueId: '2b1c0d9e-8f7a-4b6c-9d5e-4f3a2b1c0d9e', connector: 'meraki', pool: Array.from({ length: 2000 }, randomMac) },
  { venueId: '3c2d1e0f-9a8b-4c7d-8e6f-5a4b3c2d1e0f', connector: 'density', pool: [] },
];

/**
 * `--requests` (how many to time per connector), `--batch` (events each), `--new-devices`,
 * `--event-ids` (every event with an `event_id`, so its id is derived from it: the soak fleet's
 * requests), `--out`.
 */
export function cpuArgs(defaultOut: string): { requests: number; batch: number; newDevices: number; eventIds: boolean; out: string } {
  const { values } = cliArgs(
    `npm run bench:${defaultOut} --`,
    'The hot path of one process timed alone, in this process, without I/O: CPU per event (benchmarks/README.md).',
    {
      options: {
        requests: { type: 'string', default: '400' },
        batch: { type: 'string', default: '1000' },
        'new-devices': { type: 'string', default: '0.1' },
        'event-ids': { type: 'boolean', default: false },
        out: { type: 'string', default: defaultOut },
      },
    },
  );
  return {
    requests: Number(values.requests),
    batch: Number(values.batch),
    newDevices: Number(values['new-devices']),
    eventIds: values['event-ids']!,
    out: values.out!,
  };
}

/**
 * Runs `handle` over `inputs` (after a warm-up on the first 50: JIT and caches) and reports µs per
 * event per stage, the process's CPU per event (the garbage collector included) and each call's
 * p50 / p95 / p99 in ms.
 */
export function timeStages<I, S extends string>(
  stages: readonly S[],
  inputs: I[],
  eventsPerInput: number,
  handle: (input: I, i: number) => Record<S, number>,
) {
  for (let i = 0; i < Math.min(50, inputs.length); i++) handle(inputs[i]!, i);
  const perStage = Object.fromEntries(stages.map((s) => [s, [] as number[]])) as Record<S, number[]>;
  const totals: number[] = [];
  const cpu0 = process.cpuUsage();
  inputs.forEach((input, i) => {
    const ms = handle(input, i);
    for (const s of stages) perStage[s].push(ms[s]);
    totals.push(stages.reduce((a, s) => a + ms[s], 0));
  });
  const cpu = process.cpuUsage(cpu0);
  const events = inputs.length * eventsPerInput;
  const perEventUs = (ms: number[]) => round((ms.reduce((a, b) => a + b, 0) * 1000) / events, 2);
  const sorted = [...totals].sort((a, b) => a - b);
  return {
    events,
    totalUsPerEvent: perEventUs(totals),
    stagesUsPerEvent: Object.fromEntries(stages.map((s) => [s, perEventUs(perStage[s])])) as Record<S, number>,
    cpuUsPerEvent: round((cpu.user + cpu.system) / events, 2),
    callMs: { p50: round(percentile(sorted, 50), 2), p95: round(percentile(sorted, 95), 2), p99: round(percentile(sorted, 99), 2) },
  };
}

/** Prints one connector's line. */
export function report(name: string, r: ReturnType<typeof timeStages>, callName: string): void {
  const stages = Object.entries(r.stagesUsPerEvent)
    .map(([s, us]) => `${s} ${us}`)
    .join(', ');
  console.log(
    `${name}: ${r.totalUsPerEvent} µs/event (${stages}); process CPU ${r.cpuUsPerEvent} µs/event; a ${callName} p50 ${r.callMs.p50} / p99 ${r.callMs.p99} ms`,
  );
}

export function writeCpuResult(benchmark: string, out: string, settings: object, results: object): void {
  console.log(`written to ${writeResult(out, { benchmark, at: new Date().toISOString(), machine: machine(), settings, results })}`);
}
