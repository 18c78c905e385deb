//! Low-level JSON text for the encoders' hot path: deciding whether payload
//! bytes can be embedded verbatim, escaping strings, formatting integers and
//! base64 — each writing straight into the output `BytesMut`.
//!
//! Why not serde_json for these: the server encodes every publication push once
//! and shares it with thousands of subscribers, so encoding must not allocate
//! beyond the output buffer. Validating with serde_json allocates (its nesting
//! stack, its boxed errors for every binary payload) and its string escaper is
//! private. Each helper here is a few dozen lines, produces the same text as
//! serde_json (and as `JSON.stringify` / Python's `json.dumps(...,
//! ensure_ascii=False)`), and is checked against serde_json in the tests.

use base64::Engine as _;
use bytes::{BufMut, BytesMut};

/// Deepest nesting of arrays/objects [`is_json`] accepts. Deeper (but valid)
/// payloads are sent as base64 instead, which is always correct; the limit
/// keeps the validator's nesting stack in two machine words.
pub(crate) const MAX_DEPTH: usize = 128;

/// Whether `b` is exactly one JSON value (RFC 8259) with no whitespace before
/// or after it, valid UTF-8, nested at most [`MAX_DEPTH`] deep.
///
/// Such bytes are written verbatim as `"data":<json>`, and a decoder reading
/// them back gets the same bytes. The check is deliberately never looser than
/// serde_json's (it is stricter only in the depth limit).
pub(crate) fn is_json(b: &[u8]) -> bool {
    match (b.first(), b.last()) {
        (Some(f), Some(l)) if !is_ws(*f) && !is_ws(*l) => {}
        _ => return false,
    }
    if std::str::from_utf8(b).is_err() {
        return false;
    }
    Validator {
        b,
        i: 0,
        stack: [0; 2],
        depth: 0,
    }
    .run()
}

/// Whether `b`, already known to be valid JSON text (serde_json read it), nests
/// at most [`MAX_DEPTH`] deep: the one way such text can fail [`is_json`]
/// (serde_json's raw values have no depth limit).
///
/// Only brackets outside strings count, so this finds string bounds and
/// brackets 64 bytes at a time, as bit masks ([`block_masks`]), in the
/// manner of simdjson: the bytes inside strings are the
/// prefix XOR of the quote mask. A block holding a backslash (which
/// may escape a quote) is walked byte by byte. Several times cheaper than a
/// byte-by-byte walk on typical payloads, where it ran at a quarter of the
/// server's time streaming large batches (decision 0011).
pub(crate) fn nests_within_limit(b: &[u8]) -> bool {
    let mut depth = Depth::default();
    let mut blocks = b.chunks_exact(64);
    for block in &mut blocks {
        let Ok(block) = <&[u8; 64]>::try_from(block) else {
            return false; // unreachable: chunks_exact
        };
        if !depth.block(block) {
            return false;
        }
    }
    blocks.remainder().iter().all(|&c| depth.byte(c))
}

/// A 64-byte block's bit masks (bit i = byte i): quotes, backslashes, opening
/// and closing brackets. Vector compares where the machine surely has them
/// (SSE2 is part of every x86_64), machine-word compares elsewhere.
#[cfg(target_arch = "x86_64")]
fn block_masks(block: &[u8; 64]) -> [u64; 4] {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let mut masks = [0u64; 4];
    for (i, lane) in block.chunks_exact(16).enumerate() {
        #[allow(unsafe_code)]
        // SAFETY: SSE2 is in the x86_64 baseline, so its intrinsics can always
        // run; the one load reads 16 bytes from `lane`, which is 16 bytes long.
        let bits = unsafe {
            let v = _mm_loadu_si128(lane.as_ptr().cast::<__m128i>());
            let eq = |c: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
            let bits = |m: __m128i| u64::from(_mm_movemask_epi8(m) as u16);
            [
                bits(eq(b'"')),
                bits(eq(b'\\')),
                bits(_mm_or_si128(eq(b'['), eq(b'{'))),
                bits(_mm_or_si128(eq(b']'), eq(b'}'))),
            ]
        };
        for (mask, b) in masks.iter_mut().zip(bits) {
            *mask |= b << (16 * i);
        }
    }
    masks
}

#[cfg(not(target_arch = "x86_64"))]
fn block_masks(block: &[u8; 64]) -> [u64; 4] {
    word_masks(block)
}

/// [`block_masks`] 8 bytes at a time in a machine word (any target).
// On x86_64 only the tests use it (against the SSE2 version).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn word_masks(block: &[u8; 64]) -> [u64; 4] {
    let (mut quotes, mut backslashes, mut opens, mut closes) = (0u64, 0u64, 0u64, 0u64);
    for (i, word) in block.chunks_exact(8).enumerate() {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        let x = u64::from_le_bytes(bytes);
        // Setting bit 5 folds `[`, `]` onto `{`, `}`; `\\` and `|` both
        // become `|`, so a `|` counts as a backslash: harmless, its block is
        // then walked byte by byte.
        let folded = x | lanes(0x20);
        quotes |= eq_bits(x, b'"') << (8 * i);
        backslashes |= eq_bits(folded, b'|') << (8 * i);
        opens |= eq_bits(folded, b'{') << (8 * i);
        closes |= eq_bits(folded, b'}') << (8 * i);
    }
    [quotes, backslashes, opens, closes]
}

/// `c` in each of the 8 bytes of a word.
// On x86_64 only the tests use it (against the SSE2 version).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
const fn lanes(c: u8) -> u64 {
    0x0101_0101_0101_0101 * c as u64
}

/// Bit k set where byte k of `x` (little-endian) equals `c`: the exact
/// zero-byte test on `x ^ lanes(c)` (0x80 per matching byte), then those
/// eight bits gathered into one byte by a multiplication.
// On x86_64 only the tests use it (against the SSE2 version).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
const fn eq_bits(x: u64, c: u8) -> u64 {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    let y = x ^ lanes(c);
    let zero = !(((y & LOW7).wrapping_add(LOW7)) | y | LOW7);
    (zero >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56
}

/// The walk of [`nests_within_limit`]: nesting so far and string state.
#[derive(Default)]
struct Depth {
    depth: usize,
    in_string: bool,
    /// The previous byte was a backslash inside a string.
    escaped: bool,
}

impl Depth {
    fn byte(&mut self, c: u8) -> bool {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if c == b'\\' {
                self.escaped = true;
            } else if c == b'"' {
                self.in_string = false;
            }
            return true;
        }
        match c {
            b'"' => self.in_string = true,
            b'[' | b'{' => {
                self.depth += 1;
                return self.depth <= MAX_DEPTH;
            }
            b']' | b'}' => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
        true
    }

    fn block(&mut self, block: &[u8; 64]) -> bool {
        let [quotes, backslashes, opens, closes] = block_masks(block);
        if backslashes != 0 || self.escaped {
            return block.iter().all(|&c| self.byte(c));
        }
        // Bit i set: byte i is inside a string (its opening quote included).
        let mut inside = quotes;
        for shift in [1, 2, 4, 8, 16, 32] {
            inside ^= inside << shift;
        }
        if self.in_string {
            inside = !inside;
        }
        self.in_string = inside >> 63 == 1;
        let (opens, closes) = (opens & !inside, closes & !inside);
        let n_opens = opens.count_ones() as usize;
        if self.depth + n_opens <= MAX_DEPTH {
            // Valid JSON never closes more than it opened.
            self.depth = (self.depth + n_opens).saturating_sub(closes.count_ones() as usize);
            return true;
        }
        // Near the limit: bracket by bracket, in order.
        let mut brackets = opens | closes;
        while brackets != 0 {
            let bit = brackets & brackets.wrapping_neg();
            if opens & bit != 0 {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return false;
                }
            } else {
                self.depth = self.depth.saturating_sub(1);
            }
            brackets ^= bit;
        }
        true
    }
}

const fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// A non-recursive JSON grammar check. `stack` holds one bit per open
/// container (1 = object), so no allocation happens whatever the input.
struct Validator<'a> {
    b: &'a [u8],
    i: usize,
    stack: [u64; 2],
    depth: usize,
}

impl Validator<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if !is_ws(c) {
                break;
            }
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn push(&mut self, object: bool) -> bool {
        if self.depth >= MAX_DEPTH {
            return false;
        }
        let (word, bit) = (self.depth / 64, self.depth % 64);
        if let Some(w) = self.stack.get_mut(word) {
            if object {
                *w |= 1 << bit;
            } else {
                *w &= !(1 << bit);
            }
        }
        self.depth += 1;
        true
    }

    /// Whether the innermost open container is an object.
    fn top_is_object(&self) -> bool {
        let d = self.depth.wrapping_sub(1);
        self.stack
            .get(d / 64)
            .is_some_and(|w| w & (1 << (d % 64)) != 0)
    }

    /// `"key" :` after an object's `{` or `,`.
    fn key(&mut self) -> bool {
        self.skip_ws();
        if !self.eat(b'"') || !self.string_rest() {
            return false;
        }
        self.skip_ws();
        self.eat(b':')
    }

    fn run(mut self) -> bool {
        loop {
            // A value is expected here.
            self.skip_ws();
            let Some(c) = self.peek() else { return false };
            self.i += 1;
            let scalar_ok = match c {
                b'{' => {
                    self.skip_ws();
                    if self.eat(b'}') {
                        true
                    } else {
                        if !self.push(true) || !self.key() {
                            return false;
                        }
                        continue;
                    }
                }
                b'[' => {
                    self.skip_ws();
                    if self.eat(b']') {
                        true
                    } else {
                        if !self.push(false) {
                            return false;
                        }
                        continue;
                    }
                }
                b'"' => self.string_rest(),
                b't' => self.literal(b"rue"),
                b'f' => self.literal(b"alse"),
                b'n' => self.literal(b"ull"),
                b'-' | b'0'..=b'9' => {
                    self.i -= 1;
                    self.number()
                }
                _ => false,
            };
            if !scalar_ok {
                return false;
            }
            // A value ended: close containers until one continues with `,`.
            loop {
                self.skip_ws();
                if self.depth == 0 {
                    return self.i == self.b.len();
                }
                let object = self.top_is_object();
                match self.peek() {
                    Some(b',') => {
                        self.i += 1;
                        if object && !self.key() {
                            return false;
                        }
                        break;
                    }
                    Some(b'}') if object => {
                        self.i += 1;
                        self.depth -= 1;
                    }
                    Some(b']') if !object => {
                        self.i += 1;
                        self.depth -= 1;
                    }
                    _ => return false,
                }
            }
        }
    }

    fn literal(&mut self, rest: &[u8]) -> bool {
        if self.b.get(self.i..self.i + rest.len()) == Some(rest) {
            self.i += rest.len();
            true
        } else {
            false
        }
    }

    /// The rest of a string after its opening quote. UTF-8 was checked once
    /// for the whole input, so only escapes and control characters matter.
    fn string_rest(&mut self) -> bool {
        loop {
            let Some(c) = self.peek() else { return false };
            self.i += 1;
            match c {
                b'"' => return true,
                b'\\' => {
                    let Some(e) = self.peek() else { return false };
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            let hex = self.b.get(self.i..self.i + 4);
                            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                                return false;
                            }
                            self.i += 4;
                        }
                        _ => return false,
                    }
                }
                0..=0x1f => return false,
                _ => {}
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> bool {
        self.eat(b'-');
        if !self.eat(b'0') && self.digits() == 0 {
            return false;
        }
        if self.eat(b'.') && self.digits() == 0 {
            return false;
        }
        if self.eat(b'e') || self.eat(b'E') {
            if !self.eat(b'+') {
                self.eat(b'-');
            }
            if self.digits() == 0 {
                return false;
            }
        }
        true
    }
}

/// What to write for each byte inside a string: 0 = itself, `u` = `\u00XX`,
/// anything else = a backslash and that character.
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Writes `s` as a JSON string literal, quotes included.
pub(crate) fn write_str(out: &mut BytesMut, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.put_u8(b'"');
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc = ESCAPE[b as usize];
        if esc == 0 {
            continue;
        }
        if start < i {
            out.extend_from_slice(&bytes[start..i]);
        }
        if esc == b'u' {
            let hi = HEX[usize::from(b >> 4)];
            let lo = HEX[usize::from(b & 0xf)];
            out.extend_from_slice(&[b'\\', b'u', b'0', b'0', hi, lo]);
        } else {
            out.extend_from_slice(&[b'\\', esc]);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.put_u8(b'"');
}

/// How many bytes [`write_str`] writes for `s`, quotes included.
pub(crate) fn str_len(s: &str) -> usize {
    s.bytes()
        .map(|b| match ESCAPE[b as usize] {
            0 => 1,
            b'u' => 6,
            _ => 2,
        })
        .sum::<usize>()
        + 2
}

/// How many digits [`write_u64`] writes for `v`.
pub(crate) const fn u64_len(v: u64) -> usize {
    match v.checked_ilog10() {
        Some(d) => d as usize + 1,
        None => 1,
    }
}

/// Writes `v` in decimal.
pub(crate) fn write_u64(out: &mut BytesMut, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Writes `data` as standard padded base64 (no quotes).
pub(crate) fn write_base64(out: &mut BytesMut, data: &[u8]) {
    let len = data.len().div_ceil(3) * 4;
    let start = out.len();
    out.resize(start + len, 0);
    let written = base64::engine::general_purpose::STANDARD
        .encode_slice(data, &mut out[start..])
        .unwrap_or(0);
    debug_assert_eq!(written, len);
    out.truncate(start + written);
}

/// Decodes standard padded base64.
pub(crate) fn read_base64(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    base64::engine::general_purpose::STANDARD.decode(text)
}

/// Upper bound of the base64 length of `n` bytes, for reserving.
pub(crate) const fn base64_len(n: usize) -> usize {
    n.div_ceil(3) * 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_and_word_masks_agree() {
        let alphabet = b"\"\\[]{}|x ;\x80\xff";
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let mut block = [0u8; 64];
            for b in &mut block {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                *b = alphabet[(seed % alphabet.len() as u64) as usize];
            }
            let [q, bs, o, c] = word_masks(&block);
            let exact = |f: &dyn Fn(u8) -> bool| {
                (0..64).fold(0u64, |m, i| m | (u64::from(f(block[i])) << i))
            };
            assert_eq!(q, exact(&|b| b == b'"'));
            assert_eq!(bs, exact(&|b| b == b'\\' || b == b'|'));
            assert_eq!(o, exact(&|b| b == b'[' || b == b'{'));
            assert_eq!(c, exact(&|b| b == b']' || b == b'}'));
            let [vq, vbs, vo, vc] = block_masks(&block);
            assert_eq!((vq, vo, vc), (q, o, c));
            // The vector masks are exact; the word masks may add `|`.
            assert_eq!(vbs & !bs, 0);
        }
    }

    #[test]
    fn eq_bits_marks_exactly_the_equal_bytes() {
        let words: [[u8; 8]; 4] = [
            *b"a\"b\"[{}]",
            *b"\"\"\"\"\"\"\"\"",
            [0, 0x22, 0xA2, 0x21, 0x23, 0x80, 0xff, 0x22],
            *b"xxxxxxxx",
        ];
        for w in words {
            let x = u64::from_le_bytes(w);
            for c in [b'"', 0, 0xff, b'x', b'{'] {
                let want = w
                    .iter()
                    .enumerate()
                    .fold(0u64, |m, (i, &b)| m | (u64::from(b == c) << i));
                assert_eq!(eq_bits(x, c), want, "{w:?} {c}");
            }
        }
    }

    /// The block walk agrees with the full check on valid JSON: depths
    /// around the limit, brackets, quotes and backslashes inside strings at
    /// every offset of a 64-byte block, escapes across block edges.
    #[test]
    fn nesting_check_agrees_with_the_full_check() {
        let fillers = [
            "",
            "x",
            r#"\""#,
            r#"\\"#,
            r#"]]}}"#,
            r#"[[{{"#,
            r#"a\"]\\"#,
            r#"\u005b"#,
        ];
        let mut checked = 0;
        for depth in [1, 2, 60, 127, 128, 129, 140] {
            for pad in 0..70 {
                for filler in fillers {
                    let s = format!("{}{filler}", "y".repeat(pad));
                    // The string sits before the innermost value, at `pad`
                    // bytes of shift, and again at the bottom.
                    let text = format!(
                        r#"{}"{s}",{{"k{s}":"{s}"}}{}"#,
                        "[".repeat(depth - 1),
                        "]".repeat(depth - 1)
                    );
                    let text = if depth == 1 {
                        format!("[{text}]")
                    } else {
                        text
                    };
                    assert!(
                        serde_json::from_str::<serde_json::Value>(&text).is_ok() || depth > 120
                    );
                    assert_eq!(
                        nests_within_limit(text.as_bytes()),
                        is_json(text.as_bytes()),
                        "depth {depth}, pad {pad}, filler {filler}: {text}"
                    );
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 7 * 70 * 8);
        // Flat but long: many blocks, no nesting to speak of.
        let row = r#"[0,"2022-03-29T20:35:56.581Z",1,116.9,"c00070","a \"q\" [x]"]"#;
        let rows = format!("[{}]", vec![row; 400].join(","));
        assert!(nests_within_limit(rows.as_bytes()));
        assert!(is_json(rows.as_bytes()));
    }
    use serde_json::value::RawValue;

    /// The reference: serde_json accepts `b` as one raw value spanning it all.
    fn serde_accepts(b: &[u8]) -> bool {
        match serde_json::from_slice::<&RawValue>(b) {
            Ok(raw) => raw.get().len() == b.len(),
            Err(_) => false,
        }
    }

    #[test]
    fn accepts_valid_json() {
        for s in [
            "0",
            "-0",
            "1.5e-3",
            "-12E+4",
            "true",
            "false",
            "null",
            "\"\"",
            "\"a\\u00e9\\n\\\"\"",
            "\"é€😀\"",
            "[]",
            "{}",
            "[1, 2 ,[3,{}]]",
            "{\"a\" : {\"b\":[null]} , \"c\":\"d\"}",
            "{\"\":0}",
        ] {
            assert!(is_json(s.as_bytes()), "{s}");
            assert!(serde_accepts(s.as_bytes()), "{s}");
        }
    }

    #[test]
    fn rejects_invalid_json() {
        for s in [
            "",
            " 1",
            "1 ",
            "01",
            "1.",
            ".5",
            "1e",
            "-",
            "+1",
            "tru",
            "nul",
            "\"a",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\t\"",
            "[1,]",
            "[,1]",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "{1:2}",
            "[}",
            "{]",
            "[1]]",
            "[[1]",
            "1 2",
            "{}{}",
            "\u{0}",
        ] {
            assert!(!is_json(s.as_bytes()), "{s:?}");
        }
        assert!(!is_json(b"\"\xff\""));
        assert!(!is_json(&[0x80, 0x01]));
    }

    #[test]
    fn depth_limit() {
        let ok = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(is_json(ok.as_bytes()));
        let deep = format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        assert!(!is_json(deep.as_bytes()));
        let mixed = format!("{}1{}", "{\"k\":[".repeat(64), "]}".repeat(64));
        assert!(is_json(mixed.as_bytes()));
    }

    /// Random strings over a JSON-ish alphabet: whenever we accept, serde_json
    /// must accept too (we may only be stricter).
    #[test]
    fn never_looser_than_serde_json() {
        let alphabet: &[&[u8]] = &[
            b"{",
            b"}",
            b"[",
            b"]",
            b",",
            b":",
            b"\"",
            b"\\",
            b"u",
            b"0",
            b"1",
            b"9",
            b"-",
            b"+",
            b".",
            b"e",
            b"E",
            b" ",
            b"\n",
            b"true",
            b"null",
            b"a",
            b"\"k\":",
            "é".as_bytes(),
            b"\x01",
            b"/",
            b"n",
            b"\xff",
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut agreed_valid = 0;
        for _ in 0..200_000 {
            let len = (next() % 12) as usize;
            let mut s = Vec::new();
            for _ in 0..len {
                s.extend_from_slice(alphabet[(next() % alphabet.len() as u64) as usize]);
            }
            let ours = is_json(&s);
            let theirs = serde_accepts(&s);
            if ours {
                assert!(
                    theirs,
                    "accepted what serde_json rejects: {:?}",
                    String::from_utf8_lossy(&s)
                );
                agreed_valid += 1;
            } else if theirs {
                // Only whitespace at the edges separates us.
                assert!(
                    s.first().is_some_and(|c| is_ws(*c)) || s.last().is_some_and(|c| is_ws(*c)),
                    "rejected valid JSON: {:?}",
                    String::from_utf8_lossy(&s)
                );
            }
        }
        assert!(agreed_valid > 100);
    }

    #[test]
    fn escapes_like_serde_json() {
        for s in [
            "",
            "plain",
            "q\"b\\s/",
            "\u{0}\u{1f}\u{7f}\t\n\r\u{8}\u{c}",
            "é€😀\u{2028}",
        ] {
            let mut out = BytesMut::new();
            write_str(&mut out, s);
            assert_eq!(
                &out[..],
                serde_json::to_string(s).unwrap_or_default().as_bytes()
            );
        }
    }

    #[test]
    fn formats_integers() {
        for v in [0, 7, 10, 99, 12345, u64::from(u32::MAX), u64::MAX] {
            let mut out = BytesMut::new();
            write_u64(&mut out, v);
            assert_eq!(&out[..], v.to_string().as_bytes());
            assert_eq!(out.len(), u64_len(v));
        }
    }

    #[test]
    fn base64_round_trip() {
        for data in [&b""[..], b"a", b"ab", b"abc", b"\x00\xff\x10\x80"] {
            let mut out = BytesMut::new();
            write_base64(&mut out, data);
            assert_eq!(out.len(), base64_len(data.len()));
            let text = std::str::from_utf8(&out).unwrap_or_default();
            assert_eq!(read_base64(text).ok().as_deref(), Some(data));
        }
    }
}
