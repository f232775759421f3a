import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from '../../../lib/logger.js';

/**
 * Requests Node's HTTP parser refuses before koa sees them (headers over 16 KB, a broken request
 * line, bad framing) get the same JSON envelope the front door gives (stack/nginx/frontdoor-errors.conf),
 * not Node's bare `400`/`431` without a body, so a client talking to the api directly can read them too.
 */
export function answerClientErrors(server: Server, log: Logger): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const [status, reason, body] =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? [
            431,
            'Request Header Fields Too Large',
            {
              error: 'request headers too large (at most 16 KB in all)',
              code: 'VALIDATION_ERROR',
              details: [{ field: '(headers)', message: 'the header block is too large' }],
            },
          ]
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [
              408,
              'Request Timeout',
              {
                error: 'the request did not arrive in time',
                code: 'VALIDATION_ERROR',
                details: [{ field: '(request)', message: 'timed out while reading the request' }],
              },
            ]
          : [
              400,
              'Bad Request',
              {
                error: 'malformed request: bad request line, headers or framing',
                code: 'VALIDATION_ERROR',
                details: [{ field: '(request)', message: 'rejected by the HTTP parser' }],
              },
            ];
    log.debug({ code: err.code, status }, 'request refused by the HTTP parser');
    const json = JSON.stringify(body);
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`,
    );
  });
}
