//! Where a browser's `ack`-extension sessions are, carried in a cookie, so
//! that a session lost with its node resumes on another without losing a
//! delivery (docs/decisions/0016-bayeux.md, "Resuming after a node's loss").
//!
//! CometD's `ack` extension promises at-least-once delivery for as long as
//! a session lives; the session lives in one node's memory, and a client
//! whose node dies re-handshakes elsewhere with nothing of it. Unchanged
//! CometD clients echo nothing of the server's back on a new handshake —
//! except cookies, which both the browser and `cometd-nodejs-client` keep
//! and send on every long-polling request. So each `/meta/connect` reply of
//! an `ack` session sets the `BAYEUX_ACKED` cookie to the positions (Herald
//! epoch and offset, per channel) of what the client has *acknowledged*, and
//! a handshake that brings the cookie subscribes each of those channels
//! again from there, through Herald's recovery: what the client missed is
//! delivered, what it had may come again (at least once, as the extension
//! says), nothing is skipped silently.
//!
//! The cookie holds entries `tag~channel~epoch~offset~written` joined by
//! `!`, each field percent-encoded; `tag` names the session that wrote the
//! entry and `written` when (Unix seconds). Several tabs of one browser
//! share the cookie: each rewrites only its own entries and keeps the
//! others' that are [`live`], and a resuming session starts each channel
//! from the lowest offset a live entry gives. An entry is live when it was
//! written at most [`LIVE_SECS`] before the newest entry of the cookie:
//! every session of a browser rewrites its entries at least once per held
//! connect, so a closed or reloaded tab's entries fall behind within a
//! minute and stop holding resumption back (which would only bring
//! duplicates, or a needless `recovered: false` once history has moved on),
//! while the entries of tabs that lost their node together stay live
//! however long the outage lasts (the test is relative to the newest write,
//! not to the clock).
//!
//! This module only encodes and decodes: no I/O, and a cookie it cannot
//! read is ignored entry by entry (a client controls its cookies, and a
//! forged position can only ask for history of a channel the client may
//! subscribe to anyway).

/// The cookie's name.
pub const COOKIE: &str = "BAYEUX_ACKED";

/// Largest cookie value written: entries beyond it (other sessions' first)
/// are left out, keeping well within browsers' 4 KiB per cookie.
pub const MAX_VALUE: usize = 3000;

/// How far behind the newest write an entry may be and still count (see
/// the module docs): twice CometD's default connect timeout.
pub const LIVE_SECS: u64 = 60;

/// One position: the session `tag` had acknowledged everything of Herald
/// channel `channel` up to `offset` in `epoch`, as of `written`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The writing session's tag.
    pub tag: String,
    /// The Herald channel.
    pub channel: String,
    /// Its epoch.
    pub epoch: String,
    /// The last acknowledged offset.
    pub offset: u64,
    /// When it was written (Unix seconds).
    pub written: u64,
}

/// The entries of a cookie value; malformed entries are skipped.
pub fn decode(value: &str) -> Vec<Entry> {
    value
        .split('!')
        .filter_map(|e| {
            let mut f = e.split('~');
            let tag = unescape(f.next()?)?;
            let channel = unescape(f.next()?)?;
            let epoch = unescape(f.next()?)?;
            let offset = f.next()?.parse().ok()?;
            let written = f.next()?.parse().ok()?;
            if f.next().is_some() || tag.is_empty() || channel.is_empty() {
                return None;
            }
            Some(Entry {
                tag,
                channel,
                epoch,
                offset,
                written,
            })
        })
        .collect()
}

/// A cookie value of `entries` in order, stopping before the one that
/// would make it longer than [`MAX_VALUE`].
pub fn encode<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> String {
    let mut out = String::new();
    for e in entries {
        let one = format!(
            "{}~{}~{}~{}~{}",
            escape(&e.tag),
            escape(&e.channel),
            escape(&e.epoch),
            e.offset,
            e.written
        );
        let sep = usize::from(!out.is_empty());
        if out.len() + sep + one.len() > MAX_VALUE {
            break;
        }
        if sep == 1 {
            out.push('!');
        }
        out.push_str(&one);
    }
    out
}

/// The entries that still count: written at most [`LIVE_SECS`] before the
/// newest of them, or before `now` when given (a session writing now).
pub fn live(entries: Vec<Entry>, now: Option<u64>) -> Vec<Entry> {
    let newest = entries
        .iter()
        .map(|e| e.written)
        .chain(now)
        .max()
        .unwrap_or(0);
    entries
        .into_iter()
        .filter(|e| e.written.saturating_add(LIVE_SECS) >= newest)
        .collect()
}

/// The position to resume `channel` from: the lowest offset `entries` give
/// for it (entries of an epoch that is gone cannot be compared with the
/// others: the lowest is still the safe one to ask for, and Herald answers
/// `recovered: false` when its epoch is gone).
pub fn resume_from<'a>(entries: &'a [Entry], channel: &str) -> Option<(&'a str, u64)> {
    entries
        .iter()
        .filter(|e| e.channel == channel)
        .min_by_key(|e| e.offset)
        .map(|e| (e.epoch.as_str(), e.offset))
}

/// Bytes a cookie value may hold as they are: RFC 6265's cookie-octets,
/// less the separators and the escape.
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':' | b'*' | b'@' | b'+')
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if plain(b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn unescape(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else if plain(b[i]) {
            out.push(b[i]);
            i += 1;
        } else {
            return None;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(tag: &str, channel: &str, epoch: &str, offset: u64) -> Entry {
        at(tag, channel, epoch, offset, 1_800_000_000)
    }

    fn at(tag: &str, channel: &str, epoch: &str, offset: u64, written: u64) -> Entry {
        Entry {
            tag: tag.into(),
            channel: channel.into(),
            epoch: epoch.into(),
            offset,
            written,
        }
    }

    #[test]
    fn entries_round_trip_whatever_their_names_hold() {
        let all = vec![
            entry("a1", "chat.room-1", "e1", 7),
            entry("b2", "odd ~!%;,\"é", "ep~och", u64::MAX),
        ];
        let v = encode(&all);
        assert!(
            v.bytes()
                .all(|b| plain(b) || b == b'~' || b == b'!' || b == b'%'),
            "{v}"
        );
        assert_eq!(decode(&v), all);
    }

    #[test]
    fn malformed_entries_are_skipped_and_the_rest_kept() {
        let good = encode(&[entry("t", "c", "e", 3)]);
        let v =
            format!("junk!t~c~e~x~1!t~~e~1~1!t~c~e~1~9~9!t~c~e~1!%zz~c~e~1~1!{good}!t~c;~e~2~1");
        assert_eq!(decode(&v), vec![entry("t", "c", "e", 3)]);
        assert!(decode("").is_empty());
    }

    #[test]
    fn a_cookie_stays_under_its_bound() {
        let many: Vec<Entry> = (0..500)
            .map(|i| entry("tag", &format!("channel.{i}"), "epoch", i))
            .collect();
        let v = encode(&many);
        assert!(v.len() <= MAX_VALUE);
        let back = decode(&v);
        assert!(back.len() > 10 && back.len() < 500);
        assert_eq!(back[..], many[..back.len()]);
    }

    #[test]
    fn entries_a_minute_behind_the_newest_stop_counting() {
        let e = vec![
            at("old", "x", "E", 1, 1000),
            at("a", "x", "E", 7, 1061),
            at("b", "x", "E", 5, 1030),
        ];
        let l = live(e.clone(), None);
        assert_eq!(
            l.iter().map(|e| e.tag.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(resume_from(&l, "x"), Some(("E", 5)));
        // However long ago the newest was written: only relative age counts.
        assert_eq!(live(e.clone(), None).len(), 2);
        // A session writing now ages every entry against now.
        assert!(live(e, Some(5000)).is_empty());
    }

    #[test]
    fn resuming_starts_at_the_lowest_offset_any_tab_acknowledged() {
        let e = vec![
            entry("a", "x", "E", 9),
            entry("b", "x", "E", 4),
            entry("b", "y", "F", 1),
        ];
        assert_eq!(resume_from(&e, "x"), Some(("E", 4)));
        assert_eq!(resume_from(&e, "y"), Some(("F", 1)));
        assert_eq!(resume_from(&e, "z"), None);
    }
}
