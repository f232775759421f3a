import type Router from '@koa/router';
import type { Context } from 'koa';
import { jsonSchema } from '../../../lib/json-schema.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  DEFAULT_NEGOTIATED_PROTOCOL_VERSION,
  ErrorCode as RpcError,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { countUsage } from '../../../domain/limits/quotas.js';
import type { RateLimiter } from '../../../domain/limits/rate-limit.js';
import { AppError } from '../../../lib/errors.js';
import type { ApiDeps } from '../deps.js';
import { bearerCaller } from '../middleware/bearer.js';
import { readJsonBody } from '../middleware/body.js';
import type { AnyOperation, BearerContext } from '../operations/operation.js';
import { ResultBudget, toolsFrom, type GeneratedTool } from './tools.js';

export const MCP_PATH = '/mcp';
const SERVER_INFO = { name: 'venue-telemetry', version: '1.0.0' };

/** A failure an agent can read and act on: the spec's code, the message, what to fix. */
function toolError(err: AppError): CallToolResult {
  const details = err.details === undefined ? '' : ` Details: ${JSON.stringify(err.details)}`;
  const retry = err.headers['Retry-After'] ? ` Retry after ${err.headers['Retry-After']} s.` : '';
  return { isError: true, content: [{ type: 'text', text: `${err.code}: ${err.message}.${details}${retry}` }] };
}

/** The MCP server of one request: the generated tools, called as the authenticated operator. */
function serverFor(tools: readonly GeneratedTool[], ctx: BearerContext): Server {
  const budget = new ResultBudget(ctx.deps.services.cfg.MCP_MAX_RESULT_BYTES);
  const server = new Server(SERVER_INFO, { capabilities: { tools: {} } });
  const listed = tools.map((t) => ({
    name: t.name,
    title: t.annotations.title,
    description: t.description,
    inputSchema: jsonSchema(t.inputSchema, 'input'),
    ...(t.outputSchema ? { outputSchema: jsonSchema(t.outputSchema, 'output') } : {}),
    annotations: t.annotations,
  }));
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: listed }));
  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const tool = tools.find((t) => t.name === request.params.name);
    if (!tool) throw new McpError(RpcError.InvalidParams, `unknown tool '${request.params.name.slice(0, 64)}'; tools/list names them`);
    try {
      // Each tool call is one MCP query of the monthly quota (Free: refused past it, as a tool error).
      await countUsage(ctx.deps.services.db, ctx.operator, 'mcp_queries');
      const text = await tool.call(request.params.arguments ?? {}, ctx, budget);
      return { content: [{ type: 'text', text }], structuredContent: JSON.parse(text) as Record<string, unknown> };
    } catch (err) {
      if (err instanceof AppError && err.status < 500) return toolError(err);
      ctx.log.error({ err, tool: tool.name }, 'mcp tool failed');
      return toolError(err instanceof AppError ? err : new AppError(500, 'INTERNAL_ERROR', 'unexpected error; retry after a short delay'));
    }
  });
  return server;
}

/**
 * `POST /mcp`: Streamable HTTP, stateless (a server and a transport per request, no session, so any
 * api instance answers). The same bearer key, rate limit (the `api` bucket) and body rules as REST
 * are checked before the SDK sees the request; GET and DELETE are 405 (no sessions to stream or end).
 * A JSON-RPC batch is answered only in the protocol version that has batches, each message counted.
 */
export function mountMcp(router: Router, deps: ApiDeps, operations: readonly AnyOperation[], limiter: RateLimiter | undefined): void {
  const tools = toolsFrom(operations);
  const { db } = deps.services;
  router.post(MCP_PATH, async (ctx: Context) => {
    const { operator, apiKey, count } = await bearerCaller(db, limiter, ctx, 'api', { transport: 'mcp' });
    // Lone surrogates under `params` (tool names, arguments) are left to the tool's own validation,
    // so an agent gets a tool error it can act on instead of an HTTP 400 its SDK cannot read.
    const body = await readJsonBody(ctx, { checkedPerItem: 'params' });
    const messages = Array.isArray(body) ? body.length : 1;
    if (Array.isArray(body)) {
      const version = protocolVersionOf(ctx, body);
      if (!BATCHING_VERSIONS.has(version)) {
        ctx.status = 400;
        ctx.body = rpcError(`JSON-RPC batches are not part of MCP protocol version ${version.slice(0, 32)}; send one message per request`);
        return;
      }
    }
    // Each message of a batch is a request of the rate limit, as if sent on its own.
    await count(messages);
    const server = serverFor(tools, { deps, log: ctx.state.log, operations, operator, apiKey });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    ctx.res.on('close', () => {
      void transport.close().catch(() => undefined);
      void server.close().catch(() => undefined);
    });
    await server.connect(transport);
    // Headers set so far (request id, rate limit) go out with the SDK's answer.
    for (const [name, value] of Object.entries(ctx.response.headers)) if (value !== undefined) ctx.res.setHeader(name, value as string);
    ctx.respond = false;
    await transport.handleRequest(ctx.req, ctx.res, body);
  });
}

/** Only 2025-03-26 has JSON-RPC batches: 2025-06-18 removed them, and 2024-11-05 had no Streamable HTTP. */
const BATCHING_VERSIONS = new Set(['2025-03-26']);

/**
 * The protocol version a request speaks: the `initialize` in it, else the MCP-Protocol-Version
 * header, else 2025-03-26, which the specification tells a server to assume without the header.
 */
function protocolVersionOf(ctx: Context, messages: unknown[]): string {
  for (const m of messages) {
    const msg = m as { method?: unknown; params?: { protocolVersion?: unknown } } | null;
    if (msg?.method === 'initialize' && typeof msg.params?.protocolVersion === 'string') return msg.params.protocolVersion;
  }
  return ctx.get('mcp-protocol-version') || DEFAULT_NEGOTIATED_PROTOCOL_VERSION;
}

const rpcError = (message: string) => ({ jsonrpc: '2.0', id: null, error: { code: RpcError.InvalidRequest, message } });
