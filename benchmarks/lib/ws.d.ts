/**
 * The part of the `ws` client (v8) that tests and benchmarks use. `ws` is present in node_modules
 * without its type package; delete this file once `ws` and `@types/ws` are devDependencies.
 */
declare module 'ws' {
  import { EventEmitter } from 'node:events';

  interface ClientOptions {
    handshakeTimeout?: number;
    maxPayload?: number;
    perMessageDeflate?: boolean;
    headers?: Record<string, string>;
  }

  class WebSocket extends EventEmitter {
    static readonly CONNECTING: 0;
    static readonly OPEN: 1;
    static readonly CLOSING: 2;
    static readonly CLOSED: 3;
    constructor(address: string, options?: ClientOptions);
    readonly readyState: 0 | 1 | 2 | 3;
    readonly bufferedAmount: number;
    send(data: string | Buffer, cb?: (err?: Error) => void): void;
    close(code?: number, reason?: string): void;
    terminate(): void;
    ping(data?: string | Buffer): void;
    /** Stops reading from the socket (ws ≥ 8.3). */
    pause(): void;
    resume(): void;
    on(event: 'open', listener: () => void): this;
    on(event: 'message', listener: (data: Buffer, isBinary: boolean) => void): this;
    on(event: 'close', listener: (code: number, reason: Buffer) => void): this;
    on(event: 'error', listener: (err: Error) => void): this;
    on(event: 'ping' | 'pong', listener: (data: Buffer) => void): this;
    on(event: 'unexpected-response', listener: (req: unknown, res: { statusCode?: number }) => void): this;
    on(event: string, listener: (...args: unknown[]) => void): this;
  }

  export default WebSocket;
  export { WebSocket };
}
