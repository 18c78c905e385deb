/**
 * WebSocket transport (`/ws`, subprotocol `herald.json` or `herald.binary`,
 * docs/protocol.md §1): one message per frame, the full protocol.
 */

import { decodeServer, encode, type Encoding } from "../codec.js";
import type { Command } from "../messages.js";
import type { OpenOptions, Transport, TransportKind, WebSocketLike } from "./transport.js";

/** Close codes that mean "no code": 1005 (none given), 1006 (dropped). */
const NO_CODE: ReadonlySet<number> = new Set([1005, 1006]);

class WebSocketTransport implements Transport {
  readonly kind: TransportKind = "websocket";
  private done = false;

  constructor(
    private readonly ws: WebSocketLike,
    readonly encoding: Encoding,
    private readonly o: OpenOptions,
  ) {
    ws.onmessage = (ev) => {
      if (this.done) return;
      let m;
      try {
        m = decodeServer(ev.data as string | ArrayBuffer, encoding);
      } catch (e) {
        this.end(null, `undecodable server message: ${(e as Error).message}`);
        ws.close(3501, "undecodable message");
        return;
      }
      o.handlers.message(m);
    };
    ws.onclose = (ev) => this.end(NO_CODE.has(ev.code) ? null : ev.code, ev.reason);
    ws.onerror = () => {}; // a close event follows
  }

  private end(code: number | null, reason: string): void {
    if (this.done) return;
    this.done = true;
    this.o.handlers.closed(code, reason);
  }

  send(cmd: Command): void {
    if (this.done || this.ws.readyState !== 1) return; // a dead connection is noticed by its close
    this.ws.send(encode(cmd, this.encoding));
  }

  close(): void {
    if (this.done) return;
    this.done = true;
    try {
      this.ws.close(1000, "client closed");
    } catch {
      // already closing
    }
  }
}

export function openWebSocket(o: OpenOptions): Promise<Transport> {
  return new Promise((resolve, reject) => {
    const Ctor = o.WebSocket ?? (globalThis as { WebSocket?: OpenOptions["WebSocket"] }).WebSocket;
    if (Ctor === undefined) {
      reject(new Error("no WebSocket implementation: pass options.WebSocket (e.g. the ws package on Node 20)"));
      return;
    }
    const protocol = o.encoding === "binary" ? "herald.binary" : "herald.json";
    let ws: WebSocketLike;
    try {
      ws = new Ctor(o.wsUrl, [protocol]);
    } catch (e) {
      reject(e instanceof Error ? e : new Error(String(e)));
      return;
    }
    ws.binaryType = "arraybuffer";
    const timer = setTimeout(() => {
      ws.onclose = null;
      try {
        ws.close();
      } catch {
        // never opened
      }
      reject(new Error("WebSocket did not open in time"));
    }, o.openTimeout);
    ws.onerror = () => {};
    ws.onclose = (ev) => {
      clearTimeout(timer);
      reject(new Error(`WebSocket closed before opening (${ev.code})`));
    };
    ws.onopen = () => {
      clearTimeout(timer);
      if (o.encoding === "binary" && ws.protocol !== protocol) {
        ws.onclose = null;
        ws.close(1000, "binary encoding not offered");
        reject(new Error("the server did not accept the herald.binary subprotocol"));
        return;
      }
      resolve(new WebSocketTransport(ws, o.encoding, o));
    };
  });
}
