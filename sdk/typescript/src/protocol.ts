/**
 * The client state machine, with no I/O: states, reconnect rules, recovery.
 *
 * Why I/O-free (as the Python SDK's `protocol.py` and python-websockets'
 * sans-I/O core): everything that decides *what* to send and *what* a
 * received message means lives here as plain methods over messages, so it is
 * shared by every transport and tested without sockets. The client
 * (`client.ts`) only moves messages and turns the {@link CoreEvent} values
 * returned by {@link ClientCore.receive} into promises and callbacks.
 *
 * States (the same in every Herald SDK; docs/decisions/0005):
 *
 * ```text
 * disconnected --startConnect()--> connecting --connect reply--> connected
 *      ^                               |                             |
 *      +--- connectionLost(code) ------+-----------------------------+
 *           (shouldReconnect(code))    (otherwise, or close())   --> closed
 * ```
 *
 * Recovery: each exact-channel subscription remembers the last position
 * (epoch, offset) it delivered. A re-subscription after a reconnect sends it
 * as `recover`; the reply's publications are delivered first, in order, then
 * live ones; any publication at or below the remembered offset (same epoch)
 * is a duplicate and is skipped. A reply that is not `recovered` after
 * recovery was needed has {@link Subscribed.needsResync}: publications may
 * be lost and the application should re-read its state.
 */

import { shouldReconnect } from "./codes.js";
import type {
  Connect,
  ConnectReply,
  DisconnectPush,
  ErrorReply,
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
  Subscribe,
  SubscribeReply,
  UnseatPush,
  UnsubscribedPush,
} from "./messages.js";

export type State = "disconnected" | "connecting" | "connected" | "closed";

/** Exponential backoff with full jitter, bounded.
 *
 * The n-th consecutive failed attempt (from 0) waits a uniformly random time
 * in `[0, min(maxDelay, initialDelay * multiplier^n)]` — "full jitter", so
 * that thousands of clients dropped at once do not come back in step. The
 * count restarts once a connection has lasted `stableAfter`; one that ends
 * sooner counts as a failed attempt (protocol.md §7.3). Times in milliseconds. */
export interface ReconnectPolicy {
  /** Upper bound of the first wait (default 500 ms). */
  initialDelay: number;
  /** Upper bound of any wait (default 20 000 ms). */
  maxDelay: number;
  /** Growth of the bound per failed attempt (default 2). */
  multiplier: number;
  /** Consecutive failed attempts before giving up for good; `null` (default) = never. */
  maxAttempts: number | null;
  /** How long a connection must last before the attempt count restarts (default 5 000 ms). */
  stableAfter: number;
}

export const DEFAULT_RECONNECT: ReconnectPolicy = { initialDelay: 500, maxDelay: 20_000, multiplier: 2, maxAttempts: null, stableAfter: 5_000 };

/** Milliseconds to wait before attempt number `attempt` + 1. */
export function backoffDelay(policy: ReconnectPolicy, attempt: number, rand: () => number = Math.random): number {
  const bound = Math.min(policy.maxDelay, policy.initialDelay * policy.multiplier ** Math.min(attempt, 64));
  return rand() * bound;
}

/** Whether `channel` is a wildcard pattern (contains `*` or `>`). */
export function isPattern(channel: string): boolean {
  return channel.includes("*") || channel.includes(">");
}

/** Whether concrete `channel` matches `pattern` (docs/protocol.md §5a):
 * `*` matches exactly one `.`-separated token, a final `>` one or more. */
export function channelMatches(pattern: string, channel: string): boolean {
  const p = pattern.split(".");
  const c = channel.split(".");
  for (let i = 0; i < p.length; i++) {
    const tok = p[i];
    if (tok === ">" && i === p.length - 1) return c.length > i;
    if (i >= c.length || (tok !== "*" && tok !== c[i])) return false;
  }
  return p.length === c.length;
}

// ---------------------------------------------------------------- events --

/** A (re-)subscription succeeded. */
export interface Subscribed {
  channel: string;
  epoch: string;
  offset: number;
  /** The server delivered every publication since the recover position. */
  recovered: boolean;
  /** This follows a reconnect (the subscription existed before). */
  resubscribed: boolean;
  /** A `recover` position was sent. */
  recoveryRequested: boolean;
  /** Publications may have been missed (recovery was needed and failed, or
   * was impossible): the application should re-read its state. */
  needsResync: boolean;
}

export type CoreEvent =
  | { type: "connected"; reply: ConnectReply }
  | { type: "connectFailed"; error: ErrorReply }
  | { type: "reply"; reply: Reply }
  | { type: "deliver"; sub: SubscriptionCore; publication: PublicationPush }
  | { type: "joinLeave"; sub: SubscriptionCore; event: JoinPush | LeavePush }
  | { type: "subscribed"; sub: SubscriptionCore; subscribed: Subscribed }
  | { type: "subscribeFailed"; sub: SubscriptionCore; error: ErrorReply }
  | { type: "subscriptionEnded"; sub: SubscriptionCore; push: UnsubscribedPush }
  | { type: "stale"; channel: string }
  | { type: "serverDisconnect"; push: DisconnectPush }
  /** A game push (§5e), handed to the application as is. */
  | { type: "game"; push: LobbyUpdatePush | LobbyPagePush | GamePush | SeatPush | UnseatPush };

// --------------------------------------------------------- subscriptions --

/** One subscription's protocol state: its options and its stream position. */
export class SubscriptionCore {
  /** Epoch of the stream the offset belongs to; `null` before the first reply. */
  epoch: string | null = null;
  /** Offset of the last publication delivered (or the stream top at subscribe). */
  offset = 0;
  /** The application gave an explicit starting position. */
  sinceRequested = false;
  everSubscribed = false;
  /** Id of this subscription's subscribe in flight on the current connection. */
  pendingId = 0;
  /** Subscribed on the current connection: publications are delivered. */
  active = false;
  removed = false;
  /** Subscribe token sent with every (re)subscribe (private channels,
   * docs/protocol.md §5d); `null` for none. */
  token: string | null = null;
  readonly pattern: boolean;

  constructor(
    readonly channel: string,
    readonly recover: boolean,
    readonly joinLeave: boolean,
  ) {
    this.pattern = isPattern(channel);
  }

  get position(): Position | null {
    return this.epoch === null ? null : { epoch: this.epoch, offset: this.offset };
  }

  command(id: number): Subscribe {
    let recover: Position | null = null;
    if (this.epoch !== null) {
      if (!this.everSubscribed) {
        // The first subscribe: from the application's `since`, if any.
        recover = this.sinceRequested ? { epoch: this.epoch, offset: this.offset } : null;
      } else if (this.recover && !this.pattern) {
        recover = { epoch: this.epoch, offset: this.offset };
      }
    }
    return { type: "subscribe", id, channel: this.channel, recover, joinLeave: this.joinLeave, token: this.token };
  }

  /** Applies a successful subscribe reply; returns the event and the
   * publications to deliver (recovered ones, after the known offset, in order). */
  apply(reply: SubscribeReply, sentRecover: boolean): [Subscribed, PublicationPush[]] {
    const resubscribed = this.everSubscribed;
    this.everSubscribed = true;
    this.active = true;
    const deliver: PublicationPush[] = [];
    if (!this.pattern) {
      if (this.epoch !== reply.epoch) {
        this.epoch = reply.epoch;
        this.offset = 0;
      }
      for (const item of reply.publications) {
        if (item.offset > this.offset) {
          deliver.push({ type: "publication", channel: this.channel, offset: item.offset, data: item.data });
          this.offset = item.offset;
        }
      }
      this.offset = Math.max(this.offset, reply.offset);
    }
    const subscribed: Subscribed = {
      channel: this.channel,
      epoch: reply.epoch,
      offset: reply.offset,
      recovered: reply.recovered,
      resubscribed,
      recoveryRequested: sentRecover,
      needsResync: (resubscribed || sentRecover) && !reply.recovered,
    };
    return [subscribed, deliver];
  }

  /** Whether a live publication at `offset` is new (and remember it). */
  accept(offset: number): boolean {
    if (this.pattern) return true;
    if (offset <= this.offset) return false;
    this.offset = offset;
    return true;
  }
}

// ------------------------------------------------------------------ core --

interface Pending {
  sub: SubscriptionCore;
  sentRecover: boolean;
}

/** The client's protocol state between transports and reconnects.
 *
 * Feed it every decoded server message with {@link receive}; send what
 * {@link startConnect}, {@link subscribeCommand} and {@link resubscribeCommands}
 * return; report the end of each connection with {@link connectionLost}. */
export class ClientCore {
  state: State = "disconnected";
  readonly subscriptions = new Map<string, SubscriptionCore>();
  private lastId = 0;
  private connectId = 0;
  private readonly subscribing = new Map<number, Pending>();

  constructor(
    public token: string | null = null,
    public name: string | null = null,
  ) {}

  /** A fresh non-zero u32 command id. */
  nextId(): number {
    this.lastId = (this.lastId % 0xffff_ffff) + 1;
    return this.lastId;
  }

  /** A transport is open: the connect command to send first. */
  startConnect(): Connect {
    if (this.state === "closed") throw new Error("client is closed");
    this.state = "connecting";
    this.resetConnection();
    this.connectId = this.nextId();
    return { type: "connect", id: this.connectId, token: this.token, name: this.name };
  }

  private resetConnection(): void {
    this.subscribing.clear();
    for (const sub of this.subscriptions.values()) {
      sub.pendingId = 0;
      sub.active = false;
    }
  }

  /** The transport ended (`code` null = dropped). Returns whether to
   * reconnect; the state becomes disconnected or closed accordingly. */
  connectionLost(code: number | null): boolean {
    this.resetConnection();
    if (this.state === "closed") return false;
    const again = shouldReconnect(code);
    this.state = again ? "disconnected" : "closed";
    return again;
  }

  close(): void {
    this.state = "closed";
  }

  addSubscription(
    channel: string,
    opts: { recover?: boolean; joinLeave?: boolean; since?: Position | null; token?: string | null } = {},
  ): SubscriptionCore {
    if (this.subscriptions.has(channel)) throw new Error(`already subscribed to ${channel}`);
    const sub = new SubscriptionCore(channel, opts.recover ?? true, opts.joinLeave ?? false);
    sub.token = opts.token ?? null;
    if (opts.since) {
      sub.epoch = opts.since.epoch;
      sub.offset = opts.since.offset;
      sub.sinceRequested = true;
    }
    this.subscriptions.set(channel, sub);
    return sub;
  }

  removeSubscription(channel: string): SubscriptionCore | undefined {
    const sub = this.subscriptions.get(channel);
    if (sub !== undefined) {
      this.subscriptions.delete(channel);
      sub.removed = true;
      sub.active = false;
    }
    return sub;
  }

  /** The subscribe command for `sub` on the current connection. */
  subscribeCommand(sub: SubscriptionCore): Subscribe {
    const cmd = sub.command(this.nextId());
    sub.pendingId = cmd.id;
    this.subscribing.set(cmd.id, { sub, sentRecover: cmd.recover !== null });
    return cmd;
  }

  /** Whether `sub` still needs its subscribe sent on the current connection. */
  needsSubscribe(sub: SubscriptionCore): boolean {
    return this.state === "connected" && !sub.removed && !sub.pendingId && !sub.active;
  }

  /** After the connect reply: a subscribe for every subscription not yet
   * sent on this connection, with `recover` = its last position; those for
   * which `skip` is true are left for the caller to send later (e.g. once a
   * fresh subscribe token has arrived). */
  resubscribeCommands(skip: (s: SubscriptionCore) => boolean = () => false): Subscribe[] {
    if (this.state !== "connected") return [];
    return [...this.subscriptions.values()].filter((s) => this.needsSubscribe(s) && !skip(s)).map((s) => this.subscribeCommand(s));
  }

  /** A transport that cannot carry subscribe replies (SSE) learned a
   * channel's position from the stream: move the subscription there. With
   * `gap`, publications may have been missed (the stream could not be
   * recovered, or its epoch changed), reported like an unrecovered
   * re-subscription so the application resynchronises. */
  reposition(channel: string, pos: Position, gap: boolean): CoreEvent[] {
    const sub = this.subscriptions.get(channel);
    if (sub === undefined || sub.pattern || !sub.active) return [];
    sub.epoch = pos.epoch;
    sub.offset = pos.offset;
    if (!gap) return [];
    const subscribed: Subscribed = {
      channel,
      epoch: pos.epoch,
      offset: pos.offset,
      recovered: false,
      resubscribed: true,
      recoveryRequested: true,
      needsResync: true,
    };
    return [{ type: "subscribed", sub, subscribed }];
  }

  /** What one server message means, as events in delivery order. */
  receive(m: ServerMessage): CoreEvent[] {
    switch (m.type) {
      case "publication": {
        const out: CoreEvent[] = [];
        const exact = this.subscriptions.get(m.channel);
        if (exact !== undefined && !exact.pattern && exact.active && exact.accept(m.offset)) {
          out.push({ type: "deliver", sub: exact, publication: m });
        }
        for (const sub of this.subscriptions.values()) {
          if (sub.pattern && sub.active && channelMatches(sub.channel, m.channel)) {
            out.push({ type: "deliver", sub, publication: m });
          }
        }
        return out;
      }
      case "join":
      case "leave": {
        const out: CoreEvent[] = [];
        for (const sub of this.subscriptions.values()) {
          if (sub.active && (sub.channel === m.channel || (sub.pattern && channelMatches(sub.channel, m.channel)))) {
            out.push({ type: "joinLeave", sub, event: m });
          }
        }
        return out;
      }
      case "unsubscribed": {
        const ended = this.removeSubscription(m.channel);
        return ended ? [{ type: "subscriptionEnded", sub: ended, push: m }] : [];
      }
      case "disconnect":
        return [{ type: "serverDisconnect", push: m }];
      case "lobbyUpdate":
      case "lobbyPage":
      case "game":
      case "seat":
      case "unseat":
        return [{ type: "game", push: m }];
      default:
        break;
    }
    // A reply or an error: route by id.
    if (m.id && m.id === this.connectId && this.state === "connecting") {
      if (m.type === "connectReply") {
        this.state = "connected";
        return [{ type: "connected", reply: m }];
      }
      if (m.type === "error") return [{ type: "connectFailed", error: m }];
    }
    const pending = m.id ? this.subscribing.get(m.id) : undefined;
    if (pending !== undefined) {
      this.subscribing.delete(m.id);
      const sub = pending.sub;
      if (sub.pendingId === m.id) sub.pendingId = 0;
      if (m.type === "error") {
        if (sub.removed) return [];
        this.removeSubscription(sub.channel);
        return [{ type: "subscribeFailed", sub, error: m }];
      }
      if (m.type === "subscribeReply") {
        if (sub.removed) return [{ type: "stale", channel: sub.channel }];
        const [subscribed, pubs] = sub.apply(m, pending.sentRecover);
        return [
          { type: "subscribed", sub, subscribed },
          ...pubs.map((publication): CoreEvent => ({ type: "deliver", sub, publication })),
        ];
      }
    }
    return [{ type: "reply", reply: m }];
  }
}
