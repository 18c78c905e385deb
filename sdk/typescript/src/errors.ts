/**
 * Every error this package raises, in one tree:
 *
 * ```text
 * HeraldError
 * ├── DecodeError            a message could not be decoded (kind + recovered id)
 * ├── ReplyError             the server answered a command with `error` (code, message)
 * ├── ConnectionLostError    the connection ended while a command was in flight
 * ├── ConnectError           the first connect() could not reach the server on any transport
 * ├── DisconnectedError      the server ended the connection with a "do not reconnect" code
 * ├── ClientClosedError      the client was closed (by close(), or for good)
 * └── RequestTimeoutError    no reply in time
 * ```
 *
 * Why a tree: an application catches {@link HeraldError} for "anything from
 * Herald", {@link ReplyError} for "the server said no" (its `code` is the
 * numbered code of docs/protocol.md §7.1, see {@link ErrorCode}), or one
 * class for one case. The same tree exists in the Python SDK.
 */

import { codeName } from "./codes.js";

/** Base class of every error raised by this package. */
export class HeraldError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The three decode failure kinds of docs/protocol.md §6. */
export type DecodeErrorKind = "malformed" | "invalid" | "unknown";

/** A message could not be decoded (docs/protocol.md §6): `kind`, and the
 * message's id if the decoder got that far (else 0). */
export class DecodeError extends HeraldError {
  readonly kind: DecodeErrorKind;
  readonly id: number;
  constructor(kind: DecodeErrorKind, message: string, id = 0) {
    super(`${kind}: ${message}`);
    this.kind = kind;
    this.id = id;
  }
}

/** The server answered a command with an `error` reply; `code` is one of
 * {@link ErrorCode} (§7.1). */
export class ReplyError extends HeraldError {
  readonly code: number;
  readonly serverMessage: string;
  constructor(code: number, message: string) {
    super(`${code}${codeName(code) ? ` ${codeName(code)}` : ""}: ${message}`);
    this.code = code;
    this.serverMessage = message;
  }
}

/** The connection ended while a command was in flight: it may or may not
 * have reached the server. The client is reconnecting (or closed). */
export class ConnectionLostError extends HeraldError {}

/** The first {@link Client.connect} could not reach the server on any transport. */
export class ConnectError extends HeraldError {}

/** The server ended the connection with a code that says "do not reconnect"
 * (3500–3999, 1002, 1007, 1009); the client is closed. */
export class DisconnectedError extends HeraldError {
  readonly code: number | null;
  readonly reason: string;
  constructor(code: number | null, reason: string) {
    super(`disconnected: ${code ?? ""} ${reason}`.trim());
    this.code = code;
    this.reason = reason;
  }
}

/** The client is closed: close() was called, or it stopped for good. */
export class ClientClosedError extends HeraldError {}

/** No reply arrived within the request timeout. */
export class RequestTimeoutError extends HeraldError {}
