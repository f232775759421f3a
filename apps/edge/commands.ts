import type { Config } from '../../lib/config.js';
import type { Logger } from '../../lib/logger.js';
import { AppError } from '../../lib/errors.js';
import type { Db } from '../../postgres/client.js';
import { ownedVenue } from '../../domain/venues/access.js';
import { parseMessage, type Command, type CommandError, type CommandErrorCode } from './protocol.js';
import { CHECK_TIMEOUT_MS, IDLE, enqueue, type Conn } from './connection.js';
import type { Subscriptions } from './subscriptions.js';
import { withTimeout } from '../../lib/timers.js';

/** Client messages waiting for their replies on one connection; more are refused, not queued. */
const MAX_PENDING_MESSAGES = 32;

/** The client's messages: parsed by protocol.ts, one handler per command, applied to the registry. */
export class Commands {
  constructor(
    private readonly cfg: Config,
    private readonly log: Logger,
    private readonly db: Db,
    private readonly registry: Subscriptions<Conn>,
  ) {}

  /** One frame from the client: checked at once, then handled after the connection's earlier messages. */
  receive(conn: Conn, message: ArrayBuffer, isBinary: boolean): void {
    if (conn.refusal || !conn.open) return;
    // The admission holds one slot of `pending` until `connected`: it is not one of the client's frames.
    if (!conn.welcomed && conn.pending <= MAX_PENDING_MESSAGES) {
      // Still being admitted: the frame (copied, as uWS reuses its memory) is received after `connected`.
      const copy = message.slice(0);
      conn.pending++;
      conn.queue = conn.queue.then(() => {
        conn.pending--;
        this.receive(conn, copy, isBinary);
        if (conn.pending === 0) conn.queue = IDLE;
      });
      return;
    }
    if (isBinary) return this.replyError(conn, null, 'VALIDATION_ERROR', 'send commands as JSON text frames');
    const max = this.cfg.WS_MAX_MESSAGE_BYTES;
    if (message.byteLength > max)
      return this.replyError(conn, null, 'VALIDATION_ERROR', `message of ${message.byteLength} bytes; at most ${max}`);
    if (conn.pending >= MAX_PENDING_MESSAGES) {
      return this.replyError(
        conn,
        null,
        'RATE_LIMITED',
        `more than ${MAX_PENDING_MESSAGES} messages waiting for replies; wait for them, then resend`,
      );
    }
    // The ArrayBuffer is only valid during this callback: decode (copy) it now.
    const text = Buffer.from(message).toString('utf8');
    enqueue(conn, () =>
      this.handleText(conn, text).catch((err: Error) => {
        this.log.error({ err }, 'a client command failed');
        this.replyError(conn, null, 'SERVICE_UNAVAILABLE', 'the command failed; retry');
      }),
    );
  }

  private async handleText(conn: Conn, text: string): Promise<void> {
    if (conn.refusal) return;
    const { commands, errors } = parseMessage(text);
    for (const e of errors) this.registry.send(conn, e);
    for (const cmd of commands) {
      if (!conn.open) return;
      await this.run(conn, cmd);
    }
  }

  private run(conn: Conn, cmd: Command): Promise<void> | void {
    switch (cmd.kind) {
      case 'subscribe':
        return this.subscribe(conn, cmd);
      case 'unsubscribe':
        return this.unsubscribe(conn, cmd);
      case 'unsubscribeVenue':
        return this.unsubscribeVenue(conn, cmd);
    }
  }

  private replyError(conn: Conn, cmdId: number | null, errorCode: CommandErrorCode, errorMsg: string): void {
    this.registry.send(conn, { cmdId, errorCode, errorMsg } satisfies CommandError);
  }

  /** `tsSubCmds` entry: the operator's own venue, within the per-connection limit. */
  private async subscribe(conn: Conn, cmd: Extract<Command, { kind: 'subscribe' }>): Promise<void> {
    if (this.registry.full(conn, cmd.cmdId)) {
      const max = this.cfg.WS_MAX_SUBSCRIPTIONS;
      return this.replyError(conn, cmd.cmdId, 'SUBSCRIPTION_LIMIT', `at most ${max} subscriptions per connection; unsubscribe one first`);
    }
    try {
      await withTimeout(ownedVenue(this.db, conn.operatorId, cmd.venueId), CHECK_TIMEOUT_MS);
    } catch (err) {
      if (err instanceof AppError && (err.code === 'NOT_FOUND' || err.code === 'FORBIDDEN')) {
        return this.replyError(conn, cmd.cmdId, err.code, err.code === 'NOT_FOUND' ? 'venue not found (absent or deleted)' : err.message);
      }
      this.log.warn({ err }, 'could not check a venue for a subscription');
      return this.replyError(conn, cmd.cmdId, 'SERVICE_UNAVAILABLE', 'could not check the venue right now; retry in a few seconds');
    }
    if (!conn.open) return;
    this.registry.add(conn, cmd.cmdId, cmd.venueId, cmd.keys);
    this.registry.send(conn, { cmdId: cmd.cmdId, type: 'subscribed', entityId: cmd.venueId, keys: cmd.keys });
  }

  /** `tsSubCmds` entry with `unsubscribe: true`: the subscription with that cmdId. */
  private unsubscribe(conn: Conn, cmd: Extract<Command, { kind: 'unsubscribe' }>): void {
    const sub = this.registry.get(conn, cmd.cmdId);
    if (!sub || (cmd.venueId !== null && sub.venueId !== cmd.venueId)) {
      return this.replyError(
        conn,
        cmd.cmdId,
        'NOT_FOUND',
        `no subscription with cmdId ${cmd.cmdId}${cmd.venueId ? ' for this venue' : ''} on this connection`,
      );
    }
    this.registry.remove(sub);
    this.registry.send(conn, { cmdId: cmd.cmdId, type: 'unsubscribed', entityId: sub.venueId, cmdIds: [sub.cmdId] });
  }

  /** `tsUnsubCmds` entry: every subscription to the venue. */
  private unsubscribeVenue(conn: Conn, cmd: Extract<Command, { kind: 'unsubscribeVenue' }>): void {
    const subs = this.registry.ofVenue(conn, cmd.venueId);
    if (subs.length === 0) return this.replyError(conn, cmd.cmdId, 'NOT_FOUND', 'no subscription to this venue on this connection');
    for (const sub of subs) this.registry.remove(sub);
    this.registry.send(conn, { cmdId: cmd.cmdId, type: 'unsubscribed', entityId: cmd.venueId, cmdIds: subs.map((s) => s.cmdId) });
  }
}
