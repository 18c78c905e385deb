// The shared protocol vectors (spec/vectors/, docs/protocol.md §9): every
// vector must round-trip byte for byte in both encodings, and every invalid
// input must be refused with the right kind and recovered id.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  DecodeError, decodeBinaryCommand, decodeBinaryServer, decodeJsonCommand, decodeJsonServer,
  encodeBinary, encodeJson, fromHex, toHex,
} from "../dist/index.js";

const dir = fileURLToPath(new URL("../../../spec/vectors/", import.meta.url));
const messages = JSON.parse(readFileSync(dir + "messages.json", "utf8"));
const invalid = JSON.parse(readFileSync(dir + "invalid.json", "utf8"));

test("vector files are not empty", () => {
  assert.ok(messages.length > 50);
  assert.ok(invalid.length > 50);
});

for (const v of messages) {
  const decBin = v.direction === "client" ? decodeBinaryCommand : decodeBinaryServer;
  const decJson = v.direction === "client" ? decodeJsonCommand : decodeJsonServer;
  if (v.json === undefined) {
    // Binary-only vectors hold offsets >= 2^53: refused, never rounded (§9).
    test(`vector (binary only, offset >= 2^53 refused): ${v.name}`, () => {
      assert.throws(() => decBin(fromHex(v.binary)), (e) => e instanceof DecodeError && e.kind === "invalid");
    });
    continue;
  }
  test(`vector: ${v.name}`, () => {
    const fromBin = decBin(fromHex(v.binary));
    assert.equal(toHex(encodeBinary(fromBin)), v.binary);
    const fromJson = decJson(v.json);
    assert.deepEqual(fromJson, fromBin);
    assert.equal(encodeJson(fromJson), v.json);
    // JSON frames may also arrive as bytes.
    assert.deepEqual(decJson(new TextEncoder().encode(v.json)), fromBin);
  });
}

for (const v of invalid) {
  test(`invalid (${v.encoding}, ${v.direction}): ${v.name}`, () => {
    const input = v.encoding === "binary" ? fromHex(v.input) : v.input;
    const dec = v.encoding === "binary"
      ? (v.direction === "client" ? decodeBinaryCommand : decodeBinaryServer)
      : (v.direction === "client" ? decodeJsonCommand : decodeJsonServer);
    assert.throws(() => dec(input), (e) => {
      assert.ok(e instanceof DecodeError, `not a DecodeError: ${e}`);
      assert.equal(e.kind, v.error, e.message);
      assert.equal(e.id, v.id, e.message);
      return true;
    });
  });
}
