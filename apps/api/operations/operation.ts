import type { z } from 'zod';
import type { Logger } from '../../../lib/logger.js';
import type { Operator } from '../../../domain/tenants/operators.js';
import type { RateBucket } from '../../../domain/limits/rate-limit.js';
import type { UsageCounter } from '../../../postgres/queries/usage.js';
import type { ApiDeps } from '../deps.js';

/**
 * One operation of the API, declared once. The koa routes, the OpenAPI document and the MCP tools
 * are generated from these declarations (http/router.ts, http/openapi.ts, mcp/tools.ts); adding an
 * endpoint is one declaration plus its domain function (docs/contributing.md).
 */
export type Method = 'get' | 'post' | 'put' | 'delete';

/** `public`: no key, never limited; `admin`: X-Admin-Key; `bearer`: the operator's API key. */
export type Auth = 'public' | 'admin' | 'bearer';

/** OpenAPI tags, each with its description. */
export const TAGS = {
  System: 'Health, status and this document; public',
  Operators: 'Tenants and their keys, for the platform administrator (X-Admin-Key)',
  Keys: "The calling operator's own API keys",
  Usage: 'Monthly usage against the plan',
  Venues: 'Venues of the calling operator',
  Zones: 'Zones of a venue (area, entrance, exit, counter)',
  Integrations: 'Hardware connectors of a venue; secrets encrypted at rest and never shown',
  Ingest: 'Connector events in',
  Telemetry: 'Aggregated time series of a venue',
  Dashboard: "Summaries across all the operator's venues",
  Analytics: 'Derived from the event stream: live occupancy, dwell, visitor loyalty, occupancy predictions',
  Alarms: 'Alarms raised by the rules (zone occupancy against capacity, connector health), acknowledged and cleared by operators',
} as const;
export type Tag = keyof typeof TAGS;

/**
 * What an authenticated call counts against: the per-operator rate-limit bucket, and the monthly
 * quota counter (`none`: not counted as an API call, e.g. ingest, metered per event instead).
 */
export interface Metering {
  rate: RateBucket;
  quota: UsageCounter | 'none';
}

export const METERED_API_CALL: Metering = { rate: 'api', quota: 'api_calls' };

/** Error statuses an operation can answer besides those its kind implies (see http/openapi.ts). */
export type ErrorStatus = 400 | 401 | 403 | 404 | 405 | 409 | 413 | 415 | 429 | 500 | 503;

type Out<S> = S extends z.ZodType ? z.output<S> : undefined;

export interface OperationContext {
  deps: ApiDeps;
  log: Logger;
  /** Every operation of the API (the OpenAPI operation describes them all). */
  operations: readonly AnyOperation[];
}

export interface BearerContext extends OperationContext {
  operator: Operator;
  /** The key the caller presented (already verified). */
  apiKey: string;
}

export type ContextFor<A extends Auth> = A extends 'bearer' ? BearerContext : OperationContext;

/** A handler answers its success body; `Reply` picks another documented status (e.g. /health's 503) or adds headers. */
export class Reply<T> {
  constructor(
    readonly status: number,
    readonly body: T,
    readonly headers: Record<string, string> = {},
  ) {}
}

/** Marks a read operation as an MCP tool; the tool's arguments are the operation's params and query. */
export interface ToolSpec {
  /** Short snake_case name, e.g. `get_occupancy`. */
  name: string;
  /** Written for a model: what it answers, units, time zone. */
  description: string;
  /** Path or query parameters renamed for the tool, e.g. `{ id: 'venue_id' }`. */
  rename?: Record<string, string>;
}

export interface Operation<
  P extends z.ZodObject | undefined = z.ZodObject | undefined,
  Q extends z.ZodObject | undefined = z.ZodObject | undefined,
  B extends z.ZodType | undefined = z.ZodType | undefined,
  A extends Auth = Auth,
> {
  /** Unique, camelCase: the OpenAPI operationId. */
  id: string;
  method: Method;
  /** OpenAPI path syntax, e.g. `/api/venues/{id}`; the koa path is derived from it. */
  path: string;
  summary: string;
  tag: Tag;
  auth: A;
  /** Bearer operations only; default METERED_API_CALL. */
  metering?: Metering;
  /**
   * `expensive`: a ClickHouse scan whose cost grows with the range asked; it waits for a turn of
   * the operator's few concurrent expensive reads (domain/limits/query-gate.ts).
   */
  cost?: 'expensive';
  /**
   * Says from the parsed query when an expensive read is large (a long range at a fine resolution):
   * a large read runs at ClickHouse's lower priority, paused while any smaller api read runs.
   */
  large?: (query: Out<Q>) => boolean;
  /**
   * The most the answer can take, in bytes of JSON, from the parsed query: an MCP call whose answer
   * can outgrow the tool result cap is refused before anything is read.
   */
  answerBytes?: (query: Out<Q>) => number;
  params?: P;
  query?: Q;
  /** Request headers the operation reads (lower-case names), validated like the rest of the input. */
  headers?: z.ZodObject;
  body?: B;
  /** The body as documented, where it differs from what is parsed up front (ingest checks each event on its own). */
  bodyDoc?: z.ZodType;
  /** A top-level body key whose items the domain checks one by one (see middleware/body.ts). */
  checkedPerItem?: string;
  /** The success answer; `schema` documents its JSON (dates as ISO strings). */
  response: { status: 200 | 201 | 202; description: string; schema?: z.ZodType };
  /** Other success-like answers a handler may give with `Reply`, documented with their own schema. */
  otherResponses?: Record<number, { description: string; schema: z.ZodType }>;
  /** Error statuses beyond those implied by auth and input (401, 429, 400, 413, 500). */
  errors: readonly ErrorStatus[];
  tool?: ToolSpec;
  handler: (
    input: { params: Out<P>; query: Out<Q>; body: Out<B>; headers: Record<string, unknown>; bodyText?: string },
    ctx: ContextFor<A>,
  ) => Promise<unknown>;
}

/** Any declared operation, as the generators see it. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyOperation = Operation<any, any, any, Auth>;

/** Declares an operation with its handler's input typed from its schemas. */
export function operation<
  P extends z.ZodObject | undefined = undefined,
  Q extends z.ZodObject | undefined = undefined,
  B extends z.ZodType | undefined = undefined,
  A extends Auth = Auth,
>(op: Operation<P, Q, B, A>): AnyOperation {
  return op as AnyOperation;
}

export const meteringOf = (op: AnyOperation): Metering | undefined =>
  op.auth === 'bearer' ? (op.metering ?? METERED_API_CALL) : undefined;

/** `/api/venues/{id}` → `/api/venues/:id`. */
export const koaPath = (path: string): string => path.replace(/\{(\w+)\}/g, ':$1');
