//! Redis Cluster key slots: which of the 16384 slots a key lives in
//! (decision 0021). Pure: no I/O, no state.
//!
//! A key's slot is CRC16 (XMODEM: polynomial 0x1021, initial value 0) of
//! its *hash tag* modulo 16384. The hash tag is the text between the first
//! `{` and the first `}` after it, when that text is not empty; otherwise
//! the whole key. Keys with one hash tag share a slot, which is what lets
//! a Lua script touch several keys in Redis Cluster: Herald's channel keys
//! are `P:{CHANNEL}:…`, its node-wide and game keys `{P}:…`-tagged (see
//! decision 0021 for the layout).
//!
//! [`tag_for`] goes the other way: a short string whose slot is the given
//! one, for keys that must live in a chosen slot (the per-slot fail-over
//! epoch).

/// Slots in a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// CRC16/XMODEM of `data`, as Redis Cluster computes it.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The part of `key` that is hashed: its hash tag if it has a non-empty
/// one, else the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        let rest = key.get(open + 1..).unwrap_or_default();
        if let Some(close) = rest.iter().position(|&b| b == b'}') {
            if close > 0 {
                return rest.get(..close).unwrap_or(key);
            }
        }
    }
    key
}

/// The slot of `key`.
pub fn slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOTS
}

/// A short string (digits and letters) whose slot is `slot`: put between
/// braces in a key, it places that key in `slot`. The first such string
/// in a fixed order, so every node finds the same one.
pub fn tag_for(slot: u16) -> String {
    let slot = slot % SLOTS;
    // 16384 slots, 36^3 = 46656 three-character strings: every slot is hit
    // by some string of at most three characters in practice; the loop
    // goes on to longer ones if not.
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut n: u64 = 0;
    loop {
        let mut s = Vec::with_capacity(4);
        let mut k = n;
        loop {
            s.push(ALPHABET[(k % 36) as usize]);
            k /= 36;
            if k == 0 {
                break;
            }
        }
        if crc16(&s) % SLOTS == slot {
            return String::from_utf8(s).unwrap_or_default();
        }
        n += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from `CLUSTER KEYSLOT` of redis-server 7.0.
    #[test]
    fn slots_match_redis() {
        for (key, want) in [
            ("foo", 12182),
            ("bar", 5061),
            ("user1000", 3443),
            ("{user1000}.following", 3443),
            ("123456789", 12739),
            ("herald", 2546),
            ("", 0),
            ("{}x", 10595),
            ("a{}{b}", 15033),
            ("{a}{b}", 15495),
            ("x{y", 2740),
        ] {
            assert_eq!(slot(key.as_bytes()), want, "{key:?}");
        }
        assert_eq!(crc16(b"123456789"), 0x31c3);
    }

    #[test]
    fn hash_tags() {
        assert_eq!(hash_tag(b"herald:{news}:m"), b"news");
        assert_eq!(hash_tag(b"{}x"), b"{}x");
        assert_eq!(hash_tag(b"a{b}{c}"), b"b");
        assert_eq!(hash_tag(b"a{"), b"a{");
        assert_eq!(slot(b"herald:{chat.room}:m"), slot(b"herald:{chat.room}:s"));
    }

    #[test]
    fn tags_for_every_slot() {
        for s in [0u16, 1, 2546, 12182, 16383] {
            let t = tag_for(s);
            assert!(t.len() <= 4, "{t}");
            assert_eq!(slot(format!("x:{{{t}}}:y").as_bytes()), s);
        }
    }
}
