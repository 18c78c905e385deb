//! Dashboard sessions and the login attempt limit, in memory on the node
//! that served the login (a cluster's nodes do not share sessions: the
//! operator logs in to the node they browse).
//!
//! A session is a random 256-bit token (the `herald_admin` cookie) with its
//! own random CSRF token, which the page reads once from
//! `/admin/api/session` and sends back as `X-CSRF-Token` on every action.
//! Both are compared in constant time. At most [`MAX_SESSIONS`] live at
//! once (the oldest goes first), each for the configured time.
//!
//! Login attempts are limited per client address (a sliding window of one
//! minute, `login_attempts_per_minute` each), so that a flood from one
//! address does not lock the operator out, and over all addresses together
//! at [`GLOBAL_FACTOR`] times that, a backstop that also bounds what a
//! distributed guesser gets. IPv6 addresses count by their /64 (one host
//! usually has a whole /64), IPv4-mapped ones as IPv4. The map of recent
//! attempts holds at most [`MAX_ADDRESSES`] addresses, each forgotten a
//! minute after its last counted attempt. Behind a reverse proxy every
//! login comes from the proxy's address: forwarded headers are not trusted.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most sessions alive at once.
pub const MAX_SESSIONS: usize = 32;

/// The global login ceiling is this many times the per-address one.
pub const GLOBAL_FACTOR: usize = 10;

/// Most client addresses whose recent login attempts are kept.
pub const MAX_ADDRESSES: usize = 4096;

/// How long an attempt counts.
const WINDOW: Duration = Duration::from_secs(60);

/// One logged-in session.
#[derive(Debug, Clone)]
pub struct Session {
    /// Who logged in.
    pub user: String,
    /// The token every action must carry.
    pub csrf: String,
    /// When it ends.
    expires: Instant,
    /// When it began (eviction order).
    created: Instant,
}

/// Sessions by token, and recent login attempts.
#[derive(Debug)]
pub struct Sessions {
    inner: Mutex<Inner>,
    ttl: Duration,
    attempts_per_minute: usize,
}

#[derive(Debug, Default)]
struct Inner {
    sessions: HashMap<String, Session>,
    /// All attempts of the last minute (the global ceiling).
    attempts: VecDeque<Instant>,
    /// Each address's attempts of the last minute, oldest first.
    by_ip: HashMap<IpAddr, VecDeque<Instant>>,
}

/// Why a login attempt is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limited {
    /// This address spent its budget.
    Address,
    /// All addresses together spent the global one.
    Global,
}

/// The key an address's attempts count under: IPv4 as is (IPv4-mapped
/// IPv6 too), IPv6 by its /64.
pub fn bucket(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(bits))
        }
        v4 => v4,
    }
}

/// Drops the attempts older than [`WINDOW`] from the front of `q`.
fn expire(q: &mut VecDeque<Instant>, now: Instant) {
    while q.front().is_some_and(|t| now.duration_since(*t) >= WINDOW) {
        q.pop_front();
    }
}

/// A random token: 32 bytes, hex.
fn token() -> Option<String> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).ok()?;
    Some(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Constant-time equality of two byte strings (length aside).
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Sessions {
    /// No sessions; at most `attempts_per_minute` logins a minute, each
    /// session lasting `ttl`.
    pub fn new(ttl: Duration, attempts_per_minute: u32) -> Sessions {
        Sessions {
            inner: Mutex::new(Inner::default()),
            ttl,
            attempts_per_minute: attempts_per_minute as usize,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts a login attempt from `peer` (`None`: unknown, only the global
    /// ceiling applies); refused (and then not counted) when the address or
    /// everyone together spent the last minute's budget.
    pub fn attempt(&self, peer: Option<IpAddr>) -> Result<(), Limited> {
        let now = Instant::now();
        let per_ip = self.attempts_per_minute;
        let global = per_ip.saturating_mul(GLOBAL_FACTOR);
        let mut inner = self.lock();
        expire(&mut inner.attempts, now);
        if inner.attempts.len() >= global {
            return Err(Limited::Global);
        }
        if let Some(ip) = peer.map(bucket) {
            if !inner.by_ip.contains_key(&ip) && inner.by_ip.len() >= MAX_ADDRESSES {
                inner.by_ip.retain(|_, q| {
                    expire(q, now);
                    !q.is_empty()
                });
                if inner.by_ip.len() >= MAX_ADDRESSES {
                    // Still full: forget the address whose last attempt is
                    // oldest (it has the least budget left to lose).
                    let oldest = inner
                        .by_ip
                        .iter()
                        .min_by_key(|(_, q)| q.back().copied())
                        .map(|(ip, _)| *ip);
                    if let Some(o) = oldest {
                        inner.by_ip.remove(&o);
                    }
                }
            }
            let q = inner.by_ip.entry(ip).or_default();
            expire(q, now);
            if q.len() >= per_ip {
                return Err(Limited::Address);
            }
            q.push_back(now);
        }
        inner.attempts.push_back(now);
        Ok(())
    }

    /// Starts a session for `user`: its cookie token and the session.
    pub fn start(&self, user: &str) -> Option<(String, Session)> {
        let (token, csrf) = (token()?, token()?);
        let now = Instant::now();
        let session = Session {
            user: user.to_string(),
            csrf,
            expires: now + self.ttl,
            created: now,
        };
        let mut inner = self.lock();
        inner.sessions.retain(|_, s| s.expires > now);
        while inner.sessions.len() >= MAX_SESSIONS {
            let oldest = inner
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.created)
                .map(|(t, _)| t.clone());
            match oldest {
                Some(t) => inner.sessions.remove(&t),
                None => break,
            };
        }
        inner.sessions.insert(token.clone(), session.clone());
        Some((token, session))
    }

    /// The live session of cookie token `token`.
    pub fn get(&self, token: &str) -> Option<Session> {
        let now = Instant::now();
        let mut inner = self.lock();
        match inner.sessions.get(token) {
            Some(s) if s.expires > now => Some(s.clone()),
            Some(_) => {
                inner.sessions.remove(token);
                None
            }
            None => None,
        }
    }

    /// Ends the session of `token`.
    pub fn end(&self, token: &str) {
        self.lock().sessions.remove(token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_start_end_and_expire() {
        let s = Sessions::new(Duration::from_secs(60), 10);
        let (t, sess) = s.start("admin").unwrap();
        assert_eq!(t.len(), 64);
        assert_ne!(t, sess.csrf);
        assert_eq!(s.get(&t).unwrap().user, "admin");
        assert!(s.get("nope").is_none());
        s.end(&t);
        assert!(s.get(&t).is_none());
        let gone = Sessions::new(Duration::ZERO, 10);
        let (t, _) = gone.start("admin").unwrap();
        assert!(gone.get(&t).is_none(), "expired at once");
    }

    #[test]
    fn sessions_are_bounded_oldest_first() {
        let s = Sessions::new(Duration::from_secs(60), 10);
        let (first, _) = s.start("a").unwrap();
        let mut last = String::new();
        for _ in 0..MAX_SESSIONS {
            last = s.start("a").unwrap().0;
        }
        assert!(s.get(&first).is_none());
        assert!(s.get(&last).is_some());
        assert_eq!(s.lock().sessions.len(), MAX_SESSIONS);
    }

    #[test]
    fn attempts_are_limited_per_address_then_globally() {
        let ip = |n: u8| Some(IpAddr::from([10, 0, 0, n]));
        let s = Sessions::new(Duration::from_secs(60), 3);
        assert!(s.attempt(ip(1)).is_ok() && s.attempt(ip(1)).is_ok() && s.attempt(ip(1)).is_ok());
        assert_eq!(s.attempt(ip(1)), Err(Limited::Address));
        assert_eq!(s.attempt(ip(1)), Err(Limited::Address));
        assert!(s.attempt(ip(2)).is_ok(), "another address keeps its budget");
        // The global ceiling: 3 * GLOBAL_FACTOR, 4 counted so far.
        let mut n = 3;
        while s.lock().attempts.len() < 3 * GLOBAL_FACTOR {
            assert!(s.attempt(ip(n)).is_ok());
            n += 1;
        }
        assert_eq!(s.attempt(ip(200)), Err(Limited::Global));
        assert_eq!(s.attempt(None), Err(Limited::Global));
    }

    #[test]
    fn addresses_are_bounded_and_v6_counts_by_its_64() {
        let s = Sessions::new(Duration::from_secs(60), u32::MAX);
        for i in 0..(MAX_ADDRESSES as u32 + 10) {
            assert!(s.attempt(Some(IpAddr::from(i.to_be_bytes()))).is_ok());
        }
        assert_eq!(s.lock().by_ip.len(), MAX_ADDRESSES);
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        let b: IpAddr = "2001:db8::ffff:1".parse().unwrap();
        let c: IpAddr = "2001:db8:0:1::1".parse().unwrap();
        assert_eq!(bucket(a), bucket(b));
        assert_ne!(bucket(a), bucket(c));
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().unwrap();
        assert_eq!(bucket(mapped), IpAddr::from([127, 0, 0, 2]));
    }

    #[test]
    fn same_is_equality() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
        assert!(same(b"", b""));
    }
}
