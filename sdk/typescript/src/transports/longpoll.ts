/**
 * HTTP long-polling transport (`/poll`, docs/protocol.md §1): the full
 * protocol in JSON, for networks where neither WebSocket nor streaming
 * responses get through.
 *
 * `POST /poll` opens a session; commands are batched per tick into one
 * `POST /poll/<id>` (one at a time, so they reach the server in order); one
 * `GET /poll/<id>` at a time waits for the queued server messages. A `404`
 * means the session expired: the connection is reported dropped and the
 * client opens a new session, recovering its subscriptions.
 *
 * Authentication needs nothing of its own here (§5d): the session id is the
 * session's credential, and the connection and subscribe tokens travel in the
 * `connect` and `subscribe` commands, as on a WebSocket.
 */

import { decodeJsonServerBatch, encodeJson } from "../json.js";
import type { Command } from "../messages.js";
import { fetchWithTimeout, type OpenOptions, type Transport, type TransportKind } from "./transport.js";

class LongPollTransport implements Transport {
  readonly kind: TransportKind = "longpoll";
  readonly encoding = "json" as const;
  private done = false;
  private readonly queue: string[] = [];
  private flushing = false;
  private readonly abort = new AbortController();
  private readonly url: string;

  constructor(
    private readonly o: OpenOptions,
    session: string,
  ) {
    this.url = `${o.httpUrl}/poll/${encodeURIComponent(session)}`;
    void this.loop();
  }

  private end(code: number | null, reason: string): void {
    if (this.done) return;
    this.done = true;
    this.abort.abort();
    this.o.handlers.closed(code, reason);
  }

  private async loop(): Promise<void> {
    while (!this.done) {
      let text: string;
      try {
        const res = await this.o.fetch(this.url, { signal: this.abort.signal, cache: "no-store" });
        if (res.status === 404) return this.end(null, "poll session expired");
        if (!res.ok) return this.end(null, `poll answered HTTP ${res.status}`);
        text = await res.text();
      } catch (e) {
        return this.end(null, `poll failed: ${(e as Error).message}`);
      }
      if (this.done) return;
      let messages;
      try {
        messages = decodeJsonServerBatch(text);
      } catch (e) {
        return this.end(null, `undecodable poll answer: ${(e as Error).message}`);
      }
      for (const m of messages) {
        if (this.done) return;
        this.o.handlers.message(m);
        if (m.type === "disconnect") return this.end(m.code, m.reason);
      }
    }
  }

  send(cmd: Command): void {
    if (this.done) return;
    this.queue.push(encodeJson(cmd));
    if (!this.flushing) {
      this.flushing = true;
      queueMicrotask(() => void this.flush());
    }
  }

  private async flush(): Promise<void> {
    while (this.queue.length && !this.done) {
      const batch = this.queue.splice(0);
      try {
        const res = await this.o.fetch(this.url, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: `[${batch.join(",")}]`,
          signal: this.abort.signal,
        });
        if (res.status === 404) return this.end(null, "poll session expired");
        if (!res.ok) return this.end(null, `sending answered HTTP ${res.status}`);
      } catch (e) {
        return this.end(null, `sending failed: ${(e as Error).message}`);
      }
    }
    this.flushing = false;
  }

  close(): void {
    if (this.done) return;
    this.done = true;
    this.abort.abort();
    this.o.fetch(this.url, { method: "DELETE" }).catch(() => {});
  }
}

export async function openLongPoll(o: OpenOptions): Promise<Transport> {
  const res = await fetchWithTimeout(o.fetch, `${o.httpUrl}/poll`, { method: "POST", cache: "no-store" }, o.openTimeout);
  if (!res.ok) throw new Error(`opening a poll session answered HTTP ${res.status}`);
  const body = (await res.json()) as { session?: unknown };
  if (typeof body.session !== "string") throw new Error("opening a poll session gave no session id");
  return new LongPollTransport(o, body.session);
}
