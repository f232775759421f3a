import { getTelemetry } from '../../domain/telemetry/telemetry.js';
import { JsonStream } from '../../lib/json-stream.js';

export type Series = Record<string, Array<{ ts: number; value: number }>>;

/** getTelemetry's answer as a document (a series without `fill` comes back as streamed JSON text). */
export async function telemetrySeries(...args: Parameters<typeof getTelemetry>): Promise<Series> {
  const answer = await getTelemetry(...args);
  return (answer instanceof JsonStream ? JSON.parse((await answer.textUpTo(Infinity))!) : answer) as Series;
}
