/**
 * Herald's TypeScript SDK: a client for browsers and Node 20+.
 *
 * {@link Client} is the entry point; the codecs and the I/O-free state
 * machine are exported too, for tests and for tools that speak the protocol
 * directly. The wire protocol is docs/protocol.md.
 */

export * from "./codes.js";
export * from "./errors.js";
export * from "./messages.js";
export { type Encoding, encode, decodeServer, decodeCommand } from "./codec.js";
export { encodeJson, decodeJsonCommand, decodeJsonServer, decodeJsonServerBatch, isJson, MAX_DEPTH } from "./json.js";
export { encodeBinary, decodeBinaryCommand, decodeBinaryServer } from "./binary.js";
export { toBase64, fromBase64, toHex, fromHex, utf8, fromUtf8 } from "./bytes.js";
export {
  type State, type ReconnectPolicy, type Subscribed, type CoreEvent,
  DEFAULT_RECONNECT, backoffDelay, isPattern, channelMatches, ClientCore, SubscriptionCore,
} from "./protocol.js";
export {
  Client, Subscription, Publication, endpoints,
  type ClientOptions, type SubscribeOptions, type ClientEvents, type SubscriptionEvents,
  type Disconnected, type Connected, type HistoryResult, type PlayOptions, type Played, type TokenSource, type SubscribeTokenSource,
} from "./client.js";
export { type TransportKind, ALL_TRANSPORTS, type WebSocketConstructor, type FetchLike } from "./transports/transport.js";
export { Lobby } from "./lobby.js";
