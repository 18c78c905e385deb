//! Game tables' ownership and durable state in Redis (decision 0009).
//!
//! Each table has at most one owner at a time: the node holding its *lease*,
//! a key that expires unless the owner renews it. Every claim takes a new
//! *fencing token* from a per-table counter, and every durable write is a
//! script that refuses a token other than the current lease holder's. A
//! lease alone would not do: an owner paused or cut off past its lease can
//! wake up and write over its successor's state; with the token its write
//! fails in Redis, whatever its own clock believes.
//!
//! Keys (prefix `P`, table `T`; `{T}` keeps a table's keys in one slot):
//! `P:t:{T}:lease` (string `NODE:TOKEN`, `PX` lease), `P:t:{T}:fence`
//! (counter, never expires), `P:t:{T}:state` (hash: `tok` of the writer, `t`
//! the Redis time of the write in ms, `v` the state).
//!
//! With [`SaveWait`] (`--table-save-replicas`, decision 0021), a save is
//! answered only once that many replicas acknowledged it (`WAIT`) or the
//! wait timed out (counted): Redis replicates asynchronously, and a
//! master's death otherwise loses the saves its replicas had not received,
//! which leaves the table closed (its chips unknown) rather than reset.
//!
//! Times come from Redis's clock (`TIME` in the scripts): a node taking a
//! table over computes how long ago it was saved without trusting any
//! node's clock.

use crate::conn::Link;
use crate::lua;
use crate::resp::Value;
use bytes::Bytes;
use herald_core::BrokerError;
use herald_game::durable as game;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Why a table operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TableStoreError {
    /// The caller's lease is gone (expired, or claimed by another node with
    /// a newer token): it must stop acting for the table at once.
    #[error("table {table}: lease lost (now held by {holder:?})")]
    Fenced {
        /// The table.
        table: u64,
        /// Who holds the lease now (`NODE:TOKEN`), if anyone.
        holder: Option<String>,
    },
    /// Redis is unreachable or did not answer in time; nothing is known to
    /// be written (the caller retries or gives up; error 114 to players).
    #[error("{0}")]
    Unavailable(#[from] BrokerError),
    /// Redis answered something the scripts never return.
    #[error("table {table}: unexpected reply from redis: {reply}")]
    Protocol {
        /// The table.
        table: u64,
        /// What came back, for the log.
        reply: String,
    },
}

/// A lease held by this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The table.
    pub table: u64,
    /// The fencing token of this claim.
    pub token: u64,
}

/// A table's last saved state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedState {
    /// The token of the owner that wrote it.
    pub token: u64,
    /// When (Redis's clock, ms since the epoch).
    pub at_ms: u64,
    /// The state itself (the engine's record, with the game's save inside).
    pub data: Bytes,
}

/// What a claim got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The lease is ours.
    Won {
        /// The lease, with its new token.
        lease: Lease,
        /// Redis's clock at the claim (ms since the epoch).
        now_ms: u64,
        /// The table's last saved state, if any.
        saved: Option<SavedState>,
    },
    /// Another node (`NODE:TOKEN`) holds it.
    Held(String),
}

/// Saves that wait for replicas: after each save (or group of saves), a
/// `WAIT replicas timeout` on the connection that sent it.
///
/// `WAIT` holds its connection until it returns, and it concerns the
/// writes of that connection only: so saves have a link of their own
/// (`link`), and a wait never holds up renewals, claims or publications
/// (on the shared link, a promoted master without replicas held every
/// renewal behind a 2 s wait, and the lease expired under its owner).
#[derive(Debug)]
pub struct SaveWait {
    replicas: u32,
    timeout: Duration,
    link: Arc<Link>,
    /// Waits that ended with fewer replicas than asked, or failed.
    short: AtomicU64,
}

impl SaveWait {
    /// Saves wait for `replicas` replicas, at most `timeout` each; they
    /// and their waits go on `link` (which must load [`lua::setup`]),
    /// used for nothing else.
    pub fn new(replicas: u32, timeout: Duration, link: Arc<Link>) -> SaveWait {
        SaveWait {
            replicas,
            timeout,
            link,
            short: AtomicU64::new(0),
        }
    }

    /// The link writes that wait go on.
    pub(crate) fn link(&self) -> &Link {
        &self.link
    }

    /// After a write to `key`'s master on [`SaveWait::link`] (about table
    /// `table`, 0 for none): waits for the replicas asked. A wait that
    /// ends short is counted and logged, not an error: the write is on the
    /// master, and refusing it would not undo it.
    pub(crate) async fn replicate(&self, table: u64, key: &str) {
        let n = self.replicas.to_string();
        let ms = self.timeout.as_millis().max(1).to_string();
        let got = self
            .link
            .call_where(key.as_bytes(), &["WAIT", n.as_str(), ms.as_str()])
            .await;
        let acked = match &got {
            Ok(Value::Int(k)) => *k,
            _ => -1,
        };
        // Counted every time, logged the first time (then see the metric).
        if acked < i64::from(self.replicas) && self.short.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(
                table,
                replicas = acked.max(0),
                asked = self.replicas,
                reply = ?got,
                "a table write was not acknowledged by the replicas asked \
                 (herald_cluster_table_saves_unreplicated_total counts them)"
            );
        }
    }

    /// Saves whose wait timed out short of the replicas asked, or failed
    /// (`herald_cluster_table_saves_unreplicated_total`): they are on the master
    /// only, and a fail-over now may lose them.
    pub fn short(&self) -> u64 {
        self.short.load(Ordering::Relaxed)
    }
}

/// Leases and saved state of game tables, for one node.
#[derive(Debug, Clone)]
pub struct TableStore {
    link: Arc<Link>,
    prefix: String,
    node: String,
    wait: Option<Arc<SaveWait>>,
}

impl TableStore {
    /// The store of node `node` on `link`, whose connections must load
    /// [`lua::setup`] (the broker's link does).
    pub fn new(link: Arc<Link>, prefix: impl Into<String>, node: impl Into<String>) -> TableStore {
        TableStore {
            link,
            prefix: prefix.into(),
            node: node.into(),
            wait: None,
        }
    }

    /// This store with its saves waiting for replicas as `wait` says.
    pub fn with_wait(mut self, wait: Arc<SaveWait>) -> TableStore {
        self.wait = Some(wait);
        self
    }

    /// The link saves go on: their own when they wait for replicas.
    fn save_link(&self) -> &Link {
        match &self.wait {
            Some(w) => &w.link,
            None => &self.link,
        }
    }

    /// After a save to `key`'s master: waits for the replicas asked, if
    /// any ([`SaveWait::replicate`]).
    async fn replicate(&self, table: u64, key: &str) {
        if let Some(w) = &self.wait {
            w.replicate(table, key).await;
        }
    }

    /// This node's id, as written in the leases it holds.
    pub fn node(&self) -> &str {
        &self.node
    }

    fn key(&self, table: u64, kind: &str) -> String {
        format!("{}:t:{{{table}}}:{kind}", self.prefix)
    }

    fn holder(&self, lease: &Lease) -> String {
        format!("{}:{}", self.node, lease.token)
    }

    /// Claims `table` for `lease` if nobody holds it. `floor` is the highest
    /// token this node has seen for the table (0 if none): the new token is
    /// above it even if Redis lost its counter.
    pub async fn claim(
        &self,
        table: u64,
        floor: u64,
        lease: Duration,
    ) -> Result<Claim, TableStoreError> {
        let ms = lease.as_millis().max(1).to_string();
        let floor = floor.to_string();
        let (k_lease, k_fence, k_state) = (
            self.key(table, "lease"),
            self.key(table, "fence"),
            self.key(table, "state"),
        );
        let reply = self
            .link
            .call(&[
                "EVALSHA",
                lua::TABLE_CLAIM.sha(),
                "4",
                &k_lease,
                &k_fence,
                &k_state,
                &crate::conn::epoch_key(&self.link, &self.prefix),
                &self.node,
                &ms,
                &floor,
                crate::cluster::SHARD_EPOCH_STR,
            ])
            .await?;
        let bad = || TableStoreError::Protocol {
            table,
            reply: format!("{reply:?}"),
        };
        let items = reply.items();
        match items.first().and_then(Value::int) {
            Some(0) => Ok(Claim::Held(text(items.get(1)).ok_or_else(bad)?)),
            Some(1) => {
                let token = uint(items.get(1)).ok_or_else(bad)?;
                let now_ms = uint(items.get(2)).ok_or_else(bad)?;
                let saved = match items.get(5).and_then(Value::bytes) {
                    None => None,
                    Some(data) => Some(SavedState {
                        token: uint(items.get(3)).ok_or_else(bad)?,
                        at_ms: uint(items.get(4)).ok_or_else(bad)?,
                        data: data.clone(),
                    }),
                };
                Ok(Claim::Won {
                    lease: Lease { table, token },
                    now_ms,
                    saved,
                })
            }
            _ => Err(bad()),
        }
    }

    /// Renews `leases` for another `lease`, in one call. Returns the leases
    /// lost (expired or taken): the caller must stop acting for those tables.
    pub async fn renew(
        &self,
        leases: &[Lease],
        lease: Duration,
    ) -> Result<Vec<Lease>, TableStoreError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let mut args: Vec<String> = Vec::with_capacity(3 + 2 * leases.len() + 1);
        args.push("EVALSHA".into());
        args.push(lua::TABLE_RENEW.sha().into());
        args.push(leases.len().to_string());
        args.extend(leases.iter().map(|l| self.key(l.table, "lease")));
        args.push(lease.as_millis().max(1).to_string());
        args.extend(leases.iter().map(|l| self.holder(l)));
        let reply = self.link.call(&args).await?;
        let mut lost = Vec::new();
        for i in reply.items() {
            let lease = i
                .int()
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| i.checked_sub(1))
                .and_then(|i| leases.get(i))
                .ok_or_else(|| TableStoreError::Protocol {
                    table: leases.first().map_or(0, |l| l.table),
                    reply: format!("{reply:?}"),
                })?;
            lost.push(lease.clone());
        }
        Ok(lost)
    }

    /// Saves `data` as the table's state, if `lease` is still the table's
    /// lease. Returns Redis's time of the write (ms). `Fenced` means another
    /// owner may exist: the caller must drop the table without telling its
    /// players anything more.
    pub async fn save(&self, lease: &Lease, data: &[u8]) -> Result<u64, TableStoreError> {
        let (k_lease, k_state) = (
            self.key(lease.table, "lease"),
            self.key(lease.table, "state"),
        );
        let holder = self.holder(lease);
        let token = lease.token.to_string();
        let reply = self
            .save_link()
            .call(&[
                "EVALSHA".as_bytes(),
                lua::TABLE_SAVE.sha().as_bytes(),
                b"2",
                k_lease.as_bytes(),
                k_state.as_bytes(),
                holder.as_bytes(),
                token.as_bytes(),
                data,
            ])
            .await?;
        let items = reply.items();
        match (items.first().and_then(Value::int), items.get(1)) {
            (Some(1), now) => {
                let now = uint(now).ok_or_else(|| TableStoreError::Protocol {
                    table: lease.table,
                    reply: format!("{reply:?}"),
                })?;
                self.replicate(lease.table, &k_state).await;
                Ok(now)
            }
            (Some(0), holder) => Err(TableStoreError::Fenced {
                table: lease.table,
                holder: text(holder),
            }),
            _ => Err(TableStoreError::Protocol {
                table: lease.table,
                reply: format!("{reply:?}"),
            }),
        }
    }

    /// Saves several tables' states in one script call (group commit), each
    /// only if its lease is still the table's: one result per save, in
    /// order, `Fenced` for a table whose lease is gone and `Ok(Redis time of
    /// the write)` for the others. `Err` for the whole call when Redis could
    /// not be reached (nothing is known to be written).
    pub async fn save_all(
        &self,
        saves: &[(Lease, Bytes)],
    ) -> Result<Vec<Result<u64, TableStoreError>>, TableStoreError> {
        if saves.is_empty() {
            return Ok(Vec::new());
        }
        let mut args: Vec<Bytes> = Vec::with_capacity(3 + 5 * saves.len());
        args.push(Bytes::from_static(b"EVALSHA"));
        args.push(Bytes::copy_from_slice(lua::TABLE_SAVE_ALL.sha().as_bytes()));
        args.push(Bytes::from((2 * saves.len()).to_string()));
        for (lease, _) in saves {
            args.push(Bytes::from(self.key(lease.table, "lease")));
            args.push(Bytes::from(self.key(lease.table, "state")));
        }
        for (lease, data) in saves {
            args.push(Bytes::from(self.holder(lease)));
            args.push(Bytes::from(lease.token.to_string()));
            args.push(data.clone());
        }
        let reply = self.save_link().call(&args).await?;
        let items = reply.items();
        let bad = || TableStoreError::Protocol {
            table: saves[0].0.table,
            reply: format!("{reply:?}"),
        };
        if items.len() != saves.len() + 1 {
            return Err(bad());
        }
        let now = uint(items.first()).ok_or_else(bad)?;
        if items[1..].iter().any(|r| matches!(r, Value::Int(1))) {
            let first = &saves[0].0;
            self.replicate(first.table, &self.key(first.table, "state"))
                .await;
        }
        Ok(saves
            .iter()
            .zip(&items[1..])
            .map(|((lease, _), r)| match r {
                Value::Int(1) => Ok(now),
                Value::Int(_) => Err(TableStoreError::Protocol {
                    table: lease.table,
                    reply: format!("{r:?}"),
                }),
                _ => Err(TableStoreError::Fenced {
                    table: lease.table,
                    holder: text(Some(r)),
                }),
            })
            .collect())
    }

    /// Gives `lease` up (clean shutdown), so another node may claim the
    /// table at once. False if it was no longer held.
    pub async fn release(&self, lease: &Lease) -> Result<bool, TableStoreError> {
        let k_lease = self.key(lease.table, "lease");
        let holder = self.holder(lease);
        let reply = self
            .link
            .call(&["EVALSHA", lua::TABLE_RELEASE.sha(), "1", &k_lease, &holder])
            .await?;
        Ok(reply.int() == Some(1))
    }

    /// Publishes `entry` as table `lease.table`'s lobby entry to every node
    /// (topic `P:lobby`, kept in the hash `P:lobby:entries`), numbered by
    /// the cluster's lobby sequence; refused by Redis unless `lease` is
    /// still the table's. Queued at once, so one node's entries keep their
    /// order; nothing waits for the reply.
    pub fn publish_entry(&self, lease: &Lease, entry: &[u8]) -> Result<(), TableStoreError> {
        let k_lease = self.key(lease.table, "lease");
        let holder = self.holder(lease);
        let table = lease.table.to_string();
        let (seq, hash, topic) = lobby_keys(&self.prefix);
        let epoch_key = crate::conn::epoch_key(&self.link, &self.prefix);
        self.link.fire(&[
            "EVALSHA".as_bytes(),
            lua::TABLE_LOBBY.sha().as_bytes(),
            b"4",
            k_lease.as_bytes(),
            seq.as_bytes(),
            hash.as_bytes(),
            epoch_key.as_bytes(),
            holder.as_bytes(),
            table.as_bytes(),
            entry,
            topic.as_bytes(),
            crate::cluster::SHARD_EPOCH,
        ])?;
        Ok(())
    }

    /// Every table's last published lobby entry (`SEQ:TABLE:ENTRY` each).
    pub async fn lobby_entries(&self) -> Result<Vec<Bytes>, TableStoreError> {
        let (_, hash, _) = lobby_keys(&self.prefix);
        let reply = self.link.call(&["HVALS", &hash]).await?;
        Ok(reply
            .items()
            .iter()
            .filter_map(|v| v.bytes().cloned())
            .collect())
    }

    /// Who holds `table`'s lease: `(node, token)`, or `None`.
    pub async fn owner(&self, table: u64) -> Result<Option<(String, u64)>, TableStoreError> {
        let reply = self.link.call(&["GET", &self.key(table, "lease")]).await?;
        parse_lease(table, text(Some(&reply)))
    }

    /// Who holds each of `tables`' leases, in the same order: one `MGET`
    /// per [`OWNERS_CHUNK`] tables instead of a round trip per table (an
    /// edge looks up every table its players are at, every lease/3).
    pub async fn owners(
        &self,
        tables: &[u64],
    ) -> Result<Vec<Option<(String, u64)>>, TableStoreError> {
        let mut out = Vec::with_capacity(tables.len());
        for chunk in tables.chunks(OWNERS_CHUNK) {
            let mut args = Vec::with_capacity(chunk.len() + 1);
            args.push("MGET".to_string());
            args.extend(chunk.iter().map(|t| self.key(*t, "lease")));
            let reply = self.link.call(&args).await?;
            let items = reply.items();
            if items.len() != chunk.len() {
                return Err(TableStoreError::Protocol {
                    table: chunk[0],
                    reply: format!("MGET answered {} of {} keys", items.len(), chunk.len()),
                });
            }
            for (t, v) in chunk.iter().zip(items) {
                out.push(parse_lease(*t, text(Some(v)))?);
            }
        }
        Ok(out)
    }
}

/// Lease keys read per `MGET` by [`TableStore::owners`].
const OWNERS_CHUNK: usize = 512;

/// A lease value `NODE:TOKEN` (`None`: no lease).
fn parse_lease(table: u64, v: Option<String>) -> Result<Option<(String, u64)>, TableStoreError> {
    let Some(v) = v else { return Ok(None) };
    let parsed = v
        .rsplit_once(':')
        .and_then(|(node, tok)| Some((node.to_string(), tok.parse().ok()?)));
    match parsed {
        Some(p) => Ok(Some(p)),
        None => Err(TableStoreError::Protocol { table, reply: v }),
    }
}

/// Leases renewed per script call by `renew_all`.
const RENEW_CHUNK: usize = 512;
/// Saves per script call by `save_all` (the engine's batches are at most
/// `herald_game::durable::SAVE_BATCH` already).
const SAVE_CHUNK: usize = 256;

/// The lobby's sequence counter, hash of entries, and topic.
pub(crate) fn lobby_keys(prefix: &str) -> (String, String, String) {
    (
        format!("{prefix}:lobby:seq"),
        format!("{prefix}:lobby:entries"),
        format!("{prefix}:lobby"),
    )
}

/// A lobby message (`SEQ:TABLE:ENTRY`) split: sequence number, table,
/// entry. `None` when malformed.
pub fn parse_lobby(msg: &Bytes) -> Option<(u64, u64, Bytes)> {
    let first = msg.iter().position(|b| *b == b':')?;
    let seq = std::str::from_utf8(&msg[..first]).ok()?.parse().ok()?;
    let rest = &msg[first + 1..];
    let second = rest.iter().position(|b| *b == b':')?;
    let table = std::str::from_utf8(&rest[..second]).ok()?.parse().ok()?;
    Some((seq, table, msg.slice(first + 1 + second + 1..)))
}

/// A bulk or simple string as UTF-8 text (`None`: nil or not text).
fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::bytes)
        .and_then(|b| std::str::from_utf8(b).ok())
        .map(str::to_string)
}

/// An integer reply, or a decimal string (hash fields come back as strings).
fn uint(v: Option<&Value>) -> Option<u64> {
    v?.int().and_then(|i| u64::try_from(i).ok())
}

/// The engine's view of the store (`herald_game::durable`): the server
/// hands this to `Engine::with_durability`.
impl herald_game::durable::TableStore for TableStore {
    fn node(&self) -> &str {
        &self.node
    }

    fn claim(
        &self,
        table: u64,
        floor: u64,
        lease: Duration,
    ) -> herald_game::durable::BoxFuture<'_, Result<game::Claimed, game::StoreError>> {
        Box::pin(async move {
            Ok(
                match TableStore::claim(self, table, floor, lease)
                    .await
                    .map_err(to_game)?
                {
                    Claim::Held(by) => game::Claimed::Held(by),
                    Claim::Won {
                        lease,
                        now_ms,
                        saved,
                    } => game::Claimed::Won {
                        lease: game::Lease {
                            table: lease.table,
                            token: lease.token,
                        },
                        now_ms,
                        saved: saved.map(|s| game::Saved {
                            token: s.token,
                            at_ms: s.at_ms,
                            data: s.data,
                        }),
                    },
                },
            )
        })
    }

    fn save(
        &self,
        lease: game::Lease,
        record: Bytes,
    ) -> herald_game::durable::BoxFuture<'_, Result<u64, game::StoreError>> {
        Box::pin(async move {
            let lease = Lease {
                table: lease.table,
                token: lease.token,
            };
            TableStore::save(self, &lease, &record)
                .await
                .map_err(to_game)
        })
    }

    fn save_all(
        &self,
        saves: Vec<(game::Lease, Bytes)>,
    ) -> herald_game::durable::BoxFuture<
        '_,
        Result<Vec<Result<u64, game::StoreError>>, game::StoreError>,
    > {
        Box::pin(async move {
            let mut results = Vec::with_capacity(saves.len());
            for chunk in saves.chunks(SAVE_CHUNK) {
                let ours: Vec<(Lease, Bytes)> = chunk
                    .iter()
                    .map(|(l, data)| {
                        (
                            Lease {
                                table: l.table,
                                token: l.token,
                            },
                            data.clone(),
                        )
                    })
                    .collect();
                match TableStore::save_all(self, &ours).await {
                    Ok(rs) => results.extend(rs.into_iter().map(|r| r.map_err(to_game))),
                    // The first chunk failed: nothing is known written.
                    Err(e) if results.is_empty() => return Err(to_game(e)),
                    // A later one: the earlier chunks' results stand.
                    Err(e) => {
                        let e = to_game(e);
                        results.extend(chunk.iter().map(|_| Err(e.clone())));
                    }
                }
            }
            Ok(results)
        })
    }

    fn renew_all(
        &self,
        leases: Vec<game::Lease>,
        time: Duration,
    ) -> herald_game::durable::BoxFuture<'_, Result<Vec<game::Lease>, game::StoreError>> {
        Box::pin(async move {
            let mut lost = Vec::new();
            // A bounded number of keys per script call, so that one call
            // never holds Redis for long.
            for chunk in leases.chunks(RENEW_CHUNK) {
                let ours: Vec<Lease> = chunk
                    .iter()
                    .map(|l| Lease {
                        table: l.table,
                        token: l.token,
                    })
                    .collect();
                let gone = TableStore::renew(self, &ours, time)
                    .await
                    .map_err(to_game)?;
                lost.extend(gone.into_iter().map(|l| game::Lease {
                    table: l.table,
                    token: l.token,
                }));
            }
            Ok(lost)
        })
    }

    fn publish_entry(&self, lease: game::Lease, entry: Bytes) {
        let lease = Lease {
            table: lease.table,
            token: lease.token,
        };
        if let Err(e) = TableStore::publish_entry(self, &lease, &entry) {
            tracing::debug!(table = lease.table, error = %e, "lobby entry not published");
        }
    }

    fn renew(
        &self,
        lease: game::Lease,
        time: Duration,
    ) -> herald_game::durable::BoxFuture<'_, Result<bool, game::StoreError>> {
        Box::pin(async move {
            let lease = Lease {
                table: lease.table,
                token: lease.token,
            };
            let lost = TableStore::renew(self, std::slice::from_ref(&lease), time)
                .await
                .map_err(to_game)?;
            Ok(lost.is_empty())
        })
    }
}

fn to_game(e: TableStoreError) -> game::StoreError {
    match e {
        TableStoreError::Fenced { holder, .. } => game::StoreError::Fenced(holder),
        other => game::StoreError::Unavailable(other.to_string()),
    }
}
