/**
 * The client: runs {@link ClientCore} over a transport, reconnecting as the
 * protocol says, and falls back to another transport when one is blocked.
 *
 * How it is built: one loop per client (`run`) opens a transport, sends
 * `connect`, re-subscribes with recovery, then feeds every message to the
 * core until the connection ends; it then waits a backoff delay (exponential,
 * full jitter) and tries again. Commands are matched to replies by id.
 * Publications, joins and leaves reach each subscription's listeners
 * synchronously, in order (recovered ones before live ones), with duplicates
 * removed by the core.
 *
 * Transport fallback (docs/decisions/0005-sdk-client-state-machine.md): the
 * transports are tried in order (default WebSocket, SSE, long-polling). One
 * that fails to reach the connected state is skipped at once for the next;
 * a full round of failures waits the backoff delay. After a connection that
 * worked drops, the same transport is tried first again.
 *
 * Several URLs (the nodes of a cluster, as in the Python SDK): each transport
 * is tried on every URL in turn before falling back to the next transport,
 * so the attempts go (WebSocket, A), (WebSocket, B), (SSE, A), (SSE, B), ...
 * Why this order: a dead node fails on every transport alike, and should
 * cost one attempt, not a fall to a slower transport; a blocked transport (a
 * proxy that refuses WebSocket) is usually blocked towards every node, and
 * costs one attempt per URL once, since the transport that got through is
 * kept. A connection that drops, or a server that refuses `connect` with a
 * "retry" error, moves the next attempt to the next URL (same transport),
 * after the backoff delay; subscriptions recover there as on any reconnect
 * (the nodes of a cluster share history through the broker).
 */

import type { Encoding } from "./codec.js";
import { ErrorCode } from "./codes.js";
import { Emitter } from "./emitter.js";
import {
  ClientClosedError,
  ConnectError,
  ConnectionLostError,
  DisconnectedError,
  HeraldError,
  ReplyError,
  RequestTimeoutError,
} from "./errors.js";
import type {
  ClientInfo,
  Command,
  ConnectReply,
  GamePush,
  JoinPush,
  LeavePush,
  LobbyPagePush,
  LobbyUpdatePush,
  Position,
  PublicationPush,
  Reply,
  SeatPush,
  ServerMessage,
  TableEntry,
  UnseatPush,
  UnsubscribedPush,
} from "./messages.js";
import {
  backoffDelay,
  ClientCore,
  DEFAULT_RECONNECT,
  type CoreEvent,
  type ReconnectPolicy,
  type State,
  type Subscribed,
  type SubscriptionCore,
} from "./protocol.js";
import { fromUtf8, utf8 } from "./bytes.js";
import { Lobby } from "./lobby.js";
import { openLongPoll } from "./transports/longpoll.js";
import { openSse } from "./transports/sse.js";
import {
  ALL_TRANSPORTS,
  type FetchLike,
  type OpenOptions,
  type Transport,
  type TransportKind,
  type WebSocketConstructor,
} from "./transports/transport.js";
import { openWebSocket } from "./transports/websocket.js";

/** Error codes after which a failed `connect` is retried rather than final. */
const RETRYABLE_CONNECT_ERRORS: ReadonlySet<number> = new Set([100, 108, 114]);

/** A publication as the application sees it: the published bytes, with
 * helpers to read them as text or JSON. */
export class Publication implements PublicationPush {
  readonly type = "publication" as const;
  constructor(
    readonly channel: string,
    readonly offset: number,
    readonly data: Uint8Array,
  ) {}

  /** The data as UTF-8 text (throws if it is not UTF-8). */
  text(): string {
    const t = fromUtf8(this.data);
    if (t === null) throw new TypeError("publication data is not UTF-8");
    return t;
  }

  /** The data parsed as JSON. */
  json<T = unknown>(): T {
    return JSON.parse(this.text()) as T;
  }
}

/** A connection ended; delivered to the client's `disconnected` listeners. */
export interface Disconnected {
  /** The close or disconnect code; `null` when the connection dropped. */
  code: number | null;
  reason: string;
  /** Whether the client will reconnect (otherwise it is now closed). */
  reconnect: boolean;
}

/** The connect reply, plus the transport that carried it and the URL (one
 * of those given to the client, as given) it reached. */
export interface Connected extends ConnectReply {
  transport: TransportKind;
  url: string;
}

export interface HistoryResult {
  epoch: string;
  offset: number;
  publications: Publication[];
}

export type ClientEvents = {
  /** The client moved to another state. */
  state: (state: State) => void;
  /** A connection is established (after every reconnect too). */
  connected: (info: Connected) => void;
  /** A connection ended. */
  disconnected: (d: Disconnected) => void;
  /** The client closed for good; `error` says why (null: close() was called). */
  closed: (error: HeraldError | null) => void;
  /** Lobby tables added, changed or removed (apply with {@link Lobby}). */
  lobby_update: (u: LobbyUpdatePush) => void;
  /** Part of a large lobby snapshot, before the `lobby` reply (§5e);
   * {@link Client.lobby} already gathers them into its snapshot. */
  lobby_page: (p: LobbyPagePush) => void;
  /** Game data from a table the client sits at or watches. */
  game: (g: GamePush) => void;
  /** A seat changed at a table the client sits at or watches. */
  seat: (s: SeatPush) => void;
  /** The server took the client off a table. */
  unseat: (u: UnseatPush) => void;
};

export type SubscriptionEvents = {
  publication: (p: Publication) => void;
  join: (j: JoinPush) => void;
  leave: (l: LeavePush) => void;
  /** Every (re-)subscription; `needsResync` says publications may be lost. */
  subscribed: (s: Subscribed) => void;
  /** Publications may have been missed: re-read the application's state. */
  resync: (s: Subscribed) => void;
  /** The server ended the subscription, or a re-subscription was refused. */
  unsubscribed: (u: UnsubscribedPush) => void;
};

export interface SubscribeOptions {
  /** After a reconnect, ask for the publications missed (default true;
   * exact channels only). */
  recover?: boolean;
  /** Receive join and leave pushes (default false). */
  joinLeave?: boolean;
  /** Start from this position instead of "now" (e.g. one saved earlier). */
  since?: Position;
  /** A subscribe token for a private channel (docs/protocol.md §5d), sent
   * with every (re)subscribe; or a function given the channel, called before
   * each one so that every re-subscription carries a fresh token (if it
   * throws, the subscription ends: `unsubscribed` with code 101). Over SSE
   * it cannot be sent: there a private channel needs a grant in the
   * connection token. */
  token?: string | SubscribeTokenSource;
  onPublication?: SubscriptionEvents["publication"];
  onJoin?: SubscriptionEvents["join"];
  onLeave?: SubscriptionEvents["leave"];
  onSubscribed?: SubscriptionEvents["subscribed"];
  onResync?: SubscriptionEvents["resync"];
  onUnsubscribed?: SubscriptionEvents["unsubscribed"];
}

/** One subscription. It lives across reconnects: after each one it is
 * re-subscribed with `recover` = {@link position}; recovered publications
 * arrive first, in order and without duplicates, and `resync` is emitted when
 * recovery was not possible. */
export class Subscription extends Emitter<SubscriptionEvents> {
  private settle: { resolve: () => void; reject: (e: Error) => void } | null = null;
  /** Resolves at the first successful subscribe reply. */
  readonly ready: Promise<void>;
  private endedFlag = false;
  /** @internal The subscribe token function, if one was given. */
  tokenSource: SubscribeTokenSource | null = null;

  /** @internal */
  constructor(
    private readonly client: Client,
    /** @internal */ readonly core: SubscriptionCore,
  ) {
    super();
    this.ready = new Promise((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    this.ready.catch(() => {}); // observed through subscribe()
  }

  get channel(): string {
    return this.core.channel;
  }

  /** The last position delivered (the recovery point); null for patterns
   * and before the first reply. */
  get position(): Position | null {
    return this.core.pattern ? null : this.core.position;
  }

  /** Subscribed on the current connection. */
  get active(): boolean {
    return this.core.active;
  }

  get ended(): boolean {
    return this.endedFlag;
  }

  unsubscribe(): Promise<void> {
    return this.client.unsubscribe(this.channel);
  }

  /** @internal */
  fire<K extends keyof SubscriptionEvents>(event: K, ...args: Parameters<SubscriptionEvents[K]>): void {
    if (!this.endedFlag) this.emit(event, ...args);
  }

  /** @internal */
  markReady(): void {
    this.settle?.resolve();
    this.settle = null;
  }

  /** @internal */
  end(error: Error | null): void {
    if (this.endedFlag) return;
    this.endedFlag = true;
    this.settle?.reject(error ?? new ClientClosedError("subscription ended"));
    this.settle = null;
  }
}

/** What {@link Client.play} asks for: a table of a game (join or create, or
 * with `private` a new private table), or the private table of a code. */
export type PlayOptions =
  | {
      game: string;
      seats: number;
      /** Wanted attributes, scalars only (a new table's parameters). */
      attrs?: Record<string, string | number | boolean>;
      /** Create a new private table (joined only by its code). */
      private?: boolean;
      /** For the game with the seat (e.g. a buy-in), as in `sit`. */
      data?: unknown;
    }
  | { code: string; data?: unknown };

/** What {@link Client.play} resolves with. */
export interface Played {
  table: number;
  seat: number;
  /** The private table's code, to hand to friends; absent for a public table. */
  code?: string;
  /** Whether this `play` created the table. */
  created: boolean;
  /** The game's private snapshot for the seat, as `sit` gives it. */
  data: Uint8Array;
}

/** A function (plain or async) returning the token to send in `connect`;
 * called before every connection attempt, so an expired token (3002, 112)
 * is replaced on reconnect. */
export type TokenSource = () => string | Promise<string>;

/** A function (plain or async) given a channel and returning the subscribe
 * token for it; called before every (re)subscribe. */
export type SubscribeTokenSource = (channel: string) => string | Promise<string>;

export interface ClientOptions {
  /** Sent in `connect`: a token, or a function giving a fresh one per attempt. */
  token?: string | TokenSource;
  /** Sent in `connect`: a name for this client in the server's logs. */
  name?: string;
  /** `"json"` (default) or `"binary"` (WebSocket only; the HTTP transports speak JSON). */
  encoding?: Encoding;
  /** Transports to try, in order (default `["websocket", "sse", "longpoll"]`). */
  transports?: TransportKind[];
  /** Backoff between reconnects (milliseconds). */
  reconnect?: Partial<ReconnectPolicy>;
  /** Milliseconds a command waits for its reply (default 10 000). */
  requestTimeout?: number;
  /** Milliseconds to open a transport and get the connect reply (default 10 000). */
  connectTimeout?: number;
  /** WebSocket constructor; default the global one (pass the `ws` package on Node 20). */
  WebSocket?: WebSocketConstructor;
  /** fetch; default the global one. */
  fetch?: FetchLike;
}

/** A lobby snapshot being received, and the snapshot once the reply came. */
interface LobbyLoad {
  lobby: Lobby;
  snapshot: { seq: number; tables: TableEntry[] } | null;
}

interface PendingRequest {
  resolve: (m: Reply) => void;
  reject: (e: Error) => void;
}

interface Outcome {
  connected: boolean;
  /** How long the connection stayed connected, in ms (0 if it never was). */
  connectedFor?: number;
  code: number | null;
  reason: string;
  terminal: HeraldError | null;
  /** The token function failed: no transport was tried. */
  tokenFailed?: boolean;
  /** The server answered `connect` with a retryable error: the transport
   * gets through, so it is kept and retried after the backoff delay. */
  refused?: boolean;
}

/** One of the URLs the client was given, as given and split by {@link endpoints}. */
interface Endpoint {
  url: string;
  wsUrl: string;
  httpUrl: string;
}

/** Splits the URL the application gives (`ws://host:port/ws`,
 * `http://host:port`, `https://host/prefix`) into the WebSocket URL and the
 * HTTP base the other transports use. */
export function endpoints(url: string): { wsUrl: string; httpUrl: string } {
  const u = new URL(url);
  const secure = u.protocol === "wss:" || u.protocol === "https:";
  if (!["ws:", "wss:", "http:", "https:"].includes(u.protocol)) throw new TypeError(`unsupported URL scheme: ${u.protocol}`);
  let path = u.pathname.replace(/\/+$/, "");
  if (path.endsWith("/ws")) path = path.slice(0, -3);
  const host = u.host;
  return {
    wsUrl: `${secure ? "wss" : "ws"}://${host}${path}/ws`,
    httpUrl: `${secure ? "https" : "http"}://${host}${path}`,
  };
}

const sleep = (ms: number, cancel: { fire?: () => void }) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    cancel.fire = () => {
      clearTimeout(t);
      resolve();
    };
  });

/**
 * A Herald client.
 *
 * ```ts
 * const client = new Client("ws://localhost:8080/ws");
 * await client.connect();
 * await client.subscribe("news", { onPublication: (p) => console.log(p.json()) });
 * await client.publish("news", { text: "hi" });
 * ```
 *
 * `url` may be a list (the nodes of a cluster): connection attempts go
 * through it in turn, each transport on every URL before the next transport
 * (see the module comment).
 */
export class Client extends Emitter<ClientEvents> {
  private readonly core: ClientCore;
  private readonly targets: readonly Endpoint[];
  private readonly encoding: Encoding;
  private readonly kinds: TransportKind[];
  private readonly policy: ReconnectPolicy;
  private readonly requestTimeout: number;
  private readonly connectTimeout: number;
  private readonly WebSocketCtor: WebSocketConstructor | undefined;
  private readonly fetchFn: FetchLike;
  private readonly subs = new Map<string, Subscription>();
  private readonly pending = new Map<number, PendingRequest>();
  /** Lobby snapshots being received, by the id of their `lobby` command. */
  private readonly lobbyLoads = new Map<number, LobbyLoad>();
  private transport: Transport | null = null;
  private running = false;
  private first: { resolve: () => void; reject: (e: Error) => void; promise: Promise<void> } | null = null;
  private waiters: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  private info: Connected | null = null;
  private closeError: HeraldError | null = null;
  private endSession: ((code: number | null, reason: string, terminal?: HeraldError | null) => void) | null = null;
  private cancelSleep: { fire?: () => void } = {};
  private readonly tokenSource: TokenSource | null;

  constructor(url: string | readonly string[], options: ClientOptions = {}) {
    super();
    const urls: readonly unknown[] = typeof url === "string" ? [url] : Array.isArray(url) ? url : [url];
    if (urls.length === 0) throw new TypeError("at least one URL is needed");
    this.targets = urls.map((u) => {
      if (typeof u !== "string") throw new TypeError(`a URL is a string, not ${typeof u}`);
      return { url: u, ...endpoints(u) };
    });
    this.encoding = options.encoding ?? "json";
    this.kinds = [...(options.transports ?? ALL_TRANSPORTS)];
    if (this.kinds.length === 0) throw new TypeError("at least one transport is needed");
    if (this.encoding === "binary" && !this.kinds.includes("websocket")) {
      throw new TypeError("the binary encoding needs the websocket transport");
    }
    this.tokenSource = typeof options.token === "function" ? options.token : null;
    this.core = new ClientCore(typeof options.token === "string" ? options.token : null, options.name ?? null);
    this.policy = { ...DEFAULT_RECONNECT, ...options.reconnect };
    this.requestTimeout = options.requestTimeout ?? 10_000;
    this.connectTimeout = options.connectTimeout ?? 10_000;
    this.WebSocketCtor = options.WebSocket;
    const f = options.fetch ?? (globalThis as { fetch?: FetchLike }).fetch;
    if (f === undefined) throw new TypeError("no fetch implementation");
    this.fetchFn = f.bind(globalThis);
  }

  // ------------------------------------------------------------ public --

  get state(): State {
    return this.core.state;
  }

  /** The server-assigned id of the current (or last) connection. */
  get clientId(): string | null {
    return this.info?.client ?? null;
  }

  /** The transport of the current (or last) connection. */
  get transportKind(): TransportKind | null {
    return this.transport?.kind ?? this.info?.transport ?? null;
  }

  /** The URL (as given) of the current (or last) connection. */
  get url(): string | null {
    return this.info?.url ?? null;
  }

  get subscriptions(): ReadonlyMap<string, Subscription> {
    return new Map(this.subs);
  }

  /** Connects, and keeps connected until {@link close}. Resolves once the
   * first connection is established; rejects with {@link ConnectError} if no
   * transport reached the server on the first round, a {@link ReplyError} if
   * the server refused `connect`, or {@link DisconnectedError} on a "do not
   * reconnect" code. */
  connect(): Promise<void> {
    if (this.core.state === "closed") return Promise.reject(new ClientClosedError("client is closed", { cause: this.closeError }));
    if (!this.running) {
      this.running = true;
      let resolve!: () => void;
      let reject!: (e: Error) => void;
      const promise = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      promise.catch(() => {});
      this.first = { resolve, reject, promise };
      void this.run();
    }
    return this.first!.promise;
  }

  /** Closes the connection and ends every subscription; idempotent. */
  close(): void {
    if (this.core.state === "closed" && !this.running) return;
    this.core.close();
    this.endSession?.(null, "client closed");
    this.cancelSleep.fire?.();
    this.finish(null);
  }

  /** Subscribes to a channel or pattern; resolves once the server agreed.
   * Errors reject with the {@link ReplyError} of the code (109 invalid channel, ...). */
  async subscribe(channel: string, options: SubscribeOptions = {}): Promise<Subscription> {
    this.checkOpen();
    if (this.subs.has(channel)) throw new ReplyError(105, `already subscribed to ${channel}`);
    const token = options.token;
    if (token !== undefined && typeof token !== "string" && typeof token !== "function") {
      throw new TypeError("token must be a string or a function");
    }
    const core = this.core.addSubscription(channel, {
      recover: options.recover ?? true,
      joinLeave: options.joinLeave ?? false,
      since: options.since ?? null,
      token: typeof token === "string" ? token : null,
    });
    const sub = new Subscription(this, core);
    sub.tokenSource = typeof token === "function" ? token : null;
    if (options.onPublication) sub.on("publication", options.onPublication);
    if (options.onJoin) sub.on("join", options.onJoin);
    if (options.onLeave) sub.on("leave", options.onLeave);
    if (options.onSubscribed) sub.on("subscribed", options.onSubscribed);
    if (options.onResync) sub.on("resync", options.onResync);
    if (options.onUnsubscribed) sub.on("unsubscribed", options.onUnsubscribed);
    this.subs.set(channel, sub);
    // (When not connected, the subscribe is sent once connected.)
    if (this.core.state === "connected") this.sendSubscribe(sub);
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([
        sub.ready,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new RequestTimeoutError("no subscribe reply in time")), this.requestTimeout);
        }),
      ]);
    } catch (e) {
      if (this.subs.get(channel) === sub) this.dropSub(channel, e as Error);
      throw e;
    } finally {
      clearTimeout(timer);
    }
    return sub;
  }

  /** Ends the subscription to `channel`. */
  async unsubscribe(channel: string): Promise<void> {
    const sub = this.subs.get(channel);
    if (sub === undefined) {
      await this.request((id) => ({ type: "unsubscribe", id, channel }), "unsubscribeReply");
      return;
    }
    const active = sub.core.active;
    this.dropSub(channel, null);
    if (this.core.state !== "connected" || !active) return;
    try {
      await this.request((id) => ({ type: "unsubscribe", id, channel }), "unsubscribeReply");
    } catch (e) {
      // Gone with the connection, or already gone server-side: either way, gone.
      if (!(e instanceof ConnectionLostError || e instanceof ReplyError)) throw e;
    }
  }

  /** Publishes `data` (a `Uint8Array` as it is; anything else, strings
   * included, as compact JSON); resolves with the publication's position. */
  async publish(channel: string, data: unknown): Promise<Position> {
    const payload = toPayload(data);
    const reply = await this.request((id) => ({ type: "publish", id, channel, data: payload }), "publishReply");
    return { epoch: reply.epoch, offset: reply.offset };
  }

  /** Retained publications of `channel` after `since` (all if absent), at
   * most `limit` (0 = server default). */
  async history(channel: string, options: { since?: Position; limit?: number } = {}): Promise<HistoryResult> {
    const reply = await this.request(
      (id) => ({ type: "history", id, channel, since: options.since ?? null, limit: options.limit ?? 0 }),
      "historyReply",
    );
    return {
      epoch: reply.epoch,
      offset: reply.offset,
      publications: reply.publications.map((it) => new Publication(channel, it.offset, it.data)),
    };
  }

  /** The connections currently subscribed to `channel`. */
  async presence(channel: string): Promise<ClientInfo[]> {
    const reply = await this.request((id) => ({ type: "presence", id, channel }), "presenceReply");
    return reply.clients;
  }

  /** How many connections are subscribed to `channel`, and how many distinct
   * non-empty user ids among them: cheap on any channel size (the server keeps
   * counters), where `presence` lists every member. */
  async presenceStats(channel: string): Promise<{ clients: number; users: number }> {
    const reply = await this.request((id) => ({ type: "presenceStats", id, channel }), "presenceStatsReply");
    return { clients: reply.clients, users: reply.users };
  }

  // ------------------------------------------------------------ games --
  // docs/protocol.md §5e. Game data is opaque: `data` arguments are bytes,
  // or any other value sent as its JSON text (as `publish` does). Nothing
  // here is redone after a reconnect: call `lobby` again for a fresh
  // snapshot, and `sit` again for the same table to take the seat back (a
  // seat had with `play` too).

  /** Subscribes to the lobby ("" = every table) or a branch of it; resolves
   * with the whole snapshot (in ascending table id), after which
   * `lobby_update` events follow: apply those with a higher `seq`. A large
   * snapshot comes in `lobby_page` pushes before the reply, perhaps with
   * `lobby_update` pushes between them (§5e); this gathers them all, and the
   * `seq` resolved is the last one they reached.
   *
   * With `into` (a {@link Lobby} for the same path), the snapshot is also
   * received into it as the messages arrive ({@link Lobby.begin} at sending,
   * {@link Lobby.finish} at the reply, before any later push is handed to
   * `lobby_update` listeners): a listener that calls `into.apply(u)` then
   * never misses an update, whatever the transport delivers at once. */
  async lobby(path = "", into?: Lobby): Promise<{ seq: number; tables: TableEntry[] }> {
    if (into !== undefined && into.path !== path) throw new TypeError(`the Lobby follows "${into.path}", not "${path}"`);
    const load = into ?? new Lobby(path);
    load.begin();
    const entry: LobbyLoad = { lobby: load, snapshot: null };
    let sent = 0;
    try {
      await this.request((id) => {
        sent = id;
        this.lobbyLoads.set(id, entry);
        return { type: "lobby", id, path };
      }, "lobbyReply");
    } finally {
      this.lobbyLoads.delete(sent);
    }
    // Taken when the reply arrived (see "reply" below): `into` may have
    // moved on since.
    return entry.snapshot!;
  }

  /** Ends the lobby subscription made with the same path. */
  async lobbyOff(path = ""): Promise<void> {
    await this.request((id) => ({ type: "lobbyOff", id, path }), "lobbyOffReply");
  }

  /** Takes a seat at `table` (any free one unless `seat` is given), or takes
   * one's seat back after a reconnect; resolves with the seat and the game's
   * private snapshot. */
  async sit(table: number, options: { seat?: number; data?: unknown } = {}): Promise<{ seat: number; data: Uint8Array }> {
    const data = options.data === undefined ? new Uint8Array(0) : toPayload(options.data);
    const reply = await this.request(
      (id) => ({ type: "sit", id, table, seat: options.seat ?? null, data }),
      "sitReply",
    );
    return { seat: reply.seat, data: reply.data };
  }

  /** A seat at a table made on demand (docs/protocol.md §5f), in one of
   * three forms:
   *
   * - `{ game, seats, attrs? }`: join or create: a seat at a public table of
   *   this game, seat count and attributes that has one free, else a new one;
   * - `{ game, seats, attrs?, private: true }`: a new private table; the
   *   result's `code` is what friends join it with;
   * - `{ code }`: a seat at the private table of that code.
   *
   * `attrs` are scalars (a new table takes them as its parameters; `timing`
   * is its timing profile); `data` goes to the game with the seat, as in
   * {@link sit}. Resolves with the table, the seat, the code (private tables
   * only), whether this call created the table, and the private snapshot;
   * the client is then seated as after `sit`, and after a reconnect takes
   * the seat back with `sit(table)`. Errors reject with a {@link ReplyError}:
   * 120 unknown game, 121 unknown code, 116 table full, 107 a cap, 103 bad
   * arguments. */
  async play(options: PlayOptions): Promise<Played> {
    // Sent as given: the server judges the combination (103 for a code with a game).
    const o: { game?: string; seats?: number; attrs?: object; private?: boolean; code?: string; data?: unknown } = options;
    const data = o.data === undefined ? new Uint8Array(0) : toPayload(o.data);
    const attrs = toPayload(o.attrs ?? {});
    const reply = await this.request(
      (id) => ({ type: "play", id, game: o.game ?? "", seats: o.seats ?? null, attrs, private: o.private ?? false, code: o.code ?? null, data }),
      "playReply",
    );
    const played: Played = { table: reply.table, seat: reply.seat, created: reply.created, data: reply.data };
    if (reply.code !== null) played.code = reply.code;
    return played;
  }

  /** Watches `table`; resolves with the game's public snapshot. */
  async watch(table: number): Promise<Uint8Array> {
    const reply = await this.request((id) => ({ type: "watch", id, table }), "watchReply");
    return reply.data;
  }

  /** Gives up the seat at `table`, or stops watching it. */
  async stand(table: number): Promise<void> {
    await this.request((id) => ({ type: "stand", id, table }), "standReply");
  }

  /** Sends a game action; resolves once the game accepted it (a refusal
   * rejects with a {@link ReplyError}, code 118). */
  async act(table: number, data: unknown): Promise<void> {
    const payload = toPayload(data);
    await this.request((id) => ({ type: "act", id, table, data: payload }), "actReply");
  }

  /** Round trip to the server, in milliseconds. */
  async ping(): Promise<number> {
    const start = Date.now();
    await this.request((id) => ({ type: "ping", id }), "pingReply");
    return Date.now() - start;
  }

  // ---------------------------------------------------------- requests --

  private checkOpen(): void {
    if (this.core.state === "closed") throw new ClientClosedError("client is closed", { cause: this.closeError });
    if (!this.running) throw new ClientClosedError("not connected: call connect() first");
  }

  private waitConnected(deadline: number): Promise<void> {
    if (this.core.state === "connected") return Promise.resolve();
    return new Promise((resolve, reject) => {
      const w = {
        resolve: () => {
          clearTimeout(t);
          resolve();
        },
        reject: (e: Error) => {
          clearTimeout(t);
          reject(e);
        },
      };
      const t = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(new RequestTimeoutError("not connected in time"));
      }, Math.max(0, deadline - Date.now()));
      this.waiters.push(w);
    });
  }

  /** Sends a command and waits for its reply (of the command's own type;
   * an `error` reply rejects with its {@link ReplyError}). */
  private async request<T extends Reply["type"]>(make: (id: number) => Command, expect: T): Promise<Extract<Reply, { type: T }>> {
    this.checkOpen();
    const deadline = Date.now() + this.requestTimeout;
    await this.waitConnected(deadline);
    const transport = this.transport;
    if (transport === null) throw new ConnectionLostError("not connected");
    const id = this.core.nextId();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new RequestTimeoutError("no reply in time"));
      }, Math.max(0, deadline - Date.now()));
      this.pending.set(id, {
        resolve: (m) => {
          clearTimeout(timer);
          if (m.type === "error") reject(new ReplyError(m.code, m.message));
          else if (m.type !== expect) reject(new HeraldError(`expected a ${expect}, the server sent a ${m.type}`));
          else resolve(m as Extract<Reply, { type: T }>);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      transport.send(make(id));
    });
  }

  /** Sends `sub`'s subscribe on the current connection, after asking its
   * token function (if any) for a fresh subscribe token; not if the
   * connection changed or the subscribe was sent meanwhile. */
  private sendSubscribe(sub: Subscription): void {
    const transport = this.transport;
    if (transport === null) return;
    const send = () => {
      if (this.transport === transport && this.subOf(sub.core) === sub && this.core.needsSubscribe(sub.core)) {
        transport.send(this.core.subscribeCommand(sub.core));
      }
    };
    const source = sub.tokenSource;
    if (source === null) return send();
    void (async () => {
      let token: unknown;
      try {
        token = await source(sub.channel);
        if (typeof token !== "string") throw new TypeError("the subscribe token function must give a string");
      } catch (e) {
        if (this.subOf(sub.core) !== sub) return;
        const error = e instanceof Error ? e : new Error(String(e));
        if (sub.core.everSubscribed) {
          // A re-subscription cannot be made: tell the application.
          const reason = `subscribe token function failed: ${error.message}`;
          sub.fire("unsubscribed", { type: "unsubscribed", channel: sub.channel, code: ErrorCode.Unauthorized, reason });
        }
        this.dropSub(sub.channel, error);
        return;
      }
      sub.core.token = token;
      send();
    })();
  }

  private dropSub(channel: string, error: Error | null): void {
    const sub = this.subs.get(channel);
    this.subs.delete(channel);
    this.core.removeSubscription(channel);
    sub?.end(error);
  }

  // ------------------------------------------------------------ runner --

  private setState(): void {
    this.emit("state", this.core.state);
  }

  private async run(): Promise<void> {
    let attempt = 0;
    let everConnected = false;
    // The next attempt: transport `kind` (index into this.kinds) on URL `at`
    // (index into this.targets). Attempts that do not get through go on at
    // once: to the next URL, and once a transport failed on every URL in a
    // row, to the next transport; a full round (every transport on every
    // URL) waits the backoff delay.
    let kind = 0;
    let at = 0;
    const round = this.kinds.length * this.targets.length;
    let failedInRound = 0;
    let failedOnKind = 0;
    let lastReason = "";
    const nextUrl = () => (at = (at + 1) % this.targets.length);
    for (;;) {
      const outcome = (await this.refreshToken()) ?? (await this.session(this.kinds[kind]!, this.targets[at]!));
      lastReason = outcome.reason;
      if (outcome.terminal !== null) return this.finish(outcome.terminal);
      if (this.core.state === "closed") return this.finish(this.closeError ?? new DisconnectedError(outcome.code, outcome.reason));
      if (outcome.connected) {
        everConnected = true;
        failedInRound = 0;
        failedOnKind = 0;
        // A connection that worked dropped: the same transport, on the next URL.
        nextUrl();
        // protocol.md §7.3: only a connection that lasted `stableAfter` restarts
        // the backoff; one that ends sooner counts as a failed attempt, so a
        // server that accepts and at once closes is not hammered.
        if ((outcome.connectedFor ?? 0) >= this.policy.stableAfter) attempt = 0;
      } else if (outcome.refused) {
        // The transport gets through; the node asked to retry later: another
        // node may not, so the same transport on the next URL.
        failedInRound = 0;
        failedOnKind = 0;
        nextUrl();
      } else if (outcome.tokenFailed) {
        if (!everConnected) {
          this.core.close();
          return this.finish(new ConnectError(outcome.reason));
        }
      } else {
        // Did not get through: the next URL at once, and after this
        // transport failed on every URL, the next transport.
        failedInRound++;
        nextUrl();
        if (++failedOnKind === this.targets.length) {
          failedOnKind = 0;
          kind = (kind + 1) % this.kinds.length;
        }
        if (failedInRound < round) continue;
        failedInRound = 0;
        if (!everConnected) {
          this.core.close();
          const where = this.targets.map((e) => e.httpUrl).join(", ");
          return this.finish(new ConnectError(`could not connect to ${where} (${this.kinds.join(", ")}): ${lastReason}`));
        }
      }
      if (this.policy.maxAttempts !== null && attempt >= this.policy.maxAttempts) {
        this.core.close();
        return this.finish(new ConnectionLostError(`gave up after ${attempt} attempts`));
      }
      const delay = backoffDelay(this.policy, attempt);
      attempt++;
      await sleep(delay, this.cancelSleep);
      if ((this.core.state as State) === "closed") return this.finish(null);
    }
  }

  /** Asks the token function, if any, for this attempt's token; an outcome
   * only if it failed (then the attempt counts as failed, on no transport). */
  private async refreshToken(): Promise<Outcome | null> {
    if (this.tokenSource === null) return null;
    try {
      const token = await this.tokenSource();
      if (typeof token !== "string") throw new TypeError("the token function must give a string");
      this.core.token = token;
      return null;
    } catch (e) {
      return { connected: false, code: null, reason: `token function failed: ${(e as Error).message}`, terminal: null, tokenFailed: true };
    }
  }

  /** One connection, from opening to its end. */
  private session(kind: TransportKind, endpoint: Endpoint): Promise<Outcome> {
    return new Promise<Outcome>((resolveOutcome) => {
      let connected = false;
      let connectedAt = 0;
      let ended = false;
      let transport: Transport | null = null;
      let disconnectPush: { code: number; reason: string } | null = null;
      let connectTimer: ReturnType<typeof setTimeout> | undefined;
      let liveness: ReturnType<typeof setInterval> | undefined;
      let lastHeard = Date.now();
      let probeSent = false;
      let refused = false;

      const end = (code: number | null, reason: string, terminal: HeraldError | null = null) => {
        if (ended) return;
        ended = true;
        clearTimeout(connectTimer);
        clearInterval(liveness);
        if (this.endSession === end) this.endSession = null;
        if (transport !== null) {
          transport.close();
          if (this.transport === transport) this.transport = null;
        }
        if (disconnectPush !== null) ({ code, reason } = disconnectPush);
        if (terminal !== null) this.core.close();
        const again = this.core.connectionLost(code);
        this.setState();
        const lost = new ConnectionLostError(`connection lost: ${code ?? ""} ${reason}`.trim());
        for (const p of this.pending.values()) p.reject(lost);
        this.pending.clear();
        this.lobbyLoads.clear();
        if (connected) this.emit("disconnected", { code, reason, reconnect: again && terminal === null });
        const connectedFor = connected ? Date.now() - connectedAt : 0;
        resolveOutcome({ connected, connectedFor, code, reason, terminal, refused });
      };
      this.endSession = end;

      const handle = (event: CoreEvent) => {
        switch (event.type) {
          case "deliver": {
            const p = event.publication;
            this.subOf(event.sub)?.fire("publication", new Publication(p.channel, p.offset, p.data));
            return;
          }
          case "reply": {
            // A lobby snapshot ends here, before any later push is applied.
            const load = this.lobbyLoads.get(event.reply.id);
            if (load !== undefined) {
              this.lobbyLoads.delete(event.reply.id);
              if (event.reply.type === "lobbyReply") {
                const l = load.lobby;
                l.finish(event.reply);
                load.snapshot = { seq: l.seq, tables: [...l.tables.values()].sort((a, b) => a.table - b.table) };
              }
            }
            const p = this.pending.get(event.reply.id);
            if (p !== undefined) {
              this.pending.delete(event.reply.id);
              p.resolve(event.reply);
            }
            return;
          }
          case "subscribed": {
            const sub = this.subOf(event.sub);
            if (sub === undefined) return;
            sub.markReady();
            sub.fire("subscribed", event.subscribed);
            if (event.subscribed.needsResync) sub.fire("resync", event.subscribed);
            return;
          }
          case "joinLeave":
            this.subOf(event.sub)?.fire(event.event.type, event.event as JoinPush & LeavePush);
            return;
          case "game": {
            const push = event.push;
            if (push.type === "lobbyUpdate") {
              for (const load of this.lobbyLoads.values()) load.lobby.apply(push);
              this.emit("lobby_update", push);
            } else if (push.type === "lobbyPage") {
              for (const load of this.lobbyLoads.values()) load.lobby.page(push);
              this.emit("lobby_page", push);
            } else if (push.type === "game") this.emit("game", push);
            else if (push.type === "seat") this.emit("seat", push);
            else this.emit("unseat", push);
            return;
          }
          case "connected": {
            connected = true;
            connectedAt = Date.now();
            clearTimeout(connectTimer);
            this.info = { ...event.reply, transport: kind, url: endpoint.url };
            this.setState();
            const waiters = this.waiters;
            this.waiters = [];
            for (const w of waiters) w.resolve();
            this.first?.resolve();
            this.emit("connected", this.info);
            // Subscriptions with a token function wait for a fresh token.
            for (const cmd of this.core.resubscribeCommands((s) => this.subOf(s)?.tokenSource != null)) transport?.send(cmd);
            for (const sub of [...this.subs.values()]) if (sub.tokenSource !== null) this.sendSubscribe(sub);
            const interval = event.reply.pingInterval * 1000;
            if (kind === "websocket" && interval > 0) {
              // Silence for ping_interval: probe with a ping; silence for
              // twice that: the connection is dead (docs/protocol.md §5).
              liveness = setInterval(() => {
                if (Date.now() - lastHeard < interval) return;
                if (probeSent) return end(null, "server silent");
                probeSent = true;
                transport?.send({ type: "ping", id: this.core.nextId() });
              }, interval);
            }
            return;
          }
          case "subscribeFailed": {
            const sub = this.subs.get(event.sub.channel);
            if (sub !== undefined && sub.core === event.sub) {
              this.subs.delete(event.sub.channel);
              if (!sub.ended && event.sub.everSubscribed) {
                // A re-subscription failed: tell the application.
                sub.fire("unsubscribed", { type: "unsubscribed", channel: sub.channel, code: event.error.code, reason: event.error.message });
              }
              sub.end(new ReplyError(event.error.code, event.error.message));
            }
            return;
          }
          case "subscriptionEnded": {
            const sub = this.subs.get(event.sub.channel);
            if (sub !== undefined && sub.core === event.sub) {
              this.subs.delete(event.sub.channel);
              sub.fire("unsubscribed", event.push);
              sub.end(new ReplyError(event.push.code, event.push.reason));
            }
            return;
          }
          case "stale":
            if (!this.subs.has(event.channel)) transport?.send({ type: "unsubscribe", id: 0, channel: event.channel });
            return;
          case "serverDisconnect":
            disconnectPush = { code: event.push.code, reason: event.push.reason };
            return;
          case "connectFailed": {
            const error = new ReplyError(event.error.code, event.error.message);
            // An expired token is refreshed on the next attempt, if it can be.
            const retry =
              RETRYABLE_CONNECT_ERRORS.has(event.error.code) ||
              (event.error.code === ErrorCode.TokenExpired && this.tokenSource !== null);
            if (retry) {
              refused = true;
              return end(null, `connect refused: ${error.message}`);
            }
            return end(null, error.message, error);
          }
        }
      };

      const onMessage = (m: ServerMessage) => {
        if (ended) return;
        lastHeard = Date.now();
        probeSent = false;
        for (const event of this.core.receive(m)) {
          handle(event);
          if (ended) return;
        }
      };

      const options: OpenOptions = {
        wsUrl: endpoint.wsUrl,
        httpUrl: endpoint.httpUrl,
        encoding: kind === "websocket" ? this.encoding : "json",
        openTimeout: this.connectTimeout,
        WebSocket: this.WebSocketCtor,
        fetch: this.fetchFn,
        handlers: {
          message: onMessage,
          closed: (code, reason) => end(code, reason),
          position: (channel, pos, gap) => {
            if (ended) return;
            for (const event of this.core.reposition(channel, pos, gap)) handle(event);
          },
        },
      };
      const opening = kind === "websocket" ? openWebSocket(options) : kind === "sse" ? openSse(options) : openLongPoll(options);
      opening.then(
        (t) => {
          if (ended) {
            t.close();
            return;
          }
          transport = t;
          this.transport = t;
          connectTimer = setTimeout(() => end(null, "no connect reply in time"), this.connectTimeout);
          t.send(this.core.startConnect());
          this.setState();
        },
        (e: unknown) => {
          if (ended) return;
          ended = true;
          if (this.endSession === end) this.endSession = null;
          resolveOutcome({ connected: false, code: null, reason: e instanceof Error ? e.message : String(e), terminal: null });
        },
      );
    });
  }

  private subOf(core: SubscriptionCore): Subscription | undefined {
    const sub = this.subs.get(core.channel);
    return sub !== undefined && sub.core === core ? sub : undefined;
  }

  /** The client is closed for good, because of `error` (null: close()). */
  private finish(error: HeraldError | null): void {
    if (this.closedEmitted) return;
    this.core.close();
    this.running = false;
    if (this.closeError === null) this.closeError = error;
    const closed = new ClientClosedError(error ? error.message : "client closed", { cause: error });
    this.first?.reject(error ?? closed);
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.reject(closed);
    for (const p of this.pending.values()) p.reject(closed);
    this.pending.clear();
    for (const sub of this.subs.values()) sub.end(closed);
    this.subs.clear();
    this.closedEmitted = true;
    this.setState();
    this.emit("closed", error);
  }
  private closedEmitted = false;
}

/** Bytes as they are, anything else (strings too) as compact JSON text, as
 * in the Python SDK. */
function toPayload(data: unknown): Uint8Array {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  const text = JSON.stringify(data);
  if (text === undefined) throw new TypeError("data cannot be sent as JSON");
  return utf8(text);
}
