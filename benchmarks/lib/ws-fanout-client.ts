/**
 * One fan-out client process of `bench:ws` (forked by benchmarks/ws.ts with structured-clone IPC).
 * It opens its share of the fan-out connections, spread over the given edges' URLs, each bound to one of the given loopback source
 * addresses (every source address has its own ephemeral port range, 32768–60999 here), subscribes
 * each to the venue, and records every push's arrival time on the machine-wide monotonic clock
 * (the parent stamps sends on the same clock). The push path does no JSON.parse: it finds the
 * sequence number (the event's `occupancy` metric) with a byte scan. At the end the parent sends
 * the send times and receives this process's latency samples, merged with the other processes'.
 */
import WebSocket from 'ws';

/** Milliseconds on CLOCK_MONOTONIC: the same clock in every process of the machine. */
export const monoMs = () => Number(process.hrtime.bigint()) / 1e6;

export type ToClient =
  | {
      type: 'open';
      /** The edges' /ws URLs (with the key): connection i goes to urls[i % urls.length]. */
      urls: string[];
      venueId: string;
      count: number;
      localAddresses: string[];
      concurrency: number;
      timeoutMs: number;
      expectedEvents: number;
    }
  | { type: 'count' }
  | { type: 'report'; sentAt: Array<[number, number]> }
  | { type: 'close' };

export type FromClient =
  | { type: 'opened'; held: number; failed: number; failures: Record<string, number>; retries: number; seconds: number }
  | { type: 'count'; received: number; closed: number }
  | {
      type: 'report';
      latencies: Float64Array;
      lastArrival: Array<[number, number]>;
      received: number;
      unmatched: number;
      closed: number;
      closeCodes: Record<string, number>;
      perConnectionMin: number;
      perConnectionMax: number;
    };

const NEEDLE = Buffer.from('"occupancy":');
const PUSH_PREFIX = Buffer.from('{"cmdId":1,"data":');

/** The integer after `"occupancy":` in a push, or -1. */
function seqOf(data: Buffer): number {
  const at = data.indexOf(NEEDLE);
  if (at < 0) return -1;
  let n = 0;
  let i = at + NEEDLE.length;
  let digits = 0;
  for (; i < data.length; i++, digits++) {
    const c = data[i]!;
    if (c < 48 || c > 57) break;
    n = n * 10 + (c - 48);
  }
  return digits > 0 ? n : -1;
}

const send = (m: FromClient) => process.send!(m);

if (process.send && process.argv[1]?.endsWith('ws-fanout-client.js')) {
  const sockets: WebSocket[] = [];
  /** Pushes received per connection (by open order), and the indices of the connections held. */
  const perConn: number[] = [];
  const heldIdx: number[] = [];
  // Arrivals as two parallel columns (sequence number, time), grown by doubling.
  let seqs = new Int32Array(1024);
  let times = new Float64Array(1024);
  let received = 0;
  let closed = 0;
  const closeCodes: Record<string, number> = {};

  const record = (seq: number, t: number) => {
    if (received === seqs.length) {
      const s = new Int32Array(seqs.length * 2);
      s.set(seqs);
      seqs = s;
      const tt = new Float64Array(times.length * 2);
      tt.set(times);
      times = tt;
    }
    seqs[received] = seq;
    times[received] = t;
    received++;
  };

  async function open(m: Extract<ToClient, { type: 'open' }>): Promise<void> {
    seqs = new Int32Array(Math.max(1024, m.count * m.expectedEvents));
    times = new Float64Array(seqs.length);
    const failures: Record<string, number> = {};
    let held = 0;
    let retries = 0;
    const started = monoMs();
    /** Opens and subscribes connection `i`: null when held, else why not. */
    const openOne = (i: number) =>
      new Promise<string | null>((resolve) => {
        const ws = new WebSocket(m.urls[i % m.urls.length]!, {
          perMessageDeflate: false,
          localAddress: m.localAddresses[i % m.localAddresses.length],
          handshakeTimeout: m.timeoutMs,
        });
        const index = perConn.length;
        perConn.push(0);
        let subscribed = false;
        let done = false;
        const timer = setTimeout(() => finish(false, 'no subscribed reply in time'), m.timeoutMs + 1000);
        const finish = (ok: boolean, why?: string) => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          if (ok) {
            held++;
            sockets.push(ws);
            heldIdx.push(index);
          } else ws.terminate();
          resolve(ok ? null : (why ?? 'unknown'));
        };
        ws.on('message', (data: Buffer) => {
          if (
            subscribed &&
            data.length > PUSH_PREFIX.length &&
            data.compare(PUSH_PREFIX, 0, PUSH_PREFIX.length, 0, PUSH_PREFIX.length) === 0
          ) {
            const t = monoMs();
            record(seqOf(data), t);
            perConn[index]!++;
            return;
          }
          const msg = JSON.parse(data.toString('utf8')) as { type?: string; errorCode?: string };
          if (msg.type === 'connected') ws.send(JSON.stringify({ tsSubCmds: [{ cmdId: 1, entityId: m.venueId, keys: ['occupancy'] }] }));
          else if (msg.type === 'subscribed') {
            subscribed = true;
            finish(true);
          } else finish(false, `refused: ${msg.errorCode ?? data.toString('utf8').slice(0, 80)}`);
        });
        ws.on('error', (err: NodeJS.ErrnoException) => finish(false, `error: ${err.code ?? err.message}`));
        ws.on('close', (code: number) => {
          if (done && subscribed) {
            closed++;
            closeCodes[code] = (closeCodes[code] ?? 0) + 1;
          }
          finish(false, `closed ${code}`);
        });
      });
    // As a client should (docs/websocket.md): a 4103 refusal (the key could not be checked in time) is retried after a backoff.
    const openWithRetries = async (i: number) => {
      for (let attempt = 1; ; attempt++) {
        const why = await openOne(i);
        if (why === null) return;
        if (why !== 'refused: SERVICE_UNAVAILABLE' || attempt === 5) {
          failures[why] = (failures[why] ?? 0) + 1;
          return;
        }
        retries++;
        await new Promise((r) => setTimeout(r, 1000 * attempt * (1 + Math.random())));
      }
    };
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(m.concurrency, m.count) }, async () => {
        while (next < m.count) await openWithRetries(next++);
      }),
    );
    send({ type: 'opened', held, failed: m.count - held, failures, retries, seconds: (monoMs() - started) / 1000 });
  }

  process.on('message', (m: ToClient) => {
    if (m.type === 'open') void open(m);
    else if (m.type === 'count') send({ type: 'count', received, closed });
    else if (m.type === 'report') {
      const sentAt = new Map(m.sentAt);
      const latencies = new Float64Array(received);
      const last = new Map<number, number>();
      let n = 0;
      let unmatched = 0;
      for (let i = 0; i < received; i++) {
        const t0 = sentAt.get(seqs[i]!);
        if (t0 === undefined) {
          unmatched++;
          continue;
        }
        latencies[n++] = times[i]! - t0;
        const prev = last.get(seqs[i]!);
        if (prev === undefined || times[i]! > prev) last.set(seqs[i]!, times[i]!);
      }
      let min = Infinity;
      let max = 0;
      for (const i of heldIdx) {
        min = Math.min(min, perConn[i]!);
        max = Math.max(max, perConn[i]!);
      }
      send({
        type: 'report',
        latencies: latencies.slice(0, n),
        lastArrival: [...last],
        received,
        unmatched,
        closed,
        closeCodes,
        perConnectionMin: heldIdx.length ? min : 0,
        perConnectionMax: max,
      });
    } else if (m.type === 'close') {
      for (const ws of sockets) ws.terminate();
      setTimeout(() => process.exit(0), 200);
    }
  });
  process.on('disconnect', () => process.exit(0));
}
