/**
 * Numbered error and disconnect codes, mirrored from docs/protocol.md §7.
 *
 * Why a module of its own: the numbers belong to the protocol, written down
 * once in the protocol doc and mirrored here (and in every other Herald SDK)
 * so that the reconnect rule — which codes mean "reconnect", which mean
 * "don't" — lives in exactly one place: {@link shouldReconnect}.
 */

/** Codes of `error` replies (§7.1): the command failed, the connection stays. */
export const ErrorCode = {
  /** The server failed; the command may be retried. */
  Internal: 100,
  /** Not authenticated: send `connect` first, or a valid token. */
  Unauthorized: 101,
  /** The command is not known. */
  UnknownCommand: 102,
  /** The command is malformed (bad JSON, missing field, truncated binary). */
  BadRequest: 103,
  /** No permission for this channel or command. */
  PermissionDenied: 104,
  /** Already subscribed to this channel. */
  AlreadySubscribed: 105,
  /** Not subscribed to this channel. */
  NotSubscribed: 106,
  /** A configured limit was hit (subscriptions per connection, ...). */
  LimitExceeded: 107,
  /** The per-connection rate limit was hit. */
  TooManyRequests: 108,
  /** Empty, too long, bad characters, or a wildcard where none is allowed. */
  InvalidChannel: 109,
  /** Larger than the configured maximum. */
  MessageTooLarge: 110,
  /** The feature is not available on this server, channel or transport. */
  NotAvailable: 111,
  /** Refresh the token and reconnect. */
  TokenExpired: 112,
  /** `connect` was sent twice. */
  AlreadyConnected: 113,
  /** The broker (e.g. Redis) is unavailable; retry later. */
  BrokerUnavailable: 114,
  /** No table has this id. */
  UnknownTable: 115,
  /** The seat is taken, the table is full, or the game refused the seat. */
  SeatUnavailable: 116,
  /** Not seated at or watching this table. */
  NotAtTable: 117,
  /** The game refused the action (the message is the game's). */
  ActionRefused: 118,
  /** Already seated at or watching this table. */
  AlreadyAtTable: 119,
  /** `play` names a game this server does not run. */
  UnknownGame: 120,
  /** `play` with a private-table code that no open table has. */
  UnknownCode: 121,
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Codes that end a connection (§7.2): WebSocket close codes, and the `code`
 * of a `disconnect` push on other transports. */
export const DisconnectCode = {
  /** Server shutting down or restarting: reconnect (to another node) and recover. */
  GoingAway: 1001,
  /** Broken WebSocket framing: do not retry unchanged. */
  ProtocolError: 1002,
  /** A text frame was not valid UTF-8: do not retry unchanged. */
  InvalidPayload: 1007,
  /** A message exceeded the maximum size: do not retry unchanged. */
  MessageTooBig: 1009,
  /** The connection fell silent: reconnect. */
  NoPong: 3000,
  /** The client could not keep up; its outbound queue filled: reconnect. */
  SlowConsumer: 3001,
  /** Refresh the token, then reconnect. */
  TokenExpired: 3002,
  /** No handshake or `connect` in time: reconnect. */
  ConnectTimeout: 3003,
  /** The node lost its link to the broker and could not replay what it
   * missed: reconnect and recover (the recovery tells whether anything was lost). */
  BrokerStateLost: 3004,
  /** Do not reconnect with the same token. */
  InvalidToken: 3500,
  /** The client broke the protocol (e.g. a bad frame on raw TCP). */
  BadProtocol: 3501,
  /** The client is not allowed to connect. */
  Forbidden: 3502,
  /** Back off before reconnecting. */
  ConnectionLimit: 3503,
} as const;
export type DisconnectCode = (typeof DisconnectCode)[keyof typeof DisconnectCode];

/** Standard WebSocket codes that mean "do not retry unchanged" (RFC 6455 meaning). */
const NO_RETRY_STANDARD: ReadonlySet<number> = new Set([1002, 1007, 1009]);

/**
 * Whether a connection that ended with `code` should be re-established.
 *
 * `null` means the connection dropped without a code (reset, EOF, silence):
 * reconnect. 3500–3999 and 1002/1007/1009 mean "do not reconnect without
 * changing something first"; every other code — 1001, 3000–3499, and codes
 * this SDK does not know — means reconnect with backoff, recovering
 * subscriptions.
 */
export function shouldReconnect(code: number | null): boolean {
  if (code === null) return true;
  if (code >= 3500 && code <= 3999) return false;
  return !NO_RETRY_STANDARD.has(code);
}

/** The name of a known code (`"SlowConsumer"`), or `undefined`. */
export function codeName(code: number): string | undefined {
  for (const table of [ErrorCode, DisconnectCode] as const) {
    for (const [name, value] of Object.entries(table)) {
      if (value === code) return name;
    }
  }
  return undefined;
}
