//! The command link ([`Link`]): what the broker, the table store, the
//! registry and the play store send commands through. To one Redis (a
//! `redis://` address or the master Sentinel names) it is one pipelined
//! connection (`pipe.rs`); to a Redis Cluster it is one per master, each
//! command sent to the master owning its key's slot
//! ([`crate::cluster::Router`], decision 0021). Either way: commands queued
//! one after the other on one slot run in that order, a call fails at once
//! with [`BrokerError::Unavailable`] while there is no connection, and a
//! call not answered within the timeout fails too.

use crate::cluster::Router;
use crate::pipe::{error_reply, Conn};
use crate::resp::Value;
use crate::topology::{SHARD_EPOCH, SHARD_LINEAGE};
use herald_core::BrokerError;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

pub use crate::target::{Target, UrlError};

/// The command link: to one Redis (a `redis://` address or the master
/// Sentinel names), or to a Redis Cluster's masters, each command to the
/// one that owns its key ([`crate::cluster::Router`]). Cheap to share
/// (`Arc`).
pub struct Link {
    route: Route,
    target: Target,
}

enum Route {
    One(Arc<Conn>),
    Cluster(Arc<Router>),
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("up", &self.is_up())
            .finish_non_exhaustive()
    }
}

type Reply = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Value, BrokerError>> + Send + 'static>,
>;

impl Link {
    /// Starts a link to `target` that runs `setup` (commands whose replies
    /// must not be errors) on every new connection. Must be called within a
    /// tokio runtime; the link lives until the last `Arc` is dropped.
    ///
    /// A call not answered within `timeout` fails with
    /// [`BrokerError::Unavailable`]: a slow Redis delays callers that long
    /// at most.
    pub fn start(target: Target, setup: Vec<Vec<Vec<u8>>>, timeout: Duration) -> Arc<Link> {
        let route = match target.cluster.clone() {
            Some(topology) => {
                Route::Cluster(Router::start(target.clone(), topology, setup, timeout))
            }
            None => Route::One(Conn::start(target.clone(), setup, timeout)),
        };
        Arc::new(Link { route, target })
    }

    /// Whether the connection is up (a cluster: every slot has a master
    /// and every master's connection is up).
    pub fn is_up(&self) -> bool {
        match &self.route {
            Route::One(c) => c.is_up(),
            Route::Cluster(r) => r.is_up(),
        }
    }

    /// Where the link connects (with Sentinel: the master as last learned,
    /// and the fail-overs seen; with a cluster: the slot map).
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The cluster router, with a cluster target.
    pub fn router(&self) -> Option<&Arc<Router>> {
        match &self.route {
            Route::One(_) => None,
            Route::Cluster(r) => Some(r),
        }
    }

    /// How many times the link has connected (0: not yet): a change means
    /// it reconnected, and what it sent meanwhile may be lost.
    pub(crate) fn generation(&self) -> u64 {
        match &self.route {
            Route::One(c) => c.generation(),
            Route::Cluster(r) => r.generation(),
        }
    }

    /// Connection attempts that failed.
    pub fn failures(&self) -> u64 {
        match &self.route {
            Route::One(c) => c.failures.load(Ordering::Relaxed),
            Route::Cluster(_) => 0,
        }
    }

    /// Sends one command and waits for its reply. An error reply becomes
    /// `Err` too.
    pub async fn call<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<Value, BrokerError> {
        self.call_later(args)?.await
    }

    /// Queues one command now and returns the future of its reply: commands
    /// queued one after the other run in that order (in a cluster: those of
    /// one slot), whenever their replies are awaited. An argument equal to
    /// [`SHARD_EPOCH`] is replaced by the config epoch of
    /// the cluster master the command goes to (`0` outside a cluster), one
    /// equal to [`SHARD_LINEAGE`] by its lineage (empty outside a cluster).
    pub fn call_later<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<Reply, BrokerError> {
        match &self.route {
            Route::One(c) => {
                let f = c.call_raw(&zero_epoch(args), false)?;
                Ok(Box::pin(async move {
                    match f.await? {
                        Value::Error(e) => Err(error_reply(&e)),
                        v => Ok(v),
                    }
                }))
            }
            Route::Cluster(r) => {
                let f = r.call_later(args)?;
                Ok(Box::pin(async move {
                    match f.await? {
                        Value::Error(e) => Err(error_reply(&e)),
                        v => Ok(v),
                    }
                }))
            }
        }
    }

    /// Sends one command to the master holding `key` (a cluster: its slot's
    /// master; otherwise the one Redis) whatever the command's own keys,
    /// and waits for its reply: `WAIT` after a write to `key`.
    pub async fn call_where<A: AsRef<[u8]>>(
        &self,
        key: &[u8],
        args: &[A],
    ) -> Result<Value, BrokerError> {
        let reply = match &self.route {
            Route::One(c) => c.call_raw(&zero_epoch(args), false)?.await?,
            Route::Cluster(r) => r.call_later_at(Some(crate::slot::slot(key)), args)?.await?,
        };
        match reply {
            Value::Error(e) => Err(error_reply(&e)),
            v => Ok(v),
        }
    }

    /// Sends one command without waiting for (or reading) its reply.
    pub(crate) fn fire<A: AsRef<[u8]>>(&self, args: &[A]) -> Result<(), BrokerError> {
        match &self.route {
            Route::One(c) => c.fire(&zero_epoch(args)),
            Route::Cluster(r) => r.fire(args),
        }
    }
}

/// `args` with [`SHARD_EPOCH`] replaced by `0` and [`SHARD_LINEAGE`] by
/// nothing (outside a cluster the scripts read Sentinel's epoch key).
fn zero_epoch<A: AsRef<[u8]>>(args: &[A]) -> Vec<&[u8]> {
    args.iter()
        .map(|a| {
            if a.as_ref() == SHARD_EPOCH {
                b"0".as_slice()
            } else if a.as_ref() == SHARD_LINEAGE {
                b"".as_slice()
            } else {
                a.as_ref()
            }
        })
        .collect()
}

/// The key a script reads the fail-over epoch from, for keys under
/// `prefix`: Sentinel's [`crate::sentinel::EPOCH_KEY`] on a single Redis;
/// in a cluster `PREFIX:failover-epoch`, in the prefix's slot, never set
/// (read as 0): the scripts take the slot owner's config epoch from the
/// [`SHARD_EPOCH`] argument instead.
pub(crate) fn epoch_key(link: &Link, prefix: &str) -> String {
    if link.router().is_some() {
        format!("{prefix}:failover-epoch")
    } else {
        crate::sentinel::EPOCH_KEY.to_string()
    }
}
