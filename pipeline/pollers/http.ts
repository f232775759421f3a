import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { isIP } from 'node:net';

/**
 * The pollers' HTTPS client. Every request opens its own TLS connection, verified before a byte
 * of the request (credentials included) is written:
 * - with a pinned certificate (`certificate_sha256`), the server's certificate must have exactly
 *   that SHA-256 fingerprint; CA chain and host name are then not checked (an on-premises
 *   controller's self-signed certificate is what gets pinned);
 * - without a pin, the usual CA and host name verification.
 * A request gives up after `timeoutMs` or when `signal` aborts; answers are read up to 16 MiB.
 */

export const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

/** A failure to reach the vendor or an answer it gave, in words a person can act on; never holds a credential. */
export class VendorError extends Error {
  override readonly name = 'VendorError';
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface HttpRequest {
  method: 'GET' | 'POST';
  url: URL;
  headers?: Record<string, string>;
  /** A JSON body (sent as application/json). */
  json?: unknown;
  /** Lower-case hex SHA-256 of the server's DER certificate, no colons. */
  pin?: string;
  /** CA certificates trusted instead of the system's when no pin is set (tests, private proxies with their own CA). */
  ca?: string | Buffer | Array<string | Buffer>;
  timeoutMs: number;
  signal?: AbortSignal;
}

export interface HttpResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** `https://host:port/path` without query string or credentials: what an error may name. */
export const describeUrl = (url: URL): string => `${url.protocol}//${url.host}${url.pathname}`;

export const normalisePin = (pin: string): string => pin.replace(/:/g, '').toLowerCase();

export async function httpsRequest(req: HttpRequest): Promise<HttpResponse> {
  const where = describeUrl(req.url);
  const timeout = AbortSignal.timeout(req.timeoutMs);
  const signal = req.signal ? AbortSignal.any([req.signal, timeout]) : timeout;
  const failure = (err: unknown): VendorError => {
    if (err instanceof VendorError) return err;
    if (timeout.aborted) return new VendorError(`${where} did not answer within ${Math.round(req.timeoutMs / 100) / 10} s`);
    if (signal.aborted) return new VendorError(`request to ${where} cancelled (poller stopping)`);
    const e = err as NodeJS.ErrnoException;
    return new VendorError(`could not reach ${where}: ${e.code ?? e.message}`);
  };
  if (signal.aborted) throw failure(signal.reason);
  let socket: TLSSocket | undefined;
  try {
    socket = await openTls(req, where, signal);
    return await exchange(req, socket, where, signal);
  } catch (err) {
    throw failure(err);
  } finally {
    socket?.destroy();
  }
}

function openTls(req: HttpRequest, where: string, signal: AbortSignal): Promise<TLSSocket> {
  const host = req.url.hostname.replace(/^\[|\]$/g, '');
  const port = Number(req.url.port || 443);
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({
      host,
      port,
      ...(isIP(host) ? {} : { servername: host }),
      rejectUnauthorized: req.pin === undefined,
      ...(req.pin === undefined && req.ca !== undefined ? { ca: req.ca } : {}),
      ALPNProtocols: ['http/1.1'],
    });
    const onAbort = () => socket.destroy(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    const settle = () => signal.removeEventListener('abort', onAbort);
    socket.once('error', (err: NodeJS.ErrnoException) => {
      settle();
      if (err.code && /CERT|SELF_SIGNED|UNABLE_TO|HOSTNAME|ERR_TLS/.test(err.code) && !signal.aborted) {
        reject(
          new VendorError(
            `the certificate of ${where} is not trusted (${err.code}): if the server uses a self-signed certificate, pin it with certificate_sha256`,
          ),
        );
      } else reject(err);
    });
    socket.once('secureConnect', () => {
      settle();
      if (req.pin !== undefined) {
        const presented = normalisePin(socket.getPeerCertificate().fingerprint256 ?? '');
        if (presented !== req.pin) {
          socket.destroy();
          reject(
            new VendorError(
              `the certificate of ${req.url.protocol}//${req.url.host} does not match the pinned certificate_sha256 (it presents ${presented || 'none'}): if the server's certificate was replaced, pin the new fingerprint`,
            ),
          );
          return;
        }
      }
      resolve(socket);
    });
  });
}

function exchange(req: HttpRequest, socket: TLSSocket, where: string, signal: AbortSignal): Promise<HttpResponse> {
  const body = req.json === undefined ? undefined : Buffer.from(JSON.stringify(req.json));
  const headers: Record<string, string> = { accept: 'application/json', ...req.headers };
  if (body) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(body.length);
  }
  return new Promise((resolve, reject) => {
    const r = httpRequest(
      {
        method: req.method,
        host: req.url.hostname,
        port: req.url.port || 443,
        path: req.url.pathname + req.url.search,
        headers: { host: req.url.host, ...headers },
        createConnection: () => socket,
        signal,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) {
            res.destroy();
            reject(new VendorError(`${where} answered more than ${MAX_RESPONSE_BYTES / 1024 / 1024} MiB`));
            return;
          }
          chunks.push(chunk);
        });
        res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
        res.once('error', reject);
        res.once('aborted', () => reject(new Error('connection closed mid-answer')));
      },
    );
    r.once('error', reject);
    r.end(body);
  });
}

/** The body as JSON, or a VendorError naming what answered something else. */
export function jsonOf<T = unknown>(res: HttpResponse, where: string): T {
  try {
    return JSON.parse(res.body) as T;
  } catch {
    throw new VendorError(`${where} answered ${res.status} with a body that is not JSON`, res.status);
  }
}

/** A short, single-line excerpt of a vendor's error text (never a request's content). */
export function vendorText(text: unknown, max = 120): string {
  return String(text ?? '')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, max);
}
