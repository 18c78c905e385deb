//! The server a scenario talks to, parsed once from a `ws://`, `http://` or
//! `tcp://` URL.
//!
//! A tiny parser rather than the `url` crate: the bench only needs host,
//! port and path, and resolves the host once up front so that thousands of
//! connects never touch DNS.

use std::net::{SocketAddr, ToSocketAddrs};

use crate::BenchError;

/// A URL's scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `ws://`: WebSocket.
    Ws,
    /// `http://`: SSE, long-polling, the publish API.
    Http,
    /// `tcp://`: Herald's raw TCP transport (`herald serve --tcp-listen`).
    Tcp,
}

/// Where to connect and what to ask for in the upgrade request.
#[derive(Debug, Clone)]
pub struct Target {
    /// The URL's scheme.
    pub scheme: Scheme,
    /// The resolved server address (the first one the resolver returns).
    pub addr: SocketAddr,
    /// The `Host` header: the URL's authority as written.
    pub host: String,
    /// The request target, starting with `/`.
    pub path: String,
    /// Subprotocols offered, in preference order.
    pub protocols: Vec<String>,
}

impl Target {
    /// Parses `ws://host[:port][/path]`, `http://…` or `tcp://host:port`
    /// (port 80 by default).
    pub fn parse(url: &str) -> Result<Target, BenchError> {
        let bad = |why: &str| BenchError::Url(format!("{url}: {why}"));
        let (scheme, rest) = if let Some(r) = url.strip_prefix("ws://") {
            (Scheme::Ws, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (Scheme::Http, r)
        } else if let Some(r) = url.strip_prefix("tcp://") {
            (Scheme::Tcp, r)
        } else {
            return Err(bad("only ws://, http:// and tcp:// URLs are supported"));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() {
            return Err(bad("missing host"));
        }
        let has_port = if authority.starts_with('[') {
            authority.contains("]:")
        } else {
            authority.contains(':')
        };
        let with_port = if has_port {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        let addr = with_port
            .to_socket_addrs()
            .map_err(|e| bad(&format!("cannot resolve: {e}")))?
            .next()
            .ok_or_else(|| bad("host resolves to no address"))?;
        Ok(Target {
            scheme,
            addr,
            host: authority.to_owned(),
            path: path.to_owned(),
            protocols: Vec::new(),
        })
    }

    /// The same server with another path (e.g. `/ws` instead of `/shootout`).
    pub fn with_path(&self, path: &str) -> Target {
        Target {
            path: path.to_owned(),
            ..self.clone()
        }
    }

    /// The same server reached with `scheme`: HTTP and WebSocket share a
    /// port (a WebSocket made from an `http://` URL with no path gets
    /// `/ws`); raw TCP has its own port, so it converts to nothing else.
    pub fn with_scheme(&self, scheme: Scheme) -> Result<Target, BenchError> {
        if scheme == self.scheme {
            return Ok(self.clone());
        }
        let name = |s: Scheme| match s {
            Scheme::Ws => "ws://",
            Scheme::Http => "http://",
            Scheme::Tcp => "tcp://",
        };
        if scheme == Scheme::Tcp || self.scheme == Scheme::Tcp {
            return Err(BenchError::Url(format!(
                "{}{}: this needs a {} URL (raw TCP has its own port)",
                name(self.scheme),
                self.host,
                name(scheme)
            )));
        }
        let mut t = self.clone();
        t.scheme = scheme;
        if scheme == Scheme::Ws && t.path == "/" {
            t.path = "/ws".into();
        }
        Ok(t)
    }

    /// The URL again (scheme, authority, path).
    pub fn url(&self) -> String {
        let scheme = match self.scheme {
            Scheme::Ws => "ws",
            Scheme::Http => "http",
            Scheme::Tcp => "tcp",
        };
        format!("{scheme}://{}{}", self.host, self.path)
    }

    /// The same target offering `protocols`.
    pub fn with_protocols(mut self, protocols: &[&str]) -> Target {
        self.protocols = protocols.iter().map(|p| (*p).to_owned()).collect();
        self
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        let t = Target::parse("ws://127.0.0.1:3000/shootout").unwrap();
        assert_eq!(t.addr, "127.0.0.1:3000".parse().unwrap());
        assert_eq!(t.host, "127.0.0.1:3000");
        assert_eq!(t.path, "/shootout");
        let t = Target::parse("ws://127.0.0.1:3000").unwrap();
        assert_eq!(t.path, "/");
        let t = Target::parse("ws://127.0.0.1").unwrap();
        assert_eq!(t.addr.port(), 80);
        let t = Target::parse("ws://[::1]:81/x?y").unwrap();
        assert_eq!(t.addr, "[::1]:81".parse().unwrap());
        assert_eq!(t.path, "/x?y");
        assert!(Target::parse("wss://x").is_err());
        let t = Target::parse("tcp://127.0.0.1:9").unwrap();
        assert_eq!((t.scheme, t.addr.port()), (Scheme::Tcp, 9));
        assert_eq!(
            Target::parse("http://127.0.0.1/").unwrap().scheme,
            Scheme::Http
        );
        assert!(Target::parse("ws:///x").is_err());
    }
}
