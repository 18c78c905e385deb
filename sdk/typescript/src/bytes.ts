/**
 * UTF-8 and base64 helpers that behave the same in browsers and Node 20
 * (no `Buffer`): strict UTF-8 decoding (encoded surrogates and bad sequences
 * are errors, as §4.1 requires) and canonical base64 (RFC 4648 §4 with
 * padding; decoding refuses anything that would not re-encode identically, §3.3).
 */

const encoder = new TextEncoder();
const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

export function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}

/** Strict UTF-8 decoding; `null` for bytes that are not valid UTF-8. */
export function fromUtf8(b: Uint8Array): string | null {
  try {
    return strict.decode(b);
  } catch {
    return null;
  }
}

/** Whether a JS string holds a lone surrogate (which UTF-8 cannot encode). */
export function hasLoneSurrogate(s: string): boolean {
  return /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const LOOKUP = new Int16Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) LOOKUP[ALPHABET.charCodeAt(i)] = i;

export function toBase64(b: Uint8Array): string {
  let out = "";
  let i = 0;
  for (; i + 2 < b.length; i += 3) {
    const n = (b[i]! << 16) | (b[i + 1]! << 8) | b[i + 2]!;
    out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + ALPHABET[(n >> 6) & 63]! + ALPHABET[n & 63]!;
  }
  const rest = b.length - i;
  if (rest === 1) {
    const n = b[i]! << 16;
    out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + "==";
  } else if (rest === 2) {
    const n = (b[i]! << 16) | (b[i + 1]! << 8);
    out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + ALPHABET[(n >> 6) & 63]! + "=";
  }
  return out;
}

/** Canonical base64 decoding; `null` for bad characters, missing padding or
 * non-zero trailing bits. */
export function fromBase64(s: string): Uint8Array | null {
  if (s.length % 4 !== 0) return null;
  let pad = 0;
  if (s.endsWith("==")) pad = 2;
  else if (s.endsWith("=")) pad = 1;
  const out = new Uint8Array((s.length / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < s.length; i += 4) {
    const last = i + 4 === s.length;
    const v = [0, 0, 0, 0];
    for (let j = 0; j < 4; j++) {
      const c = s.charCodeAt(i + j);
      if (last && j >= 4 - pad) {
        if (c !== 61) return null;
        continue;
      }
      const x = c < 128 ? LOOKUP[c]! : -1;
      if (x < 0) return null;
      v[j] = x;
    }
    const n = (v[0]! << 18) | (v[1]! << 12) | (v[2]! << 6) | v[3]!;
    if (last && pad === 2 && (n & 0xffff) !== 0) return null;
    if (last && pad === 1 && (n & 0xff) !== 0) return null;
    out[o++] = n >> 16;
    if (o < out.length) out[o++] = (n >> 8) & 255;
    if (o < out.length) out[o++] = n & 255;
  }
  return out;
}

export function toHex(b: Uint8Array): string {
  let s = "";
  for (const x of b) s += x.toString(16).padStart(2, "0");
  return s;
}

export function fromHex(s: string): Uint8Array {
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}
