//! [`Target`]: where Redis is, as a `redis://`, `redis-sentinel://`
//! (decision 0020) or `redis-cluster://` (decision 0021) URL says. A leaf
//! beside the resolvers it holds ([`crate::sentinel`],
//! [`crate::topology`]): the links ([`crate::conn`], `pipe.rs`,
//! `pubsub.rs`) read it, it knows nothing of them.

use crate::sentinel::Sentinel;
use crate::topology::Topology;
use std::sync::Arc;
use tokio::sync::watch;

/// Where to find Redis: one address (`redis://`), or a master found
/// through Sentinel (`redis-sentinel://`, [`crate::sentinel`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `host:port`; with Sentinel, the master's name (for the logs).
    pub(crate) addr: String,
    /// Database number (`SELECT`), 0 by default.
    pub(crate) db: u32,
    /// Password (`AUTH`), if any.
    pub(crate) password: Option<String>,
    /// The sentinels to ask for the master, if the target is one.
    pub(crate) sentinel: Option<Arc<Sentinel>>,
    /// The cluster's seeds and slot map, if the target is a Redis Cluster
    /// (`redis-cluster://`, [`crate::cluster`]).
    pub(crate) cluster: Option<Arc<Topology>>,
}

/// A `redis://` or `redis-sentinel://` URL could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid redis URL {url:?}: {why} (expected redis://[:PASSWORD@]HOST:PORT[/DB], redis-sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB][?sentinel_password=SENTINEL_PASSWORD] or redis-cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...])")]
pub struct UrlError {
    url: String,
    why: &'static str,
}

/// Splits `[:PASSWORD@]REST` into the password and the rest.
fn auth(rest: &str) -> (Option<String>, &str) {
    let (auth, rest) = match rest.rsplit_once('@') {
        Some((a, r)) => (Some(a), r),
        None => (None, rest),
    };
    let password = auth
        .map(|a| a.strip_prefix(':').unwrap_or(a).to_string())
        .filter(|p| !p.is_empty());
    (password, rest)
}

/// The query of a `redis-sentinel://` URL: `sentinel_password=…`, the
/// sentinels' own password (their `requirepass`), percent-encoded. The
/// name is the `sentinel_` option of the `redis+sentinel://` URLs of
/// redis-py based clients and go-redis's `SentinelPassword`; a query
/// rather than the user part, which already carries the master's
/// password. Anything else in the query is refused, not ignored.
fn sentinel_query(query: &str) -> Result<Option<String>, &'static str> {
    let mut password = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if key != "sentinel_password" {
            return Err("unknown query parameter (only sentinel_password)");
        }
        let value = percent_decode(value).ok_or("sentinel_password is badly percent-encoded")?;
        password = Some(value).filter(|p| !p.is_empty());
    }
    Ok(password)
}

/// `%XX` escapes (and `+` as a space is not: a password may hold `+`).
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl Target {
    /// Parses `redis://[:PASSWORD@]HOST[:PORT][/DB]` (port 6379 by default)
    /// or `redis-sentinel://[:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB][?sentinel_password=P]`
    /// (sentinels on port 26379 by default; the password is the master's,
    /// the sentinels are asked with `sentinel_password`, if given) or
    /// `redis-cluster://[:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]` (seed
    /// nodes of a Redis Cluster, port 6379 by default; database 0 only, as
    /// Redis Cluster has no other).
    pub fn parse(url: &str) -> Result<Target, UrlError> {
        let err = |why| UrlError {
            url: url.to_string(),
            why,
        };
        let db = |d: Option<&str>| match d {
            None | Some("") => Ok(0),
            Some(d) => d.parse().map_err(|_| err("the database is not a number")),
        };
        if let Some(rest) = url.strip_prefix("redis-sentinel://") {
            // The query first: its (percent-encoded) password may hold `@`.
            let (rest, sentinel_password) = match rest.rsplit_once('?') {
                Some((r, q)) if q.contains('=') => (r, sentinel_query(q).map_err(err)?),
                _ => (rest, None),
            };
            let (password, rest) = auth(rest);
            let mut parts = rest.splitn(3, '/');
            let hosts = parts.next().unwrap_or_default();
            let name = parts.next().ok_or_else(|| err("no master name"))?;
            let db = db(parts.next())?;
            let sentinel = Sentinel::parse(hosts, name, sentinel_password).map_err(err)?;
            return Ok(Target {
                addr: format!("sentinel master {name}"),
                db,
                password,
                sentinel: Some(Arc::new(sentinel)),
                cluster: None,
            });
        }
        if let Some(rest) = url.strip_prefix("redis-cluster://") {
            let (password, hosts) = auth(rest);
            if hosts.contains('/') {
                return Err(err("a Redis Cluster has only database 0: no /DB"));
            }
            let topology = Topology::parse(hosts).map_err(err)?;
            return Ok(Target {
                addr: format!("redis cluster {hosts}"),
                db: 0,
                password,
                sentinel: None,
                cluster: Some(Arc::new(topology)),
            });
        }
        let rest = url
            .strip_prefix("redis://")
            .ok_or_else(|| err("not a redis://, redis-sentinel:// or redis-cluster:// URL"))?;
        let (password, rest) = auth(rest);
        let (hostport, db) = match rest.split_once('/') {
            Some((h, d)) => (h, db(Some(d))?),
            None => (rest, 0),
        };
        if hostport.is_empty() {
            return Err(err("no host"));
        }
        let addr = if hostport
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        {
            hostport.to_string()
        } else if hostport.contains(':') && !hostport.ends_with(']') {
            return Err(err("the port is not a number"));
        } else {
            format!("{hostport}:6379")
        };
        Ok(Target {
            addr,
            db,
            password,
            sentinel: None,
            cluster: None,
        })
    }

    /// The cluster's topology, if the target is a Redis Cluster.
    pub fn cluster(&self) -> Option<&Arc<Topology>> {
        self.cluster.as_ref()
    }

    /// The sentinels, if the target is found through them.
    pub fn sentinel(&self) -> Option<&Arc<Sentinel>> {
        self.sentinel.as_ref()
    }

    /// The address last connected or learned: the fixed one, or the
    /// master's as Sentinel last said (`None` before it answered).
    pub fn master(&self) -> Option<String> {
        if let Some(c) = &self.cluster {
            return c
                .map()
                .and_then(|m| m.masters().first().map(|m| m.addr.clone()));
        }
        match &self.sentinel {
            None => Some(self.addr.clone()),
            Some(s) => s.master(),
        }
    }

    /// Changes when the master may have moved (never for a fixed address).
    pub(crate) fn switches(&self) -> Option<watch::Receiver<u64>> {
        self.sentinel.as_ref().map(|s| s.switches())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_redis_urls() {
        let t = Target::parse("redis://127.0.0.1:6380").expect("url");
        assert_eq!(
            (t.addr.as_str(), t.db, t.password),
            ("127.0.0.1:6380", 0, None)
        );
        let t = Target::parse("redis://:s3cret@localhost/2").expect("url");
        assert_eq!(
            (t.addr.as_str(), t.db, t.password.as_deref()),
            ("localhost:6379", 2, Some("s3cret"))
        );
        for bad in ["http://x", "redis://", "redis://h:port", "redis://h:1/x"] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
        let t = Target::parse("redis-sentinel://:pw@s1:26379,s2/mymaster/3").expect("url");
        let s = t.sentinel().expect("sentinel");
        assert_eq!(s.sentinels(), ["s1:26379", "s2:26379"]);
        assert_eq!(
            (s.name(), t.db, t.password.as_deref()),
            ("mymaster", 3, Some("pw"))
        );
        assert_eq!(s.password(), None);
        let t =
            Target::parse("redis-sentinel://:m@s1/m?sentinel_password=a%40b%3Fc&").expect("url");
        let s = t.sentinel().expect("sentinel");
        assert_eq!(
            (s.password(), t.password.as_deref()),
            (Some("a@b?c"), Some("m"))
        );
        assert_eq!(
            (s.sentinels(), s.name(), t.db),
            (&["s1:26379".to_string()][..], "m", 0)
        );
        let t = Target::parse("redis-sentinel://s1/m/2?sentinel_password=x@y").expect("url");
        let s = t.sentinel().expect("sentinel");
        assert_eq!(
            (s.password(), t.password.as_deref(), t.db),
            (Some("x@y"), None, 2)
        );
        for bad in [
            "redis-sentinel://s1/m?sentinel_password=%zz",
            "redis-sentinel://s1/m?sentinel_password=x&sentinel_user=y",
            "redis-sentinel://s1/m?password=x",
            "redis-sentinel://s1:26379",
            "redis-sentinel://s1:26379/",
            "redis-sentinel:///m",
            "redis-sentinel://s1:x/m",
            "redis-sentinel://s1/m/x",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }
}
