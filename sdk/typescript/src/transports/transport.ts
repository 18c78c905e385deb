/**
 * The one shape every transport has (as centrifuge-js: transports behind one
 * internal interface): `send` a command, `close`, and report messages and the
 * end of the connection through {@link TransportHandlers}. The client's state
 * machine never knows which transport carries it.
 *
 * - `websocket`: the full protocol, JSON or binary (`/ws`).
 * - `sse`: Server-Sent Events for receiving (`/sse`, one stream per channel)
 *   and `POST /api/publish` for publishing; connect, subscribe, unsubscribe
 *   and ping are emulated locally; history, presence and wildcards answer
 *   error 111 (not available). JSON only.
 * - `longpoll`: the full protocol over HTTP long-polling (`/poll`). JSON only.
 */

import type { Encoding } from "../codec.js";
import type { Command, Position, ServerMessage } from "../messages.js";

export type TransportKind = "websocket" | "sse" | "longpoll";

export const ALL_TRANSPORTS: readonly TransportKind[] = ["websocket", "sse", "longpoll"];

export interface TransportHandlers {
  /** One decoded server message. */
  message(m: ServerMessage): void;
  /** The connection ended on its own (not by {@link Transport.close}):
   * `code` is the close or disconnect code, `null` when it just dropped. */
  closed(code: number | null, reason: string): void;
  /** SSE only: a channel's position learned from the stream (see
   * `ClientCore.reposition`). */
  position(channel: string, pos: Position, gap: boolean): void;
}

export interface Transport {
  readonly kind: TransportKind;
  readonly encoding: Encoding;
  send(cmd: Command): void;
  /** Ends the connection; no `closed` callback follows. */
  close(): void;
}

/** The subset of the WebSocket constructor the SDK uses: the browser's, or
 * the `ws` package's on Node 20 (which has no global WebSocket). */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

export interface WebSocketLike {
  binaryType: string;
  readonly protocol: string;
  readonly readyState: number;
  onopen: ((ev: any) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: any) => void) | null;
  send(data: string | ArrayBufferView | ArrayBuffer): void;
  close(code?: number, reason?: string): void;
}

export type FetchLike = typeof fetch;

export interface OpenOptions {
  /** `ws://host:port/prefix/ws`. */
  wsUrl: string;
  /** `http://host:port/prefix` (no trailing slash). */
  httpUrl: string;
  encoding: Encoding;
  /** Milliseconds the transport may take to open. */
  openTimeout: number;
  WebSocket: WebSocketConstructor | undefined;
  fetch: FetchLike;
  handlers: TransportHandlers;
}

/** Runs `fetch` with a deadline. */
export async function fetchWithTimeout(f: FetchLike, url: string, init: RequestInit, ms: number): Promise<Response> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), ms);
  try {
    return await f(url, { ...init, signal: abort.signal });
  } finally {
    clearTimeout(timer);
  }
}

/** Reads `{"error": {"code": c, "message": m}}` from an HTTP error answer. */
export async function httpError(res: Response): Promise<{ code: number; message: string }> {
  try {
    const body = (await res.json()) as { error?: { code?: unknown; message?: unknown } };
    const code = body.error?.code;
    const message = body.error?.message;
    if (typeof code === "number") return { code, message: typeof message === "string" ? message : `HTTP ${res.status}` };
  } catch {
    // not JSON: fall through
  }
  return { code: res.status >= 500 ? 100 : 103, message: `HTTP ${res.status}` };
}
