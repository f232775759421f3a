/**
 * A few calls over the V8 inspector protocol to a process started with `--inspect=127.0.0.1:<port>`
 * (bench:ws passes it to the edge through NODE_OPTIONS): a full garbage collection followed by the
 * process's memory figures, and a heap snapshot written to a file (to see what a connection holds).
 */
import { createWriteStream } from 'node:fs';
import WebSocket from 'ws';
import { withTimeout } from '../../lib/timers.js';

async function session(
  port: number,
): Promise<{ call(method: string, params?: object): Promise<Record<string, unknown>>; ws: WebSocket; close(): void }> {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`, { signal: AbortSignal.timeout(5000) })).json()) as Array<{
    webSocketDebuggerUrl: string;
  }>;
  const ws = new WebSocket(targets[0]!.webSocketDebuggerUrl, { perMessageDeflate: false, maxPayload: 1 << 30, handshakeTimeout: 5000 });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  let id = 0;
  const waiting = new Map<number, (r: Record<string, unknown>) => void>();
  ws.on('message', (data: Buffer) => {
    const m = JSON.parse(data.toString('utf8')) as { id?: number; result?: Record<string, unknown>; error?: unknown };
    if (m.id !== undefined) waiting.get(m.id)?.(m.result ?? { error: m.error });
  });
  return {
    ws,
    call: (method, params = {}) =>
      new Promise((resolve) => {
        const n = ++id;
        waiting.set(n, resolve);
        ws.send(JSON.stringify({ id: n, method, params }));
      }),
    close: () => ws.close(),
  };
}

type Memory = { rss: number; heapUsed: number; heapTotal: number; external: number; arrayBuffers: number };

/** Runs a full GC in the process, then returns its `process.memoryUsage()`; rejects after 60 s. */
export function gcAndMemory(port: number): Promise<Memory> {
  return withTimeout(gcAndMemoryNow(port), 60_000, 'the inspector');
}

async function gcAndMemoryNow(port: number): Promise<Memory> {
  const s = await session(port);
  try {
    await s.call('HeapProfiler.enable');
    await s.call('HeapProfiler.collectGarbage');
    await s.call('HeapProfiler.collectGarbage');
    const r = (await s.call('Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true })) as {
      result: { value: string };
    };
    await s.call('HeapProfiler.disable');
    return JSON.parse(r.result.value);
  } finally {
    s.close();
  }
}

/** Writes a heap snapshot of the process to `file` (Chrome DevTools format). */
export async function heapSnapshot(port: number, file: string): Promise<void> {
  const s = await session(port);
  const out = createWriteStream(file);
  s.ws.on('message', (data: Buffer) => {
    const m = JSON.parse(data.toString('utf8')) as { method?: string; params?: { chunk: string } };
    if (m.method === 'HeapProfiler.addHeapSnapshotChunk') out.write(m.params!.chunk);
  });
  try {
    await s.call('HeapProfiler.enable');
    await s.call('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
    await s.call('HeapProfiler.disable');
  } finally {
    await new Promise<void>((resolve) => out.end(resolve));
    s.close();
  }
}
