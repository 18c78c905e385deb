//! Connection-level limits that no session can enforce on its own: connections
//! per IP address, the deadline for `connect` after a handshake, and the
//! browser Origin allowlist. (Per-message limits — size, rate, subscriptions —
//! live where messages pass: the transports' framing and the session.)
//!
//! Each is cheap when unused: the per-IP map is only touched when a limit is
//! set, the connect deadlines are a FIFO (one fixed timeout, so deadlines are
//! already in order) swept once a second, and the Origin check is a short list
//! scan on the handshake only.

use herald_core::shard::{lock, Sharded};
use herald_core::Client;
use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, Weak};

/// Open connections per IP address.
#[derive(Debug)]
pub struct PerIp {
    max: usize,
    counts: Sharded<IpAddr, usize>,
}

/// Holds one connection's place in [`PerIp`]; released when dropped.
#[derive(Debug)]
pub struct IpSlot {
    limiter: Arc<PerIp>,
    ip: IpAddr,
}

impl PerIp {
    /// At most `max` connections per address (0: no limit).
    pub fn new(max: usize) -> PerIp {
        PerIp {
            max,
            counts: Sharded::new(16),
        }
    }

    /// Takes a place for `ip`: `Ok(None)` when there is no limit, `Err(())` when
    /// the address is at its limit.
    #[allow(clippy::result_unit_err)]
    pub fn acquire(self: &Arc<Self>, ip: IpAddr) -> Result<Option<Box<IpSlot>>, ()> {
        if self.max == 0 {
            return Ok(None);
        }
        let mut counts = self.counts.lock(&ip);
        let n = counts.entry(ip).or_insert(0);
        if *n >= self.max {
            return Err(());
        }
        *n += 1;
        Ok(Some(Box::new(IpSlot {
            limiter: self.clone(),
            ip,
        })))
    }

    /// Open connections from `ip`.
    #[cfg(test)]
    pub fn count(&self, ip: IpAddr) -> usize {
        self.counts.lock(&ip).get(&ip).copied().unwrap_or(0)
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut counts = self.limiter.counts.lock(&self.ip);
        if let Some(n) = counts.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

/// Capacity the connect-deadline queue keeps however far it drains (1 KiB).
const DEADLINES_KEPT: usize = 64;

/// Clients that completed a handshake but not yet `connect`, oldest first.
#[derive(Debug, Default)]
pub struct ConnectDeadlines {
    queue: Mutex<VecDeque<(u32, Weak<Client>)>>,
}

impl ConnectDeadlines {
    /// `client` must connect by node-clock second `deadline`.
    pub fn add(&self, deadline: u32, client: &Arc<Client>) {
        lock(&self.queue).push_back((deadline, Arc::downgrade(client)));
    }

    /// Clients past their deadline (at node second `now`) that are still not
    /// connected.
    ///
    /// Gives back the queue's spare capacity once it has mostly drained: a
    /// burst of 10,000 connections leaves a 16,384-entry buffer (256 KiB,
    /// 26 bytes per connection that stays open) that a `VecDeque` never
    /// shrinks by itself (decision 0010). At most once a sweep, and only
    /// when under a quarter is used, so a steady flow does not reallocate.
    pub fn overdue(&self, now: u32) -> Vec<Arc<Client>> {
        let mut q = lock(&self.queue);
        let mut out = Vec::new();
        while q.front().is_some_and(|(d, _)| *d <= now) {
            if let Some((_, weak)) = q.pop_front() {
                out.extend(weak.upgrade().filter(|c| !c.is_connected()));
            }
        }
        if q.capacity() > DEADLINES_KEPT && q.len() < q.capacity() / 4 {
            let keep = (q.len() * 2).max(DEADLINES_KEPT);
            q.shrink_to(keep);
        }
        out
    }

    /// The queue's capacity (tests).
    #[cfg(test)]
    fn capacity(&self) -> usize {
        lock(&self.queue).capacity()
    }
}

/// Whether a request with this `Origin` header may proceed: always when the
/// allowlist is empty or the request has no Origin (not a browser); otherwise
/// only an exact (case-insensitive) match.
pub fn origin_allowed(allowed: &[String], origin: Option<&[u8]>) -> bool {
    let Some(origin) = origin else {
        return true;
    };
    if allowed.is_empty() {
        return true;
    }
    let origin = origin.strip_suffix(b"/").unwrap_or(origin);
    allowed
        .iter()
        .any(|a| a == "*" || a.as_bytes().eq_ignore_ascii_case(origin))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_ip_counts_and_releases() {
        let l = Arc::new(PerIp::new(2));
        let ip: IpAddr = [10, 0, 0, 1].into();
        let a = l.acquire(ip).expect("first");
        let _b = l.acquire(ip).expect("second");
        assert!(l.acquire(ip).is_err());
        assert!(
            l.acquire([10, 0, 0, 2].into()).is_ok(),
            "other IPs unaffected"
        );
        drop(a);
        assert_eq!(l.count(ip), 1);
        assert!(l.acquire(ip).is_ok());
        assert!(Arc::new(PerIp::new(0)).acquire(ip).expect("off").is_none());
    }

    #[test]
    fn origins() {
        let list = vec!["https://app.example.com".to_string()];
        assert!(origin_allowed(&list, None));
        assert!(origin_allowed(&list, Some(b"https://APP.example.com")));
        assert!(!origin_allowed(&list, Some(b"https://evil.example")));
        assert!(!origin_allowed(&list, Some(b"null")));
        assert!(origin_allowed(&[], Some(b"https://evil.example")));
    }

    #[test]
    fn deadlines() {
        let d = ConnectDeadlines::default();
        let a = Arc::new(Client::new(1, herald_proto::Encoding::Json, 1024, 0));
        let b = Arc::new(Client::new(2, herald_proto::Encoding::Json, 1024, 0));
        d.add(5, &a);
        d.add(6, &b);
        b.set_identity(Default::default());
        assert!(d.overdue(4).is_empty());
        let late: Vec<u64> = d.overdue(6).iter().map(|c| c.id).collect();
        assert_eq!(late, vec![1], "connected clients are left alone");
    }

    #[test]
    fn drained_deadlines_give_back_their_capacity() {
        let d = ConnectDeadlines::default();
        let clients: Vec<Arc<Client>> = (0..10_000)
            .map(|i| Arc::new(Client::new(i, herald_proto::Encoding::Json, 1024, 0)))
            .collect();
        for (i, c) in clients.iter().enumerate() {
            d.add(if i < 9_000 { 5 } else { 7 }, c);
        }
        assert!(d.capacity() >= 10_000);
        // 1,000 left of 16,384: shrunk to twice what is left.
        assert_eq!(d.overdue(5).len(), 9_000);
        assert!((2_000..4_096).contains(&d.capacity()), "{}", d.capacity());
        // Drained: down to the small floor.
        assert_eq!(d.overdue(7).len(), 1_000);
        assert!(d.capacity() <= 2 * DEADLINES_KEPT, "{}", d.capacity());
        // Still a working queue.
        d.add(9, &clients[0]);
        assert_eq!(d.overdue(9).len(), 1);
    }
}
