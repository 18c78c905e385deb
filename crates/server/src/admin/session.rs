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
//! Login attempts are limited over all clients together (a sliding window
//! of one minute): the handler does not see the peer's address, and a
//! single budget also bounds what a distributed guesser gets. The price is
//! that a flood of bad logins locks the operator out for that minute too.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most sessions alive at once.
pub const MAX_SESSIONS: usize = 32;

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
    attempts: VecDeque<Instant>,
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

    /// Counts a login attempt; false when the last minute's budget is spent
    /// (the attempt is then not counted).
    pub fn attempt(&self) -> bool {
        let now = Instant::now();
        let mut inner = self.lock();
        while inner
            .attempts
            .front()
            .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(60))
        {
            inner.attempts.pop_front();
        }
        if inner.attempts.len() >= self.attempts_per_minute {
            return false;
        }
        inner.attempts.push_back(now);
        true
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
    fn attempts_are_limited_per_minute() {
        let s = Sessions::new(Duration::from_secs(60), 3);
        assert!(s.attempt() && s.attempt() && s.attempt());
        assert!(!s.attempt());
        assert!(!s.attempt());
    }

    #[test]
    fn same_is_equality() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
        assert!(same(b"", b""));
    }
}
