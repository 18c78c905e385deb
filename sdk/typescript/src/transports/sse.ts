/**
 * Server-Sent Events transport: receives over `GET /sse?channel=…`
 * (docs/protocol.md §1 and §5b) and publishes with `POST /api/publish`.
 *
 * SSE is one-way, so the commands the client's state machine sends are
 * emulated here: `connect` and `ping` are answered locally; `subscribe` opens
 * one stream per channel (resuming with `lastEventId=epoch:offset` when it
 * carries a `recover` position) and is answered when the stream's response
 * starts; `unsubscribe` ends that stream; `publish` is an HTTP request whose
 * answer becomes the publish reply. `history`, `presence` and wildcard
 * subscriptions need a two-way connection: they answer error 111 (not
 * available). One stream per channel rather than one for all keeps each
 * channel's resume position independent, so subscribing to a new channel
 * never disturbs the others.
 *
 * Authentication (§5d): the `connect` token is sent with every stream as
 * `?token=` (the server also takes `Authorization: Bearer`, but a header
 * would make a cross-origin request need a CORS preflight, and `EventSource`
 * users have only the query). A refused token answers the subscribe with the
 * server's code (101, 112; 104 for a channel not permitted). `/sse` has no
 * place for a subscribe token: a private channel needs a grant in the
 * connection token.
 *
 * Streams are read with `fetch` rather than `EventSource`, which works the
 * same in browsers and in Node 20 (which has no `EventSource`) and leaves
 * reconnecting to the client, whose recovery rules are the same on every
 * transport. Each event's `id:` is the channel's `epoch:offset`; the stream's
 * epoch, learned from the first event after a fresh subscribe, reaches the
 * state machine through {@link TransportHandlers.position}; an `unrecovered`
 * notice becomes a resync.
 */

import { fromBase64, utf8 } from "../bytes.js";
import { ErrorCode } from "../codes.js";
import { decodeJsonServer, isJson } from "../json.js";
import { toBase64, fromUtf8 } from "../bytes.js";
import type { Command, Position, Publish, ServerMessage, Subscribe } from "../messages.js";
import { isPattern } from "../protocol.js";
import { fetchWithTimeout, httpError, type OpenOptions, type Transport, type TransportKind } from "./transport.js";

interface Stream {
  abort: AbortController;
  /** Epoch of the positions reported for this channel ("" = not known yet). */
  epoch: string;
}

let streamCounter = 0;

class SseTransport implements Transport {
  readonly kind: TransportKind = "sse";
  readonly encoding = "json" as const;
  private done = false;
  private readonly streams = new Map<string, Stream>();
  private readonly name = `sse-${Date.now().toString(36)}-${(streamCounter++).toString(36)}`;
  /** The connection token of the emulated `connect`, sent with every stream. */
  private token: string | null = null;

  constructor(private readonly o: OpenOptions) {}

  private deliver(m: ServerMessage): void {
    queueMicrotask(() => {
      if (!this.done) this.o.handlers.message(m);
    });
  }

  private end(code: number | null, reason: string): void {
    if (this.done) return;
    this.done = true;
    for (const s of this.streams.values()) s.abort.abort();
    this.streams.clear();
    this.o.handlers.closed(code, reason);
  }

  send(cmd: Command): void {
    if (this.done) return;
    switch (cmd.type) {
      case "connect":
        this.token = cmd.token;
        this.deliver({ type: "connectReply", id: cmd.id, client: this.name, version: "sse", pingInterval: 0 });
        return;
      case "ping":
        this.deliver({ type: "pingReply", id: cmd.id });
        return;
      case "subscribe":
        void this.subscribe(cmd);
        return;
      case "unsubscribe": {
        const s = this.streams.get(cmd.channel);
        if (s === undefined) {
          this.deliver({ type: "error", id: cmd.id, code: ErrorCode.NotSubscribed, message: "not subscribed" });
          return;
        }
        this.streams.delete(cmd.channel);
        s.abort.abort();
        this.deliver({ type: "unsubscribeReply", id: cmd.id });
        return;
      }
      case "publish":
        void this.publish(cmd);
        return;
      case "history":
      case "presence":
      case "presenceStats":
        this.deliver({
          type: "error",
          id: cmd.id,
          code: ErrorCode.NotAvailable,
          message: `${cmd.type} is not available over SSE (use WebSocket or long-polling)`,
        });
        return;
    }
  }

  private async publish(cmd: Publish): Promise<void> {
    const payload = isJson(cmd.data) ? `"data":${fromUtf8(cmd.data)}` : `"b64":"${toBase64(cmd.data)}"`;
    let res: Response;
    try {
      res = await this.o.fetch(`${this.o.httpUrl}/api/publish`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: `{"channel":${JSON.stringify(cmd.channel)},${payload}}`,
      });
    } catch (e) {
      return this.end(null, `publish failed: ${(e as Error).message}`);
    }
    if (!res.ok) {
      const { code, message } = await httpError(res);
      this.deliver({ type: "error", id: cmd.id, code, message });
      return;
    }
    const body = (await res.json().catch(() => null)) as { epoch?: unknown; offset?: unknown } | null;
    if (body === null || typeof body.epoch !== "string" || typeof body.offset !== "number") {
      return this.end(null, "undecodable publish answer");
    }
    this.deliver({ type: "publishReply", id: cmd.id, epoch: body.epoch, offset: body.offset });
  }

  private async subscribe(cmd: Subscribe): Promise<void> {
    const fail = (code: number, message: string) => this.deliver({ type: "error", id: cmd.id, code, message });
    if (isPattern(cmd.channel)) return fail(ErrorCode.NotAvailable, "wildcard subscriptions are not available over SSE");
    if (this.streams.has(cmd.channel)) return fail(ErrorCode.AlreadySubscribed, "already subscribed");
    // "" is never a valid epoch to recover from (§5b): start live.
    const resume = cmd.recover !== null && cmd.recover.epoch !== "" ? cmd.recover : null;
    const stream: Stream = { abort: new AbortController(), epoch: resume?.epoch ?? "" };
    this.streams.set(cmd.channel, stream);
    let url = `${this.o.httpUrl}/sse?channel=${encodeURIComponent(cmd.channel)}`;
    if (resume) url += `&lastEventId=${encodeURIComponent(`${resume.epoch}:${resume.offset}`)}`;
    if (this.token !== null) url += `&token=${encodeURIComponent(this.token)}`;
    let res: Response;
    try {
      res = await this.o.fetch(url, { headers: { accept: "text/event-stream" }, cache: "no-store", signal: stream.abort.signal });
    } catch (e) {
      if (this.streams.get(cmd.channel) !== stream) return; // unsubscribed meanwhile
      return this.end(null, `SSE stream failed: ${(e as Error).message}`);
    }
    if (this.streams.get(cmd.channel) !== stream) return;
    if (!res.ok || res.body === null) {
      this.streams.delete(cmd.channel);
      const { code, message } = await httpError(res);
      return fail(code, message);
    }
    // The stream has started: nothing published from now on is missed.
    this.deliver({
      type: "subscribeReply",
      id: cmd.id,
      epoch: resume?.epoch ?? "",
      offset: resume?.offset ?? 0,
      recovered: resume !== null,
      publications: [],
    });
    try {
      await this.read(cmd.channel, stream, res.body);
    } catch (e) {
      if (this.streams.get(cmd.channel) !== stream) return;
      return this.end(null, `SSE stream failed: ${(e as Error).message}`);
    }
    if (this.streams.get(cmd.channel) === stream) this.end(null, "SSE stream ended");
  }

  /** Parses the event stream (WHATWG HTML §9.2.6) and dispatches its events. */
  private async read(channel: string, stream: Stream, body: ReadableStream<Uint8Array>): Promise<void> {
    const reader = body.getReader();
    const text = new TextDecoder();
    let buf = "";
    let data: string[] = [];
    let event = "";
    let id: string | null = null;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += text.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          if (data.length) this.dispatch(channel, stream, event, data.join("\n"), id);
          else if (id !== null) this.place(channel, stream, id);
          data = [];
          event = "";
          id = null;
          continue;
        }
        if (line.startsWith(":")) continue; // a heartbeat comment
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let v = colon < 0 ? "" : line.slice(colon + 1);
        if (v.startsWith(" ")) v = v.slice(1);
        if (field === "data") data.push(v);
        else if (field === "event") event = v;
        else if (field === "id") id = v;
      }
      if (this.done || this.streams.get(channel) !== stream) {
        void reader.cancel().catch(() => {});
        return;
      }
    }
  }

  /**
   * An id sent alone: the stream's starting position, which the server sends
   * once subscribed, before any event (protocol.md §1). Keeping it lets a
   * stream lost before its first publication resume from there instead of
   * starting live and missing what was published meanwhile.
   */
  private place(channel: string, stream: Stream, id: string): void {
    if (this.done || this.streams.get(channel) !== stream) return;
    const pos = parseId(id);
    if (pos === null || stream.epoch === pos.epoch) return;
    const gap = stream.epoch !== "";
    stream.epoch = pos.epoch;
    this.o.handlers.position(channel, pos, gap);
  }

  private dispatch(channel: string, stream: Stream, event: string, data: string, id: string | null): void {
    if (this.done || this.streams.get(channel) !== stream) return;
    if (event === "herald") {
      let m: ServerMessage;
      try {
        const notice = JSON.parse(data) as { unrecovered?: { epoch?: unknown; offset?: unknown } };
        const u = notice.unrecovered;
        if (u !== undefined) {
          if (typeof u.epoch === "string" && typeof u.offset === "number") {
            stream.epoch = u.epoch;
            this.o.handlers.position(channel, { epoch: u.epoch, offset: u.offset }, true);
          }
          return;
        }
        m = decodeJsonServer(data);
      } catch (e) {
        return this.end(null, `undecodable SSE notice: ${(e as Error).message}`);
      }
      this.o.handlers.message(m);
      if (m.type === "disconnect") this.end(m.code, m.reason);
      return;
    }
    const pos = parseId(id);
    if (pos === null) return this.end(null, `SSE event without a position id: ${id}`);
    const bytes = event === "b64" ? fromBase64(data) : utf8(data);
    if (bytes === null) return this.end(null, "bad base64 in an SSE event");
    if (stream.epoch !== pos.epoch) {
      // First event after a fresh subscribe (epoch unknown), or a new epoch
      // under a live stream (the channel was forgotten and recreated): a gap.
      const gap = stream.epoch !== "";
      stream.epoch = pos.epoch;
      this.o.handlers.position(channel, { epoch: pos.epoch, offset: pos.offset - 1 }, gap);
    }
    this.o.handlers.message({ type: "publication", channel, offset: pos.offset, data: bytes });
  }

  close(): void {
    if (this.done) return;
    this.done = true;
    for (const s of this.streams.values()) s.abort.abort();
    this.streams.clear();
  }
}

/** `epoch:offset` (split at the last colon). */
function parseId(id: string | null): Position | null {
  if (id === null) return null;
  const i = id.lastIndexOf(":");
  if (i < 0 || !/^[0-9]+$/.test(id.slice(i + 1))) return null;
  return { epoch: id.slice(0, i), offset: Number(id.slice(i + 1)) };
}

export async function openSse(o: OpenOptions): Promise<Transport> {
  // Streams open per subscription; check now that plain HTTP gets through.
  const res = await fetchWithTimeout(o.fetch, `${o.httpUrl}/healthz`, { cache: "no-store" }, o.openTimeout);
  if (!res.ok) throw new Error(`the server's health check answered HTTP ${res.status}`);
  return new SseTransport(o);
}
