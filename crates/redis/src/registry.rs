//! Which tables exist in a cluster (decision 0009, "Which tables exist"):
//! the configured `[[tables]]` (ids 1..N, the same file on every node) plus
//! the tables created over HTTP, kept in Redis so that every node's keeper,
//! routes and lobby know them, whichever node created them.
//!
//! Keys (prefix `P`): `P:tables` (hash: id → the table's spec, JSON, as the
//! HTTP API took it), `P:tables:next` (the last id handed out; raised to N
//! first, so a created table never gets a configured table's id), and
//! `P:tables:deleted` (set of deleted ids, configured or created: no keeper
//! claims them), and `P:tables:version` (bumped by every create and delete:
//! a node's scan reads the registry only when it changed, so an idle
//! cluster pays one `GET` per node per scan for it). A deleted table's lease key holds [`DELETED`], which never
//! expires: the claim script sees a holder and refuses, atomically, so a
//! table cannot come back even when a keeper's view of the deleted set is
//! a scan old, or after every node restarted.
//!
//! Why a sentinel in the lease key rather than a check of the deleted set
//! in the claim script: the claim (and the lease, renew and save scripts)
//! stay as they are, and every reader of the lease already treats "held by
//! someone else" as "not yours".

use crate::conn::Link;
use crate::lua;
use crate::tables::{lobby_keys, SaveWait, TableStoreError};
use bytes::Bytes;
use std::sync::Arc;

/// The lease value of a deleted table (`NODE:TOKEN` in shape, so readers
/// that split it still parse it; no node has this id: node ids are
/// alphanumeric).
pub const DELETED: &str = "!deleted:0";

/// The node part of [`DELETED`], as `TableStore::owner` returns it.
pub const DELETED_NODE: &str = "!deleted";

/// What a delete found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deletion {
    /// No such table (never created, or deleted already).
    Unknown,
    /// Deleted. `holder`: the node and token holding the lease then (it
    /// must close the table and retire the lease), or `None` when nobody
    /// ran it (the lease is the sentinel already).
    Deleted {
        /// `(node, token)` of the owner at the time of the delete.
        holder: Option<(String, u64)>,
    },
}

/// The cluster's registry of tables, for one node.
#[derive(Debug, Clone)]
pub struct TableRegistry {
    link: Arc<Link>,
    prefix: String,
    node: String,
    /// Creates and deletes wait for replicas as saves do
    /// (`--table-save-replicas`): an acknowledged creation's id is never
    /// handed out again by a promoted replica that lacked it.
    wait: Option<Arc<SaveWait>>,
}

impl TableRegistry {
    /// The registry on `link` (whose connections load [`lua::setup`]).
    pub fn new(link: Arc<Link>, prefix: impl Into<String>, node: impl Into<String>) -> Self {
        TableRegistry {
            link,
            prefix: prefix.into(),
            node: node.into(),
            wait: None,
        }
    }

    /// This registry with creates and deletes waiting as `wait` says.
    pub fn with_wait(mut self, wait: Arc<SaveWait>) -> Self {
        self.wait = Some(wait);
        self
    }

    /// The link creates and deletes go on: the waiting link when they wait.
    fn write_link(&self) -> &Link {
        self.wait.as_deref().map_or(&self.link, SaveWait::link)
    }

    /// After a create or delete: waits for the replicas, if asked.
    async fn replicate(&self, table: u64) {
        if let Some(w) = &self.wait {
            w.replicate(table, &self.keys().0).await;
        }
    }

    fn keys(&self) -> (String, String, String) {
        (
            format!("{}:tables", self.prefix),
            format!("{}:tables:next", self.prefix),
            format!("{}:tables:deleted", self.prefix),
        )
    }

    fn version_key(&self) -> String {
        format!("{}:tables:version", self.prefix)
    }

    /// The registry's version: changes with every create and delete, so a
    /// node re-reads the registry only when it changed (one `GET` a scan
    /// otherwise).
    pub async fn version(&self) -> Result<u64, TableStoreError> {
        let reply = self.link.call(&["GET", &self.version_key()]).await?;
        Ok(reply.int().and_then(|i| u64::try_from(i).ok()).unwrap_or(0))
    }

    fn lease_key(&self, table: u64) -> String {
        format!("{}:t:{{{table}}}:lease", self.prefix)
    }

    /// Creates `count` tables of `spec`, with ids above `configured` and
    /// every id handed out before; returns the first id (the others follow).
    pub async fn create(
        &self,
        configured: u64,
        count: u32,
        spec: &[u8],
    ) -> Result<u64, TableStoreError> {
        let (hash, next, _) = self.keys();
        let version = self.version_key();
        let (n, c) = (configured.to_string(), count.to_string());
        let reply = self
            .write_link()
            .call(&[
                "EVALSHA".as_bytes(),
                lua::TABLE_CREATE.sha().as_bytes(),
                b"3",
                hash.as_bytes(),
                next.as_bytes(),
                version.as_bytes(),
                n.as_bytes(),
                c.as_bytes(),
                spec,
            ])
            .await?;
        self.replicate(0).await;
        reply
            .int()
            .and_then(|i| u64::try_from(i).ok())
            .ok_or_else(|| TableStoreError::Protocol {
                table: 0,
                reply: format!("{reply:?}"),
            })
    }

    /// Deletes `table` (a created one, or a configured one when `table` is
    /// in 1..=`configured`): see `table_delete.lua`.
    pub async fn delete(&self, table: u64, configured: u64) -> Result<Deletion, TableStoreError> {
        let (hash, _, deleted) = self.keys();
        let (seq, lobby, topic) = lobby_keys(&self.prefix);
        let (id, n) = (table.to_string(), configured.to_string());
        let lease = self.lease_key(table);
        let version = self.version_key();
        let reply = self
            .write_link()
            .call(&[
                "EVALSHA",
                lua::TABLE_DELETE.sha(),
                "7",
                &hash,
                &deleted,
                &lease,
                &seq,
                &lobby,
                &version,
                &crate::conn::epoch_key(&self.link, &self.prefix),
                &id,
                &n,
                DELETED,
                &topic,
                crate::cluster::SHARD_EPOCH_STR,
            ])
            .await?;
        self.replicate(table).await;
        let items = reply.items();
        match items.first().and_then(|v| v.int()) {
            Some(0) => Ok(Deletion::Unknown),
            Some(1) => {
                let holder = items
                    .get(1)
                    .and_then(|v| v.bytes())
                    .and_then(|b| std::str::from_utf8(b).ok())
                    .and_then(|s| s.rsplit_once(':'))
                    .and_then(|(node, tok)| Some((node.to_string(), tok.parse().ok()?)));
                Ok(Deletion::Deleted { holder })
            }
            _ => Err(TableStoreError::Protocol {
                table,
                reply: format!("{reply:?}"),
            }),
        }
    }

    /// This node, owner of deleted `table` with lease `token`, closed it:
    /// the lease becomes [`DELETED`] and the lobby removal is published
    /// again. False: another node holds the lease now.
    pub async fn retire(&self, table: u64, token: u64) -> Result<bool, TableStoreError> {
        let (seq, lobby, topic) = lobby_keys(&self.prefix);
        let lease = self.lease_key(table);
        let holder = format!("{}:{token}", self.node);
        let id = table.to_string();
        let reply = self
            .link
            .call(&[
                "EVALSHA",
                lua::TABLE_RETIRE.sha(),
                "4",
                &lease,
                &seq,
                &lobby,
                &crate::conn::epoch_key(&self.link, &self.prefix),
                &holder,
                DELETED,
                &id,
                &topic,
                crate::cluster::SHARD_EPOCH_STR,
            ])
            .await?;
        Ok(reply.int() == Some(1))
    }

    /// The created tables (id, spec) and the deleted ids.
    pub async fn list(&self) -> Result<(Vec<(u64, Bytes)>, Vec<u64>), TableStoreError> {
        let (hash, _, deleted) = self.keys();
        // Deleted first: a table deleted between the two reads is then
        // missing from the registry read, never listed as alive.
        let gone = self.link.call_later(&["SMEMBERS", &deleted])?;
        let listed = self.link.call_later(&["HGETALL", &hash])?;
        let gone: Vec<u64> = gone
            .await?
            .items()
            .iter()
            .filter_map(|v| v.int())
            .filter_map(|i| u64::try_from(i).ok())
            .collect();
        let listed = listed.await?;
        let items = listed.items();
        let mut tables = Vec::with_capacity(items.len() / 2);
        for pair in items.chunks(2) {
            let (Some(id), Some(spec)) = (
                pair.first()
                    .and_then(|v| v.int())
                    .and_then(|i| u64::try_from(i).ok()),
                pair.get(1).and_then(|v| v.bytes()),
            ) else {
                continue;
            };
            tables.push((id, spec.clone()));
        }
        Ok((tables, gone))
    }

    /// Whether `table` is a created table of the registry (not deleted).
    pub async fn is_listed(&self, table: u64) -> Result<bool, TableStoreError> {
        let (hash, _, _) = self.keys();
        let reply = self
            .link
            .call(&["HEXISTS", &hash, &table.to_string()])
            .await?;
        Ok(reply.int() == Some(1))
    }
}
