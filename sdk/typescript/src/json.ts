/**
 * The JSON encoding of docs/protocol.md §3: one message <-> one text.
 *
 * Why a hand-written reader instead of `JSON.parse`: the protocol needs three
 * things `JSON.parse` does not give — the *exact text* of each `data` payload
 * (§3.3: payloads are bytes, never re-serialized, and numbers such as
 * `1.0` or big integers must survive untouched), duplicate keys seen rather
 * than silently merged (§3.1), and integers told apart from fractions and
 * exponents. So {@link Parser} keeps every key/value pair of an object in
 * order with the span of the value's text.
 *
 * The encoder writes the canonical form of §3.4 (key order of §3.2, no
 * whitespace, minimal escaping — exactly what `JSON.stringify` does for
 * strings), and embeds a payload verbatim iff it is exactly one JSON value
 * ({@link isJson}), else writes it as `"b64"`.
 */

import { fromBase64, fromUtf8, hasLoneSurrogate, toBase64, utf8 } from "./bytes.js";
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
  type SeatStatus,
  type TableEntry,
  SEAT_STATUSES,
} from "./messages.js";

/** Deepest nesting a payload may have to be embedded verbatim; deeper (but
 * valid) payloads are written as b64, as the Rust encoder does (§3.3 allows it). */
export const MAX_DEPTH = 128;

// ------------------------------------------------------------- JSON text --

type Value = JStr | JNum | JObj | JArr | JSkipped | boolean | null;
interface JStr { k: "str"; v: string }
interface JNum { k: "num"; text: string; isInt: boolean }
interface JObj { k: "obj"; pairs: Array<[key: string, value: Value, start: number, end: number]> }
interface JArr { k: "arr"; items: Value[] }
/** A payload (`"data"`): checked to be valid JSON, kept only as its span. */
interface JSkipped { k: "skipped" }
const SKIPPED: JSkipped = { k: "skipped" };

class SyntaxFail extends Error {}

const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/y;
/** The next character a string scanner must look at: quote, backslash, control. */
const ESCAPE_OR_END = /["\\\x00-\x1f]/g;

/** Reads one JSON text (RFC 8259); throws {@link SyntaxFail} on any error.
 * `maxDepth` is the deepest array/object nesting seen. */
export class Parser {
  maxDepth = 0;
  constructor(private readonly s: string) {}

  private ws(i: number): number {
    const s = this.s;
    while (i < s.length) {
      const c = s.charCodeAt(i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      i++;
    }
    return i;
  }

  private str(i: number): [string, number] {
    // i is just after the opening quote.
    const s = this.s;
    let out = "";
    let run = i;
    while (true) {
      if (i >= s.length) throw new SyntaxFail("unterminated string");
      const c = s.charCodeAt(i);
      if (c === 0x22) {
        return [out + s.slice(run, i), i + 1];
      }
      if (c < 0x20) throw new SyntaxFail("control character in string");
      if (c !== 0x5c) {
        i++;
        continue;
      }
      out += s.slice(run, i);
      const e = s[i + 1];
      switch (e) {
        case '"': out += '"'; break;
        case "\\": out += "\\"; break;
        case "/": out += "/"; break;
        case "b": out += "\b"; break;
        case "f": out += "\f"; break;
        case "n": out += "\n"; break;
        case "r": out += "\r"; break;
        case "t": out += "\t"; break;
        case "u": {
          const hex = s.slice(i + 2, i + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) throw new SyntaxFail("bad \\u escape");
          out += String.fromCharCode(parseInt(hex, 16));
          i += 4;
          break;
        }
        default:
          throw new SyntaxFail("bad escape");
      }
      i += 2;
      run = i;
    }
  }

  /** Checks one value without building it (payloads are kept as text
   * spans, so only their validity and depth matter); returns its end. */
  skip(i: number, depth: number): number {
    const s = this.s;
    const c = s.charCodeAt(i);
    if (c === 0x22) return this.skipStr(i + 1);
    if (c === 0x7b || c === 0x5b) {
      const close = c === 0x7b ? "}" : "]";
      depth++;
      if (depth > this.maxDepth) this.maxDepth = depth;
      i = this.ws(i + 1);
      if (s[i] === close) return i + 1;
      for (;;) {
        if (close === "}") {
          if (s[i] !== '"') throw new SyntaxFail("expected a key");
          i = this.ws(this.skipStr(i + 1));
          if (s[i] !== ":") throw new SyntaxFail("expected ':'");
          i = this.ws(i + 1);
        }
        if (i >= s.length) throw new SyntaxFail("unexpected end");
        i = this.ws(this.skip(i, depth));
        if (s[i] === ",") i = this.ws(i + 1);
        else if (s[i] === close) return i + 1;
        else throw new SyntaxFail(`expected ',' or '${close}'`);
      }
    }
    if (s.startsWith("true", i)) return i + 4;
    if (s.startsWith("false", i)) return i + 5;
    if (s.startsWith("null", i)) return i + 4;
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(s);
    if (m === null) throw new SyntaxFail(`unexpected character at ${i}`);
    return i + m[0].length;
  }

  private skipStr(i: number): number {
    const s = this.s;
    for (;;) {
      ESCAPE_OR_END.lastIndex = i;
      const m = ESCAPE_OR_END.exec(s);
      if (m === null) throw new SyntaxFail("unterminated string");
      i = m.index;
      const c = s.charCodeAt(i);
      if (c === 0x22) return i + 1;
      if (c < 0x20) throw new SyntaxFail("control character in string");
      const e = s[i + 1];
      if (e === "u") {
        if (!/^[0-9a-fA-F]{4}$/.test(s.slice(i + 2, i + 6))) throw new SyntaxFail("bad \\u escape");
        i += 6;
      } else if (e !== undefined && '"\\/bfnrt'.includes(e)) {
        i += 2;
      } else {
        throw new SyntaxFail("bad escape");
      }
    }
  }

  private value(i: number, depth: number): [Value, number] {
    const s = this.s;
    if (i >= s.length) throw new SyntaxFail("unexpected end");
    const c = s[i];
    if (c === '"') {
      const [v, end] = this.str(i + 1);
      return [{ k: "str", v }, end];
    }
    if (c === "{") return this.obj(i + 1, depth + 1);
    if (c === "[") return this.arr(i + 1, depth + 1);
    if (s.startsWith("true", i)) return [true, i + 4];
    if (s.startsWith("false", i)) return [false, i + 5];
    if (s.startsWith("null", i)) return [null, i + 4];
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(s);
    if (m === null) throw new SyntaxFail(`unexpected character at ${i}`);
    return [{ k: "num", text: m[0], isInt: m[1] === undefined && m[2] === undefined }, i + m[0].length];
  }

  private obj(i: number, depth: number): [JObj, number] {
    if (depth > this.maxDepth) this.maxDepth = depth;
    const s = this.s;
    const pairs: JObj["pairs"] = [];
    i = this.ws(i);
    if (s[i] === "}") return [{ k: "obj", pairs }, i + 1];
    for (;;) {
      if (s[i] !== '"') throw new SyntaxFail("expected a key");
      const [key, afterKey] = this.str(i + 1);
      i = this.ws(afterKey);
      if (s[i] !== ":") throw new SyntaxFail("expected ':'");
      const start = this.ws(i + 1);
      if (start >= s.length) throw new SyntaxFail("unexpected end");
      // Payloads are opaque: checked, kept as their text span only.
      const [v, end] = key === "data" ? [SKIPPED, this.skip(start, depth)] : this.value(start, depth);
      pairs.push([key, v, start, end]);
      i = this.ws(end);
      if (s[i] === ",") i = this.ws(i + 1);
      else if (s[i] === "}") return [{ k: "obj", pairs }, i + 1];
      else throw new SyntaxFail("expected ',' or '}'");
    }
  }

  private arr(i: number, depth: number): [JArr, number] {
    if (depth > this.maxDepth) this.maxDepth = depth;
    const s = this.s;
    const items: Value[] = [];
    i = this.ws(i);
    if (s[i] === "]") return [{ k: "arr", items }, i + 1];
    for (;;) {
      const [v, end] = this.value(i, depth);
      items.push(v);
      i = this.ws(end);
      if (s[i] === ",") i = this.ws(i + 1);
      else if (s[i] === "]") return [{ k: "arr", items }, i + 1];
      else throw new SyntaxFail("expected ',' or ']'");
    }
  }

  /** Checks that the whole text is one value, without building it. */
  check(): Value {
    const start = this.ws(0);
    if (start >= this.s.length) throw new SyntaxFail("unexpected end");
    if (this.ws(this.skip(start, 0)) !== this.s.length) throw new SyntaxFail("trailing characters");
    return SKIPPED;
  }

  /** The whole text as one value (whitespace around it allowed). */
  document(): Value {
    const [v, end] = this.value(this.ws(0), 0);
    if (this.ws(end) !== this.s.length) throw new SyntaxFail("trailing characters");
    return v;
  }
}

/** Parses `text`, or `null` if it is not one JSON value (deep nesting that
 * exhausts the stack counts as not JSON). */
function tryParse(text: string, build = true): { value: Value; depth: number } | null {
  try {
    const p = new Parser(text);
    const value = build ? p.document() : p.check();
    return { value, depth: p.maxDepth };
  } catch (e) {
    if (e instanceof SyntaxFail || e instanceof RangeError) return null;
    throw e;
  }
}

/** Whether payload bytes are exactly one JSON value (RFC 8259), valid UTF-8,
 * with no whitespace before or after, nested at most {@link MAX_DEPTH} deep:
 * such payloads are embedded verbatim as `"data"`, all others go as b64. */
export function isJson(data: Uint8Array): boolean {
  if (data.length === 0) return false;
  const ws = (b: number) => b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;
  if (ws(data[0]!) || ws(data[data.length - 1]!)) return false;
  const text = fromUtf8(data);
  if (text === null) return false;
  const r = tryParse(text, false);
  return r !== null && r.depth <= MAX_DEPTH;
}

const EMPTY_OBJECT = new Uint8Array([0x7b, 0x7d]);

/** What attrs (a lobby entry's, `play`'s) are written as: the text when it is a JSON
 * object (all decoders accept), else `{}` (as the Rust encoder does). */
export function attrsOrEmpty(attrs: Uint8Array): Uint8Array {
  return isJsonObject(attrs) ? attrs : EMPTY_OBJECT;
}

/** Whether bytes are one JSON object with nothing around it. */
export function isJsonObject(b: Uint8Array): boolean {
  return b[0] === 0x7b && isJson(b);
}

// ------------------------------------------------------------- encoding --

const s = (v: string): string => JSON.stringify(v);

function payload(data: Uint8Array): string {
  if (isJson(data)) return `"data":${fromUtf8(data)}`;
  return `"b64":"${toBase64(data)}"`;
}

const pos = (p: Position): string => `{"epoch":${s(p.epoch)},"offset":${p.offset}}`;
/** `,"info":<json>` when there is connection info (JSON text only). */
const info = (b: Uint8Array): string => (b.length > 0 && isJson(b) ? `,"info":${fromUtf8(b)}` : "");
/** Lobby entries; attrs verbatim when a JSON object, else `{}` (§3.4). */
const tables = (list: TableEntry[]): string =>
  list.map((t) =>
    `{"table":${t.table},"path":${s(t.path)},"seats":${t.seats},"players":${t.players},"watchers":${t.watchers},"attrs":${
      fromUtf8(attrsOrEmpty(t.attrs))}}`).join(",");
/** An empty JSON object's text (whitespace allowed): `play` leaves such attrs out. */
const EMPTY_OBJECT_TEXT = /^[ \t\r\n{}]*$/;
const items = (list: Item[]): string => list.map((it) => `{"offset":${it.offset},${payload(it.data)}}`).join(",");

function body(m: Command | ServerMessage): [number, string, string] {
  switch (m.type) {
    case "connect": {
      const parts: string[] = [];
      if (m.token !== null) parts.push(`"token":${s(m.token)}`);
      if (m.name !== null) parts.push(`"name":${s(m.name)}`);
      return [m.id, "connect", parts.join(",")];
    }
    case "subscribe": {
      let b = `"channel":${s(m.channel)}`;
      if (m.recover !== null) b += `,"recover":${pos(m.recover)}`;
      if (m.joinLeave) b += `,"join_leave":true`;
      if (m.token !== null) b += `,"token":${s(m.token)}`;
      return [m.id, "subscribe", b];
    }
    case "unsubscribe":
      return [m.id, "unsubscribe", `"channel":${s(m.channel)}`];
    case "publish":
      return [m.id, "publish", `"channel":${s(m.channel)},${payload(m.data)}`];
    case "ping":
      return [m.id, "ping", ""];
    case "history": {
      let b = `"channel":${s(m.channel)}`;
      if (m.since !== null) b += `,"since":${pos(m.since)}`;
      if (m.limit) b += `,"limit":${m.limit}`;
      return [m.id, "history", b];
    }
    case "presence":
      return [m.id, "presence", `"channel":${s(m.channel)}`];
    case "presenceStats":
      return [m.id, "presence_stats", `"channel":${s(m.channel)}`];
    case "connectReply":
      return [m.id, "connect", `"client":${s(m.client)},"version":${s(m.version)},"ping_interval":${m.pingInterval}`];
    case "subscribeReply": {
      let b = `"epoch":${s(m.epoch)},"offset":${m.offset}`;
      if (m.recovered) b += `,"recovered":true`;
      if (m.publications.length) b += `,"publications":[${items(m.publications)}]`;
      return [m.id, "subscribe", b];
    }
    case "unsubscribeReply":
      return [m.id, "unsubscribe", ""];
    case "publishReply":
      return [m.id, "publish", `"epoch":${s(m.epoch)},"offset":${m.offset}`];
    case "pingReply":
      return [m.id, "ping", ""];
    case "historyReply":
      return [m.id, "history", `"epoch":${s(m.epoch)},"offset":${m.offset},"publications":[${items(m.publications)}]`];
    case "presenceReply":
      return [m.id, "presence", `"clients":[${m.clients.map((c) => `{"client":${s(c.client)},"user":${s(c.user)}${info(c.info)}}`).join(",")}]`];
    case "presenceStatsReply":
      return [m.id, "presence_stats", `"clients":${m.clients},"users":${m.users}`];
    case "error":
      return [m.id, "error", `"code":${m.code},"message":${s(m.message)}`];
    case "publication":
      return [0, "pub", `"channel":${s(m.channel)},"offset":${m.offset},${payload(m.data)}`];
    case "join":
    case "leave":
      return [0, m.type, `"channel":${s(m.channel)},"client":${s(m.client)},"user":${s(m.user)}${info(m.info)}`];
    case "unsubscribed":
      return [0, "unsub", `"channel":${s(m.channel)},"code":${m.code},"reason":${s(m.reason)}`];
    case "disconnect":
      return [0, "disconnect", `"code":${m.code},"reason":${s(m.reason)}`];
    case "lobby":
    case "lobbyOff":
      return [m.id, m.type === "lobby" ? "lobby" : "lobby_off", m.path ? `"path":${s(m.path)}` : ""];
    case "sit": {
      let b = `"table":${m.table}`;
      if (m.seat !== null) b += `,"seat":${m.seat}`;
      if (m.data.length) b += `,${payload(m.data)}`;
      return [m.id, "sit", b];
    }
    case "watch":
    case "stand":
      return [m.id, m.type, `"table":${m.table}`];
    case "act":
      return [m.id, "act", `"table":${m.table},${payload(m.data)}`];
    case "play": {
      // Every field optional, written in §3.2's order; attrs only when not `{}`.
      const parts: string[] = [];
      if (m.game) parts.push(`"game":${s(m.game)}`);
      if (m.seats !== null) parts.push(`"seats":${m.seats}`);
      const attrs = attrsOrEmpty(m.attrs);
      if (!EMPTY_OBJECT_TEXT.test(fromUtf8(attrs)!)) parts.push(`"attrs":${fromUtf8(attrs)}`);
      if (m.private) parts.push(`"private":true`);
      if (m.code !== null) parts.push(`"code":${s(m.code)}`);
      if (m.data.length) parts.push(payload(m.data));
      return [m.id, "play", parts.join(",")];
    }
    case "lobbyReply":
      return [m.id, "lobby", `"seq":${m.seq},"tables":[${tables(m.tables)}]`];
    case "lobbyOffReply":
      return [m.id, "lobby_off", ""];
    case "sitReply":
      return [m.id, "sit", `"seat":${m.seat},${payload(m.data)}`];
    case "watchReply":
      return [m.id, "watch", payload(m.data)];
    case "standReply":
      return [m.id, "stand", ""];
    case "actReply":
      return [m.id, "act", ""];
    case "playReply": {
      let b = `"table":${m.table},"seat":${m.seat}`;
      if (m.code !== null) b += `,"code":${s(m.code)}`;
      if (m.created) b += `,"created":true`;
      return [m.id, "play", `${b},${payload(m.data)}`];
    }
    case "lobbyUpdate":
      return [0, "lobby_update", `"path":${s(m.path)},"seq":${m.seq},"tables":[${tables(m.tables)}],"removed":[${m.removed.join(",")}]`];
    case "lobbyPage":
      return [0, "lobby_page", `"path":${s(m.path)},"tables":[${tables(m.tables)}]`];
    case "game":
      return [0, "game", `"table":${m.table},${payload(m.data)}`];
    case "seat":
      return [0, "seat", `"table":${m.table},"seat":${m.seat},"user":${s(m.user)},"status":"${m.status}"`];
    case "unseat":
      return [0, "unseat", `"table":${m.table},"code":${m.code},"reason":${s(m.reason)}`];
  }
}

/** The canonical JSON text (§3.4) of any message. */
export function encodeJson(m: Command | ServerMessage): string {
  const [id, op, b] = body(m);
  return id ? `{"id":${id},"${op}":{${b}}}` : `{"${op}":{${b}}}`;
}

// ------------------------------------------------------------- decoding --

const COMMANDS: ReadonlySet<string> = new Set([
  "connect", "subscribe", "unsubscribe", "publish", "ping", "history", "presence", "presence_stats",
  "lobby", "lobby_off", "sit", "watch", "stand", "act", "play",
]);
const SERVER_OPS: ReadonlySet<string> = new Set([
  ...COMMANDS, "error", "pub", "join", "leave", "unsub", "disconnect", "lobby_update", "lobby_page", "game", "seat", "unseat",
]);

/** Whether a non-negative integer's text is at most `limit` (exactly, also
 * past 2^53: short texts compare as numbers, long ones as BigInt). */
function fits(text: string, limit: number): boolean {
  return text.length <= 15 ? Number(text) <= limit : BigInt(text) <= BigInt(limit);
}

/** The fields of one JSON object of the protocol, read with §3.1's rules;
 * failures carry the message id. */
class Fields {
  private readonly values = new Map<string, Value>();
  private readonly spans = new Map<string, [number, number]>();

  constructor(private readonly text: string, readonly id: number, obj: Value | undefined, what: string) {
    if (obj === null || obj === undefined || typeof obj !== "object" || obj.k !== "obj") {
      throw new DecodeError("invalid", `${what} is not an object`, id);
    }
    for (const [key, v, start, end] of obj.pairs) {
      if (this.values.has(key)) throw new DecodeError("malformed", `duplicate key "${key}" in ${what}`, id);
      this.values.set(key, v);
      this.spans.set(key, [start, end]);
    }
  }

  invalid(why: string): DecodeError {
    return new DecodeError("invalid", why, this.id);
  }

  present(key: string): boolean {
    const v = this.values.get(key);
    return v !== undefined && v !== null;
  }

  string(key: string): string {
    const v = this.values.get(key);
    if (v === undefined || v === null) throw this.invalid(`missing "${key}"`);
    if (typeof v !== "object" || v.k !== "str") throw this.invalid(`"${key}" is not a string`);
    if (hasLoneSurrogate(v.v)) throw this.invalid(`"${key}" holds a lone surrogate`);
    return v.v;
  }

  optString(key: string): string | null {
    return this.present(key) ? this.string(key) : null;
  }

  uint(key: string, limit: number, fallback?: number): number {
    const v = this.values.get(key);
    if (v === undefined || v === null) {
      if (fallback === undefined) throw this.invalid(`missing "${key}"`);
      return fallback;
    }
    if (typeof v !== "object" || v.k !== "num" || !v.isInt) throw this.invalid(`"${key}" is not an integer`);
    if (v.text.startsWith("-") || !fits(v.text, limit)) {
      throw this.invalid(`"${key}" out of range${limit === OFFSET_MAX ? " (offsets above 2^53 cannot be held exactly)" : ""}`);
    }
    return Number(v.text);
  }

  flag(key: string): boolean {
    const v = this.values.get(key);
    if (v === undefined || v === null) return false;
    if (typeof v !== "boolean") throw this.invalid(`"${key}" is not a boolean`);
    return v;
  }

  nested(key: string): Fields {
    return new Fields(this.text, this.id, this.values.get(key), `"${key}"`);
  }

  position(key: string): Position | null {
    if (!this.present(key)) return null;
    const p = this.nested(key);
    return { epoch: p.string("epoch"), offset: p.uint("offset", OFFSET_MAX) };
  }

  data(): Uint8Array {
    const hasData = this.values.has("data"); // null is a payload like any other
    const hasB64 = this.present("b64");
    if (hasData === hasB64) throw this.invalid(`exactly one of "data" and "b64" is required`);
    if (hasData) {
      const [start, end] = this.spans.get("data")!;
      const raw = this.text.slice(start, end);
      if (hasLoneSurrogate(raw)) throw this.invalid(`"data" holds a lone surrogate`);
      return utf8(raw);
    }
    const v = this.values.get("b64");
    if (typeof v !== "object" || v === null || v.k !== "str") throw this.invalid(`"b64" is not a string`);
    const raw = fromBase64(v.v);
    if (raw === null) throw this.invalid("bad or non-canonical base64");
    return raw;
  }

  /** Connection info: the raw JSON text of "info" (empty when absent or null). */
  info(): Uint8Array {
    if (!this.present("info")) return new Uint8Array(0);
    const [start, end] = this.spans.get("info")!;
    const raw = this.text.slice(start, end);
    if (hasLoneSurrogate(raw)) throw this.invalid(`"info" holds a lone surrogate`);
    return utf8(raw);
  }

  /** A payload that may be left out (absent = empty), as in `sit`. */
  optData(): Uint8Array {
    return this.values.has("data") || this.present("b64") ? this.data() : new Uint8Array(0);
  }

  /** A lobby entry's attrs: a JSON object, kept as its exact text. */
  attrs(): Uint8Array {
    const v = this.values.get("attrs");
    if (v === undefined || v === null) throw this.invalid(`missing "attrs"`);
    const [start, end] = this.spans.get("attrs")!;
    const raw = this.text.slice(start, end);
    if (typeof v !== "object" || v.k !== "obj") throw this.invalid(`"attrs" is not an object`);
    if (hasLoneSurrogate(raw)) throw this.invalid(`"attrs" holds a lone surrogate`);
    const bytes = utf8(raw);
    if (!isJson(bytes)) throw this.invalid(`"attrs" is not JSON this SDK can carry`);
    return bytes;
  }

  /** `play`'s attrs: absent = `{}`; present, a JSON object. */
  optAttrs(): Uint8Array {
    return this.values.has("attrs") ? this.attrs() : utf8("{}");
  }

  tables(key: string): TableEntry[] {
    return this.array(key, true).map((raw) => {
      const f = new Fields(this.text, this.id, raw, "lobby entry");
      return {
        table: f.uint("table", OFFSET_MAX), path: f.string("path"), seats: f.uint("seats", U32_MAX),
        players: f.uint("players", U32_MAX), watchers: f.uint("watchers", U32_MAX), attrs: f.attrs(),
      };
    });
  }

  status(key: string): SeatStatus {
    const v = this.string(key);
    const found = SEAT_STATUSES.find((x) => x === v);
    if (found === undefined) throw this.invalid(`"${key}" is not sat, left, away or back`);
    return found;
  }

  array(key: string, required: boolean): Value[] {
    const v = this.values.get(key);
    if (v === undefined || v === null) {
      if (required) throw this.invalid(`missing "${key}"`);
      return [];
    }
    if (typeof v !== "object" || v.k !== "arr") throw this.invalid(`"${key}" is not an array`);
    return v.items;
  }

  items(key: string, required: boolean): Item[] {
    return this.array(key, required).map((raw) => {
      const f = new Fields(this.text, this.id, raw, "publication item");
      return { offset: f.uint("offset", OFFSET_MAX), data: f.data() };
    });
  }
}

/** A message's text as a string: JSON frames may arrive as text or bytes. */
function asText(message: string | Uint8Array): string {
  if (typeof message === "string") return message;
  const text = fromUtf8(message);
  if (text === null) throw new DecodeError("malformed", "not UTF-8");
  return text;
}

function envelope(text: string, root: Value, ops: ReadonlySet<string>): [number, string, Fields] {
  if (root === null || typeof root !== "object" || root.k !== "obj") {
    throw new DecodeError("malformed", "not a JSON object");
  }
  const ids = root.pairs.filter(([k]) => k === "id");
  if (ids.length > 1) throw new DecodeError("malformed", 'repeated "id"');
  let id = 0;
  const idv = ids[0]?.[1];
  if (idv !== undefined && idv !== null) {
    if (typeof idv !== "object" || idv.k !== "num" || !idv.isInt || idv.text.startsWith("-") || !fits(idv.text, U32_MAX)) {
      throw new DecodeError("invalid", '"id" is not a u32');
    }
    id = Number(idv.text);
  }
  const found = root.pairs.filter(([k]) => ops.has(k));
  if (found.length > 1) throw new DecodeError("malformed", "more than one operation key", id);
  const first = found[0];
  if (first === undefined) {
    const other = root.pairs.find(([k]) => k !== "id");
    if (other !== undefined) throw new DecodeError("unknown", `unknown operation "${other[0]}"`, id);
    throw new DecodeError("malformed", "no operation key", id);
  }
  return [id, first[0], new Fields(text, id, first[1], `"${first[0]}" body`)];
}

function parseDocument(text: string): Value {
  const r = tryParse(text);
  if (r === null) throw new DecodeError("malformed", "not JSON");
  return r.value;
}

/** Decodes a client → server message (a command). */
export function decodeJsonCommand(message: string | Uint8Array): Command {
  const text = asText(message);
  const [id, op, b] = envelope(text, parseDocument(text), COMMANDS);
  switch (op) {
    case "connect":
      return { type: "connect", id, token: b.optString("token"), name: b.optString("name") };
    case "subscribe": {
      const channel = b.string("channel");
      return {
        type: "subscribe", id, channel, recover: b.position("recover"), joinLeave: b.flag("join_leave"),
        token: b.optString("token"),
      };
    }
    case "unsubscribe":
      return { type: "unsubscribe", id, channel: b.string("channel") };
    case "publish": {
      const channel = b.string("channel");
      return { type: "publish", id, channel, data: b.data() };
    }
    case "ping":
      return { type: "ping", id };
    case "history": {
      const channel = b.string("channel");
      const since = b.position("since");
      return { type: "history", id, channel, since, limit: b.uint("limit", U32_MAX, 0) };
    }
    case "presence":
      return { type: "presence", id, channel: b.string("channel") };
    case "presence_stats":
      return { type: "presenceStats", id, channel: b.string("channel") };
    case "lobby":
      return { type: "lobby", id, path: b.optString("path") ?? "" };
    case "lobby_off":
      return { type: "lobbyOff", id, path: b.optString("path") ?? "" };
    case "sit": {
      const table = b.uint("table", OFFSET_MAX);
      const seat = b.present("seat") ? b.uint("seat", U32_MAX) : null;
      return { type: "sit", id, table, seat, data: b.optData() };
    }
    case "watch":
      return { type: "watch", id, table: b.uint("table", OFFSET_MAX) };
    case "stand":
      return { type: "stand", id, table: b.uint("table", OFFSET_MAX) };
    case "act": {
      const table = b.uint("table", OFFSET_MAX);
      return { type: "act", id, table, data: b.data() };
    }
    default: {
      const game = b.optString("game") ?? "";
      const seats = b.present("seats") ? b.uint("seats", U32_MAX) : null;
      const attrs = b.optAttrs();
      const priv = b.flag("private");
      const code = b.optString("code");
      return { type: "play", id, game, seats, attrs, private: priv, code, data: b.optData() };
    }
  }
}

function serverFrom(text: string, root: Value): ServerMessage {
  const [id, op, b] = envelope(text, root, SERVER_OPS);
  switch (op) {
    case "connect":
      return { type: "connectReply", id, client: b.string("client"), version: b.string("version"), pingInterval: b.uint("ping_interval", U32_MAX) };
    case "subscribe":
      return {
        type: "subscribeReply", id, epoch: b.string("epoch"), offset: b.uint("offset", OFFSET_MAX),
        recovered: b.flag("recovered"), publications: b.items("publications", false),
      };
    case "unsubscribe":
      return { type: "unsubscribeReply", id };
    case "publish":
      return { type: "publishReply", id, epoch: b.string("epoch"), offset: b.uint("offset", OFFSET_MAX) };
    case "ping":
      return { type: "pingReply", id };
    case "history":
      return {
        type: "historyReply", id, epoch: b.string("epoch"), offset: b.uint("offset", OFFSET_MAX),
        publications: b.items("publications", true),
      };
    case "presence": {
      const clients: ClientInfo[] = b.array("clients", true).map((raw) => {
        const f = new Fields(text, id, raw, "presence client");
        return { client: f.string("client"), user: f.string("user"), info: f.info() };
      });
      return { type: "presenceReply", id, clients };
    }
    case "presence_stats":
      return { type: "presenceStatsReply", id, clients: b.uint("clients", OFFSET_MAX), users: b.uint("users", OFFSET_MAX) };
    case "error":
      return { type: "error", id, code: b.uint("code", U16_MAX), message: b.string("message") };
    case "pub":
      return { type: "publication", channel: b.string("channel"), offset: b.uint("offset", OFFSET_MAX), data: b.data() };
    case "join":
    case "leave":
      return { type: op, channel: b.string("channel"), client: b.string("client"), user: b.string("user"), info: b.info() };
    case "unsub":
      return { type: "unsubscribed", channel: b.string("channel"), code: b.uint("code", U16_MAX), reason: b.string("reason") };
    case "disconnect":
      return { type: "disconnect", code: b.uint("code", U16_MAX), reason: b.string("reason") };
    case "lobby": {
      const seq = b.uint("seq", OFFSET_MAX);
      return { type: "lobbyReply", id, seq, tables: b.tables("tables") };
    }
    case "lobby_off":
      return { type: "lobbyOffReply", id };
    case "sit": {
      const seat = b.uint("seat", U32_MAX);
      return { type: "sitReply", id, seat, data: b.data() };
    }
    case "watch":
      return { type: "watchReply", id, data: b.data() };
    case "stand":
      return { type: "standReply", id };
    case "act":
      return { type: "actReply", id };
    case "play": {
      const table = b.uint("table", OFFSET_MAX);
      const seat = b.uint("seat", U32_MAX);
      const code = b.optString("code");
      return { type: "playReply", id, table, seat, code, created: b.flag("created"), data: b.data() };
    }
    case "lobby_update": {
      const path = b.string("path");
      const seq = b.uint("seq", OFFSET_MAX);
      const tables = b.tables("tables");
      const removed = b.array("removed", true).map((v) => {
        if (v === null || typeof v !== "object" || v.k !== "num" || !v.isInt || v.text.startsWith("-") || !fits(v.text, OFFSET_MAX)) {
          throw b.invalid(`"removed" holds something other than a table id`);
        }
        return Number(v.text);
      });
      return { type: "lobbyUpdate", path, seq, tables, removed };
    }
    case "lobby_page": {
      const path = b.string("path");
      return { type: "lobbyPage", path, tables: b.tables("tables") };
    }
    case "game": {
      const table = b.uint("table", OFFSET_MAX);
      return { type: "game", table, data: b.data() };
    }
    case "seat": {
      const table = b.uint("table", OFFSET_MAX);
      const seat = b.uint("seat", U32_MAX);
      const user = b.string("user");
      return { type: "seat", table, seat, user, status: b.status("status") };
    }
    default: {
      const table = b.uint("table", OFFSET_MAX);
      const code = b.uint("code", U16_MAX);
      return { type: "unseat", table, code, reason: b.string("reason") };
    }
  }
}

/** Decodes a server → client message (a reply, an error or a push). */
export function decodeJsonServer(message: string | Uint8Array): ServerMessage {
  const text = asText(message);
  return serverFrom(text, parseDocument(text));
}

/** Decodes a JSON array of server messages (a long-poll answer, §1); each
 * element is decoded as {@link decodeJsonServer} would. */
export function decodeJsonServerBatch(message: string | Uint8Array): ServerMessage[] {
  const text = asText(message);
  const root = parseDocument(text);
  if (root === null || typeof root !== "object" || root.k !== "arr") {
    throw new DecodeError("malformed", "not a JSON array");
  }
  return root.items.map((item) => serverFrom(text, item));
}

/** A parsed JSON object's string fields, for small HTTP answers
 * (`/api/publish`, `/poll`): `null` if `text` is not a JSON object. */
export function parseObject(text: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
