/**
 * The protocol's messages as plain typed objects (docs/protocol.md §2).
 *
 * Every message has a `type` discriminant, so a `switch (m.type)` is checked
 * for exhaustiveness by TypeScript. Optional fields are always present
 * (`null` when absent), so two decodings of the same message compare equal.
 * Payloads (`data`) are bytes: the exact bytes published, whichever encoding
 * carried them. Offsets are numbers: servers keep them below 2^53 (§2), and
 * the decoders reject larger ones rather than round them.
 */

/** A position in a channel's stream: its epoch and an offset in it. */
export interface Position {
  epoch: string;
  offset: number;
}

/** One publication retained in history (a subscribe or history reply item). */
export interface Item {
  offset: number;
  data: Uint8Array;
}

/** One member of a channel (a presence reply entry). */
export interface ClientInfo {
  client: string;
  user: string;
  /** Connection info: the `info` claim of the member's token, as JSON text
   * (empty when there is none); {@link parseInfo} reads it. */
  info: Uint8Array;
}

/** A member's connection info as a JSON value (undefined when there is none). */
export function parseInfo(info: Uint8Array): unknown {
  return info.length === 0 ? undefined : JSON.parse(new TextDecoder().decode(info));
}

/** One table as the lobby shows it (§5e). */
export interface TableEntry {
  /** The table id (below 2^53). */
  table: number;
  /** Where the table sits in the lobby tree, e.g. `holdem/10-seat/express`. */
  path: string;
  seats: number;
  players: number;
  watchers: number;
  /** A JSON object's text: timing, stakes, the game's own attributes;
   * {@link parseInfo} reads it. */
  attrs: Uint8Array;
}

/** A seat change, in `seat` pushes (binary 0..3 in this order). */
export type SeatStatus = "sat" | "left" | "away" | "back";
export const SEAT_STATUSES: readonly SeatStatus[] = ["sat", "left", "away", "back"];

// ---------------------------------------------------------------- commands

export interface Connect { type: "connect"; id: number; token: string | null; name: string | null }
export interface Subscribe { type: "subscribe"; id: number; channel: string; recover: Position | null; joinLeave: boolean; token: string | null }
export interface Unsubscribe { type: "unsubscribe"; id: number; channel: string }
export interface Publish { type: "publish"; id: number; channel: string; data: Uint8Array }
export interface Ping { type: "ping"; id: number }
export interface History { type: "history"; id: number; channel: string; since: Position | null; limit: number }
export interface Presence { type: "presence"; id: number; channel: string }
export interface PresenceStats { type: "presenceStats"; id: number; channel: string }
/** Subscribe to the lobby ("" = every table) or a branch of it. */
export interface Lobby { type: "lobby"; id: number; path: string }
export interface LobbyOff { type: "lobbyOff"; id: number; path: string }
/** Take a seat: `seat` null = any free seat; `data` for the game (may be empty). */
export interface Sit { type: "sit"; id: number; table: number; seat: number | null; data: Uint8Array }
export interface Watch { type: "watch"; id: number; table: number }
export interface Stand { type: "stand"; id: number; table: number }
export interface Act { type: "act"; id: number; table: number; data: Uint8Array }
/** A seat at a table made on demand (§5f): join or create (`game`, `seats`,
 * `attrs`), a new private table (the same with `private`), or a private
 * table by its `code` (`game` "", `seats` null). `attrs` is a JSON object's
 * text (`{}` for none); `data` goes to the game as in `sit`. */
export interface Play {
  type: "play"; id: number; game: string; seats: number | null; attrs: Uint8Array; private: boolean;
  code: string | null; data: Uint8Array;
}

/** Client → server. */
export type Command =
  | Connect | Subscribe | Unsubscribe | Publish | Ping | History | Presence | PresenceStats
  | Lobby | LobbyOff | Sit | Watch | Stand | Act | Play;

// ------------------------------------------------------------------ replies

export interface ConnectReply { type: "connectReply"; id: number; client: string; version: string; pingInterval: number }
export interface SubscribeReply { type: "subscribeReply"; id: number; epoch: string; offset: number; recovered: boolean; publications: Item[] }
export interface UnsubscribeReply { type: "unsubscribeReply"; id: number }
export interface PublishReply { type: "publishReply"; id: number; epoch: string; offset: number }
export interface PingReply { type: "pingReply"; id: number }
export interface HistoryReply { type: "historyReply"; id: number; epoch: string; offset: number; publications: Item[] }
export interface PresenceReply { type: "presenceReply"; id: number; clients: ClientInfo[] }
/** How many connections, and distinct non-empty user ids, a channel has. */
export interface PresenceStatsReply { type: "presenceStatsReply"; id: number; clients: number; users: number }
export interface ErrorReply { type: "error"; id: number; code: number; message: string }
/** The lobby snapshot, or its last part after `lobbyPage` pushes (§5e): apply
 * `lobbyUpdate` pushes with a higher `seq`. */
export interface LobbyReply { type: "lobbyReply"; id: number; seq: number; tables: TableEntry[] }
export interface LobbyOffReply { type: "lobbyOffReply"; id: number }
/** The seat taken and the game's private snapshot for it. */
export interface SitReply { type: "sitReply"; id: number; seat: number; data: Uint8Array }
/** The game's public snapshot. */
export interface WatchReply { type: "watchReply"; id: number; data: Uint8Array }
export interface StandReply { type: "standReply"; id: number }
/** The game accepted the action. */
export interface ActReply { type: "actReply"; id: number }
/** The table and seat `play` gave, the private table's code (null for a
 * public one), whether it created the table, and the seat's private
 * snapshot as a `sit` reply gives it. */
export interface PlayReply { type: "playReply"; id: number; table: number; seat: number; code: string | null; created: boolean; data: Uint8Array }

export type Reply =
  | ConnectReply | SubscribeReply | UnsubscribeReply | PublishReply | PingReply | HistoryReply | PresenceReply | PresenceStatsReply | ErrorReply
  | LobbyReply | LobbyOffReply | SitReply | WatchReply | StandReply | ActReply | PlayReply;

// -------------------------------------------------------------------- pushes

export interface PublicationPush { type: "publication"; channel: string; offset: number; data: Uint8Array }
export interface JoinPush { type: "join"; channel: string; client: string; user: string; info: Uint8Array }
export interface LeavePush { type: "leave"; channel: string; client: string; user: string; info: Uint8Array }
export interface UnsubscribedPush { type: "unsubscribed"; channel: string; code: number; reason: string }
export interface DisconnectPush { type: "disconnect"; code: number; reason: string }

/** Lobby tables added or changed, and ids removed; `path` = the subscribed branch. */
export interface LobbyUpdatePush { type: "lobbyUpdate"; path: string; seq: number; tables: TableEntry[]; removed: number[] }
/** Part of a lobby snapshot too large for one message, sent before the
 * `lobby` reply that ends it (§5e); `path` = the subscribed branch. */
export interface LobbyPagePush { type: "lobbyPage"; path: string; tables: TableEntry[] }
/** Game data from a table. */
export interface GamePush { type: "game"; table: number; data: Uint8Array }
export interface SeatPush { type: "seat"; table: number; seat: number; user: string; status: SeatStatus }
/** The server took the client off a table. */
export interface UnseatPush { type: "unseat"; table: number; code: number; reason: string }

export type Push =
  | PublicationPush | JoinPush | LeavePush | UnsubscribedPush | DisconnectPush
  | LobbyUpdatePush | LobbyPagePush | GamePush | SeatPush | UnseatPush;

/** Server → client. */
export type ServerMessage = Reply | Push;

/** Largest u16 / u32; largest offset a JavaScript number holds exactly. */
export const U16_MAX = 0xffff;
export const U32_MAX = 0xffff_ffff;
export const OFFSET_MAX = Number.MAX_SAFE_INTEGER;
