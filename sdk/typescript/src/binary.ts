/**
 * The binary encoding of docs/protocol.md §4: type byte, LEB128 varints,
 * length-prefixed strings and bytes, flag bytes.
 *
 * Decoders reject everything §4.1 lists (truncated, overlong and overflowing
 * varints, out-of-range values, bad UTF-8, counts the buffer cannot hold,
 * undefined flag bits, trailing bytes), so every message has exactly one
 * encoding. Varints are read exactly up to u64 (with `BigInt` past 2^53) and
 * offsets above 2^53 are refused as `invalid` rather than rounded: servers keep
 * offsets below 2^53 (§2), so a larger one is a broken server.
 */

import { fromUtf8, utf8 } from "./bytes.js";
import { attrsOrEmpty, isJson, isJsonObject } from "./json.js";
import { DecodeError } from "./errors.js";
import {
  OFFSET_MAX,
  U16_MAX,
  U32_MAX,
  type ClientInfo,
  type Command,
  type Item,
  type Position,
  type ServerMessage,
  type TableEntry,
  SEAT_STATUSES,
} from "./messages.js";

// --------------------------------------------------------------- writing --

class Writer {
  private buf = new Uint8Array(64);
  private len = 0;

  private room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  u8(b: number): this {
    this.room(1);
    this.buf[this.len++] = b;
    return this;
  }

  varint(n: number): this {
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`not a u53: ${n}`);
    while (n >= 0x80) {
      this.u8((n % 0x80) | 0x80);
      n = Math.floor(n / 0x80);
    }
    return this.u8(n);
  }

  bytes(b: Uint8Array): this {
    this.varint(b.length);
    this.room(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
    return this;
  }

  str(s: string): this {
    return this.bytes(utf8(s));
  }

  done(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

function writeItems(w: Writer, list: Item[]): void {
  w.varint(list.length);
  for (const it of list) w.varint(it.offset).bytes(it.data);
}

function writeTables(w: Writer, tables: TableEntry[]): void {
  w.varint(tables.length);
  for (const t of tables) {
    w.varint(t.table).str(t.path).varint(t.seats).varint(t.players).varint(t.watchers).bytes(attrsOrEmpty(t.attrs));
  }
}

function writePos(w: Writer, p: Position | null): void {
  if (p !== null) w.str(p.epoch).varint(p.offset);
}

/** The binary encoding of any message. */
export function encodeBinary(m: Command | ServerMessage): Uint8Array {
  const w = new Writer();
  switch (m.type) {
    case "connect":
      w.u8(0x01).varint(m.id).u8((m.token !== null ? 1 : 0) | (m.name !== null ? 2 : 0));
      if (m.token !== null) w.str(m.token);
      if (m.name !== null) w.str(m.name);
      break;
    case "subscribe":
      w.u8(0x02).varint(m.id)
        .u8((m.recover !== null ? 1 : 0) | (m.joinLeave ? 2 : 0) | (m.token !== null ? 4 : 0))
        .str(m.channel);
      writePos(w, m.recover);
      if (m.token !== null) w.str(m.token);
      break;
    case "unsubscribe":
      w.u8(0x03).varint(m.id).str(m.channel);
      break;
    case "publish":
      w.u8(0x04).varint(m.id).str(m.channel).bytes(m.data);
      break;
    case "ping":
      w.u8(0x05).varint(m.id);
      break;
    case "history":
      w.u8(0x06).varint(m.id).u8(m.since !== null ? 1 : 0).str(m.channel).varint(m.limit);
      writePos(w, m.since);
      break;
    case "presence":
      w.u8(0x07).varint(m.id).str(m.channel);
      break;
    case "presenceStats":
      w.u8(0x08).varint(m.id).str(m.channel);
      break;
    case "lobby":
      w.u8(0x09).varint(m.id).str(m.path);
      break;
    case "lobbyOff":
      w.u8(0x0a).varint(m.id).str(m.path);
      break;
    case "sit":
      w.u8(0x0b).varint(m.id).u8(m.seat !== null ? 1 : 0).varint(m.table);
      if (m.seat !== null) w.varint(m.seat);
      w.bytes(m.data);
      break;
    case "watch":
      w.u8(0x0c).varint(m.id).varint(m.table);
      break;
    case "stand":
      w.u8(0x0d).varint(m.id).varint(m.table);
      break;
    case "act":
      w.u8(0x0e).varint(m.id).varint(m.table).bytes(m.data);
      break;
    case "play":
      w.u8(0x0f).varint(m.id)
        .u8((m.seats !== null ? 1 : 0) | (m.private ? 2 : 0) | (m.code !== null ? 4 : 0))
        .str(m.game);
      if (m.seats !== null) w.varint(m.seats);
      w.bytes(attrsOrEmpty(m.attrs));
      if (m.code !== null) w.str(m.code);
      w.bytes(m.data);
      break;
    case "lobbyReply":
      w.u8(0x89).varint(m.id).varint(m.seq);
      writeTables(w, m.tables);
      break;
    case "lobbyOffReply":
      w.u8(0x8a).varint(m.id);
      break;
    case "sitReply":
      w.u8(0x8b).varint(m.id).varint(m.seat).bytes(m.data);
      break;
    case "watchReply":
      w.u8(0x8c).varint(m.id).bytes(m.data);
      break;
    case "standReply":
      w.u8(0x8d).varint(m.id);
      break;
    case "actReply":
      w.u8(0x8e).varint(m.id);
      break;
    case "playReply":
      w.u8(0x8f).varint(m.id).u8((m.code !== null ? 1 : 0) | (m.created ? 2 : 0)).varint(m.table).varint(m.seat);
      if (m.code !== null) w.str(m.code);
      w.bytes(m.data);
      break;
    case "lobbyUpdate":
      w.u8(0xa5).str(m.path).varint(m.seq);
      writeTables(w, m.tables);
      w.varint(m.removed.length);
      for (const t of m.removed) w.varint(t);
      break;
    case "lobbyPage":
      w.u8(0xa9).str(m.path);
      writeTables(w, m.tables);
      break;
    case "game":
      w.u8(0xa6).varint(m.table).bytes(m.data);
      break;
    case "seat":
      w.u8(0xa7).varint(m.table).varint(m.seat).str(m.user).u8(SEAT_STATUSES.indexOf(m.status));
      break;
    case "unseat":
      w.u8(0xa8).varint(m.table).varint(m.code).str(m.reason);
      break;
    case "connectReply":
      w.u8(0x81).varint(m.id).str(m.client).str(m.version).varint(m.pingInterval);
      break;
    case "subscribeReply":
      w.u8(0x82).varint(m.id).u8(m.recovered ? 1 : 0).str(m.epoch).varint(m.offset);
      writeItems(w, m.publications);
      break;
    case "unsubscribeReply":
      w.u8(0x83).varint(m.id);
      break;
    case "publishReply":
      w.u8(0x84).varint(m.id).str(m.epoch).varint(m.offset);
      break;
    case "pingReply":
      w.u8(0x85).varint(m.id);
      break;
    case "historyReply":
      w.u8(0x86).varint(m.id).str(m.epoch).varint(m.offset);
      writeItems(w, m.publications);
      break;
    case "presenceReply":
      w.u8(0x87).varint(m.id).varint(m.clients.length);
      for (const c of m.clients) w.str(c.client).str(c.user).bytes(c.info);
      break;
    case "presenceStatsReply":
      w.u8(0x88).varint(m.id).varint(m.clients).varint(m.users);
      break;
    case "error":
      w.u8(0xe0).varint(m.id).varint(m.code).str(m.message);
      break;
    case "publication":
      w.u8(0xa0).str(m.channel).varint(m.offset).bytes(m.data);
      break;
    case "join":
    case "leave":
      w.u8(m.type === "join" ? 0xa1 : 0xa2).str(m.channel).str(m.client).str(m.user).bytes(m.info);
      break;
    case "unsubscribed":
      w.u8(0xa3).str(m.channel).varint(m.code).str(m.reason);
      break;
    case "disconnect":
      w.u8(0xa4).varint(m.code).str(m.reason);
      break;
  }
  return w.done();
}

// --------------------------------------------------------------- reading --

class Reader {
  private i = 0;
  id = 0;
  constructor(private readonly b: Uint8Array) {}

  private malformed(why: string): DecodeError {
    return new DecodeError("malformed", why, this.id);
  }

  invalidStatus(): DecodeError {
    return this.invalid("seat status is not 0..3");
  }

  private invalid(why: string): DecodeError {
    return new DecodeError("invalid", why, this.id);
  }

  u8(): number {
    const x = this.b[this.i];
    if (x === undefined) throw this.malformed("truncated");
    this.i++;
    return x;
  }

  /** An unsigned LEB128 varint up to u64, exactly. */
  varint(): bigint | number {
    let n = 0;
    let big: bigint | null = null;
    for (let k = 0; ; k++) {
      if (k === 10) throw this.malformed("varint longer than 10 bytes");
      const x = this.b[this.i];
      if (x === undefined) throw this.malformed("truncated varint");
      this.i++;
      const part = x & 0x7f;
      if (k === 9 && x > 0x01) throw this.malformed("varint overflows u64");
      if (k > 0 && x === 0) throw this.malformed("overlong varint");
      if (k < 7 && big === null) {
        n += part * 2 ** (7 * k);
      } else {
        big ??= BigInt(n);
        big += BigInt(part) << BigInt(7 * k);
      }
      if ((x & 0x80) === 0) break;
    }
    return big ?? n;
  }

  uint(limit: number, what: string): number {
    const v = this.varint();
    if (typeof v === "bigint" ? v > BigInt(limit) : v > limit) {
      throw this.invalid(
        `${what} out of range${limit === OFFSET_MAX ? " (offsets above 2^53 cannot be held exactly in JavaScript)" : ""}`,
      );
    }
    return Number(v);
  }

  /** A length or count that the remaining bytes must be able to hold,
   * `min` bytes per unit. */
  len(min: number): number {
    const v = this.varint();
    const left = this.b.length - this.i;
    if (typeof v === "bigint" || v * min > left) throw this.malformed("length beyond the message");
    return v;
  }

  bytes(): Uint8Array {
    const n = this.len(1);
    const out = this.b.slice(this.i, this.i + n);
    this.i += n;
    return out;
  }

  /** Connection info: JSON text, or empty for none. */
  info(): Uint8Array {
    const b = this.bytes();
    if (b.length > 0 && !isJson(b)) throw this.invalid("info is not JSON text");
    return b;
  }

  str(): string {
    const s = fromUtf8(this.bytes());
    if (s === null) throw this.invalid("string is not valid UTF-8");
    return s;
  }

  flags(allowed: number): number {
    const f = this.u8();
    if (f & ~allowed) throw this.malformed("undefined flag bit");
    return f;
  }

  offset(): number {
    return this.uint(OFFSET_MAX, "offset");
  }

  pos(): Position {
    const epoch = this.str();
    return { epoch, offset: this.offset() };
  }

  items(): Item[] {
    const n = this.len(2);
    const out: Item[] = [];
    for (let k = 0; k < n; k++) {
      const offset = this.offset();
      out.push({ offset, data: this.bytes() });
    }
    return out;
  }

  /** A lobby entry count (8 bytes per entry at least, §4.1) and entries. */
  tables(): TableEntry[] {
    const n = this.len(8);
    const out: TableEntry[] = [];
    for (let k = 0; k < n; k++) {
      const table = this.offset();
      const path = this.str();
      const seats = this.uint(U32_MAX, "seats");
      const players = this.uint(U32_MAX, "players");
      const watchers = this.uint(U32_MAX, "watchers");
      const attrs = this.attrs();
      out.push({ table, path, seats, players, watchers, attrs });
    }
    return out;
  }

  /** Attributes: a JSON object's text. */
  attrs(): Uint8Array {
    const attrs = this.bytes();
    if (!isJsonObject(attrs)) throw this.invalid("attrs is not a JSON object");
    return attrs;
  }

  readId(): number {
    this.id = this.uint(U32_MAX, "id");
    return this.id;
  }

  end(): void {
    if (this.i !== this.b.length) throw this.malformed("bytes after the last field");
  }
}

function finish<T>(r: Reader, m: T): T {
  r.end();
  return m;
}

/** Decodes a client → server message (a command). */
export function decodeBinaryCommand(b: Uint8Array): Command {
  const r = new Reader(b);
  if (b.length === 0) throw new DecodeError("malformed", "empty message");
  const t = r.u8();
  if (t < 0x01 || t > 0x0f) throw new DecodeError("unknown", `unknown command type 0x${t.toString(16)}`);
  const id = r.readId();
  switch (t) {
    case 0x01: {
      const f = r.flags(0b11);
      const token = f & 1 ? r.str() : null;
      const name = f & 2 ? r.str() : null;
      return finish(r, { type: "connect", id, token, name });
    }
    case 0x02: {
      const f = r.flags(0b111);
      const channel = r.str();
      const recover = f & 1 ? r.pos() : null;
      const token = f & 4 ? r.str() : null;
      return finish(r, { type: "subscribe", id, channel, recover, joinLeave: (f & 2) !== 0, token });
    }
    case 0x03:
      return finish(r, { type: "unsubscribe", id, channel: r.str() });
    case 0x04: {
      const channel = r.str();
      return finish(r, { type: "publish", id, channel, data: r.bytes() });
    }
    case 0x05:
      return finish(r, { type: "ping", id });
    case 0x06: {
      const f = r.flags(0b1);
      const channel = r.str();
      const limit = r.uint(U32_MAX, "limit");
      const since = f & 1 ? r.pos() : null;
      return finish(r, { type: "history", id, channel, since, limit });
    }
    case 0x07:
      return finish(r, { type: "presence", id, channel: r.str() });
    case 0x08:
      return finish(r, { type: "presenceStats", id, channel: r.str() });
    case 0x09:
      return finish(r, { type: "lobby", id, path: r.str() });
    case 0x0a:
      return finish(r, { type: "lobbyOff", id, path: r.str() });
    case 0x0b: {
      const f = r.flags(0b1);
      const table = r.offset();
      const seat = f & 1 ? r.uint(U32_MAX, "seat") : null;
      return finish(r, { type: "sit", id, table, seat, data: r.bytes() });
    }
    case 0x0c:
      return finish(r, { type: "watch", id, table: r.offset() });
    case 0x0d:
      return finish(r, { type: "stand", id, table: r.offset() });
    case 0x0e: {
      const table = r.offset();
      return finish(r, { type: "act", id, table, data: r.bytes() });
    }
    default: {
      const f = r.flags(0b111);
      const game = r.str();
      const seats = f & 1 ? r.uint(U32_MAX, "seats") : null;
      const attrs = r.attrs();
      const code = f & 4 ? r.str() : null;
      return finish(r, { type: "play", id, game, seats, attrs, private: (f & 2) !== 0, code, data: r.bytes() });
    }
  }
}

/** Decodes a server → client message (a reply, an error or a push). */
export function decodeBinaryServer(b: Uint8Array): ServerMessage {
  const r = new Reader(b);
  if (b.length === 0) throw new DecodeError("malformed", "empty message");
  const t = r.u8();
  switch (t) {
    case 0x81: {
      const id = r.readId();
      const client = r.str();
      const version = r.str();
      return finish(r, { type: "connectReply", id, client, version, pingInterval: r.uint(U32_MAX, "ping_interval") });
    }
    case 0x82: {
      const id = r.readId();
      const f = r.flags(0b1);
      const epoch = r.str();
      const offset = r.offset();
      return finish(r, { type: "subscribeReply", id, epoch, offset, recovered: (f & 1) !== 0, publications: r.items() });
    }
    case 0x83:
      return finish(r, { type: "unsubscribeReply", id: r.readId() });
    case 0x84: {
      const id = r.readId();
      const epoch = r.str();
      return finish(r, { type: "publishReply", id, epoch, offset: r.offset() });
    }
    case 0x85:
      return finish(r, { type: "pingReply", id: r.readId() });
    case 0x86: {
      const id = r.readId();
      const epoch = r.str();
      const offset = r.offset();
      return finish(r, { type: "historyReply", id, epoch, offset, publications: r.items() });
    }
    case 0x87: {
      const id = r.readId();
      const n = r.len(2);
      const clients: ClientInfo[] = [];
      for (let k = 0; k < n; k++) {
        const client = r.str();
        const user = r.str();
        clients.push({ client, user, info: r.info() });
      }
      return finish(r, { type: "presenceReply", id, clients });
    }
    case 0x88: {
      const id = r.readId();
      const clients = r.uint(OFFSET_MAX, "clients");
      return finish(r, { type: "presenceStatsReply", id, clients, users: r.uint(OFFSET_MAX, "users") });
    }
    case 0xe0: {
      const id = r.readId();
      const code = r.uint(U16_MAX, "code");
      return finish(r, { type: "error", id, code, message: r.str() });
    }
    case 0xa0: {
      const channel = r.str();
      const offset = r.offset();
      return finish(r, { type: "publication", channel, offset, data: r.bytes() });
    }
    case 0xa1:
    case 0xa2: {
      const channel = r.str();
      const client = r.str();
      const user = r.str();
      return finish(r, { type: t === 0xa1 ? "join" : "leave", channel, client, user, info: r.info() });
    }
    case 0xa3: {
      const channel = r.str();
      const code = r.uint(U16_MAX, "code");
      return finish(r, { type: "unsubscribed", channel, code, reason: r.str() });
    }
    case 0xa4: {
      const code = r.uint(U16_MAX, "code");
      return finish(r, { type: "disconnect", code, reason: r.str() });
    }
    case 0x89: {
      const id = r.readId();
      const seq = r.offset();
      return finish(r, { type: "lobbyReply", id, seq, tables: r.tables() });
    }
    case 0x8a:
      return finish(r, { type: "lobbyOffReply", id: r.readId() });
    case 0x8b: {
      const id = r.readId();
      const seat = r.uint(U32_MAX, "seat");
      return finish(r, { type: "sitReply", id, seat, data: r.bytes() });
    }
    case 0x8c: {
      const id = r.readId();
      return finish(r, { type: "watchReply", id, data: r.bytes() });
    }
    case 0x8d:
      return finish(r, { type: "standReply", id: r.readId() });
    case 0x8e:
      return finish(r, { type: "actReply", id: r.readId() });
    case 0x8f: {
      const id = r.readId();
      const f = r.flags(0b11);
      const table = r.offset();
      const seat = r.uint(U32_MAX, "seat");
      const code = f & 1 ? r.str() : null;
      return finish(r, { type: "playReply", id, table, seat, code, created: (f & 2) !== 0, data: r.bytes() });
    }
    case 0xa5: {
      const path = r.str();
      const seq = r.offset();
      const tables = r.tables();
      const n = r.len(1);
      const removed: number[] = [];
      for (let k = 0; k < n; k++) removed.push(r.offset());
      return finish(r, { type: "lobbyUpdate", path, seq, tables, removed });
    }
    case 0xa6: {
      const table = r.offset();
      return finish(r, { type: "game", table, data: r.bytes() });
    }
    case 0xa7: {
      const table = r.offset();
      const seat = r.uint(U32_MAX, "seat");
      const user = r.str();
      const status = SEAT_STATUSES[r.u8()];
      if (status === undefined) throw r.invalidStatus();
      return finish(r, { type: "seat", table, seat, user, status });
    }
    case 0xa8: {
      const table = r.offset();
      const code = r.uint(U16_MAX, "code");
      return finish(r, { type: "unseat", table, code, reason: r.str() });
    }
    case 0xa9: {
      const path = r.str();
      return finish(r, { type: "lobbyPage", path, tables: r.tables() });
    }
    default:
      throw new DecodeError("unknown", `unknown server message type 0x${t.toString(16)}`);
  }
}
