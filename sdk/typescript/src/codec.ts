/**
 * One entry point over both encodings (docs/protocol.md §3 and §4): a
 * connection speaks one {@link Encoding} for its whole life, and transports
 * call {@link encode} / {@link decodeServer} without caring which.
 */

import { decodeBinaryCommand, decodeBinaryServer, encodeBinary } from "./binary.js";
import { fromUtf8 } from "./bytes.js";
import { DecodeError } from "./errors.js";
import { decodeJsonCommand, decodeJsonServer, encodeJson } from "./json.js";
import type { Command, ServerMessage } from "./messages.js";

export type Encoding = "json" | "binary";

/** A JSON message is a string (a WebSocket text frame); a binary one, bytes. */
export function encode(m: Command | ServerMessage, encoding: Encoding): string | Uint8Array {
  return encoding === "json" ? encodeJson(m) : encodeBinary(m);
}

function bytesOf(frame: string | Uint8Array | ArrayBuffer): Uint8Array | string {
  return frame instanceof ArrayBuffer ? new Uint8Array(frame) : frame;
}

export function decodeServer(frame: string | Uint8Array | ArrayBuffer, encoding: Encoding): ServerMessage {
  const f = bytesOf(frame);
  if (encoding === "json") return decodeJsonServer(f);
  if (typeof f === "string") throw new DecodeError("malformed", "text frame on a binary connection");
  return decodeBinaryServer(f);
}

export function decodeCommand(frame: string | Uint8Array | ArrayBuffer, encoding: Encoding): Command {
  const f = bytesOf(frame);
  if (encoding === "json") return decodeJsonCommand(f);
  if (typeof f === "string") throw new DecodeError("malformed", "text frame on a binary connection");
  return decodeBinaryCommand(f);
}

export { fromUtf8 };
