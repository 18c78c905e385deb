//! The slot map of a Redis Cluster (decision 0021): which master owns each
//! of the 16384 slots, learned with `CLUSTER NODES` from every node known
//! (in parallel); for each slot the claim with the highest config epoch
//! wins (Redis Cluster's own rule, so a node that has not yet heard of a
//! fail-over cannot undo it), and a master the cluster flagged `fail`
//! claims nothing. [`Topology`] holds the seeds and the map as last
//! learned; it is shared by the command and subscriber links of a target
//! (in [`crate::conn::Target`]). Routing by this map is
//! [`crate::cluster`].

use crate::resp::{self, Value};
use crate::slot::SLOTS;
use bytes::{Bytes, BytesMut};
use herald_core::BrokerError;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An argument the router replaces by the config epoch of the master a
/// command goes to (`0` on a single Redis). Never a valid key or value of
/// Herald's own.
pub const SHARD_EPOCH: &[u8] = SHARD_EPOCH_STR.as_bytes();
/// [`SHARD_EPOCH`] as text.
pub const SHARD_EPOCH_STR: &str = "\0herald:shard-epoch\0";
/// An argument the router replaces by the *lineage* of the master a
/// command goes to ([`Master::lineage`]; empty on a single Redis or when
/// the master's history is not known). The channel scripts use it to tell
/// a slot that moved from a live master (a resharding: `MIGRATE` moved
/// every key whole) from one whose master was replaced by a replica (a
/// fail-over: the replica may lack the last writes). Never a valid key or
/// value of Herald's own.
pub const SHARD_LINEAGE: &[u8] = SHARD_LINEAGE_STR.as_bytes();
/// [`SHARD_LINEAGE`] as text.
pub const SHARD_LINEAGE_STR: &str = "\0herald:shard-lineage\0";

/// Default port of a cluster node.
const DEFAULT_PORT: u16 = 6379;
/// How long one node may take to connect and answer `CLUSTER NODES`.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn unavailable(why: impl std::fmt::Display) -> BrokerError {
    BrokerError::Unavailable(format!("redis cluster: {why}"))
}

/// One master as the map says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Master {
    /// `host:port`.
    pub addr: String,
    /// Its config epoch.
    pub epoch: u64,
    /// Its slots, as inclusive ranges.
    pub slots: Vec<(u16, u16)>,
    /// What [`SHARD_LINEAGE`] becomes for commands sent to it:
    /// `REPLID;,OTHER,OTHER,` — its replication id (`master_replid`, new at
    /// every promotion, kept through a resharding), then, if it was never
    /// promoted, the replication ids of the other masters that own slots:
    /// keys that they wrote came here whole, by `MIGRATE`. Empty when its
    /// `INFO replication` was not read.
    pub lineage: Bytes,
}

/// The slot map: which master owns each slot.
#[derive(Debug, Clone, Default)]
pub struct Map {
    /// Owner of each slot: an index into `masters` (`None`: uncovered).
    owner: Vec<Option<usize>>,
    masters: Vec<Master>,
    /// Addresses of replicas (fail-overs are counted when one becomes a
    /// master).
    replicas: Vec<String>,
}

impl Map {
    /// The master owning `slot`, if any.
    pub fn owner(&self, slot: u16) -> Option<&Master> {
        let i = (*self.owner.get(usize::from(slot))?)?;
        self.masters.get(i)
    }

    /// The masters that own slots, in address order.
    pub fn masters(&self) -> &[Master] {
        &self.masters
    }

    /// Slots no master owns.
    pub fn uncovered(&self) -> usize {
        if self.owner.is_empty() {
            return usize::from(SLOTS);
        }
        self.owner.iter().filter(|o| o.is_none()).count()
    }
}

/// One node's line of `CLUSTER NODES`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeLine {
    addr: String,
    master: bool,
    failed: bool,
    epoch: u64,
    slots: Vec<(u16, u16)>,
}

/// Parses `CLUSTER NODES` as answered by the node at `asked` (a node that
/// does not know its own address yet says `:PORT`).
fn parse_nodes(text: &str, asked: &str) -> Vec<NodeLine> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(addr), Some(flags), Some(epoch)) = (f.get(1), f.get(2), f.get(6)) else {
            continue;
        };
        // ip:port@cport[,hostname]
        let addr = addr.split(['@', ',']).next().unwrap_or_default();
        let addr = if addr.starts_with(':') && flags.contains("myself") {
            asked.to_string()
        } else {
            addr.to_string()
        };
        if addr.starts_with(':') || addr.is_empty() {
            continue; // in handshake: no address yet
        }
        let mut slots = Vec::new();
        for s in f.iter().skip(8) {
            if s.starts_with('[') {
                continue; // a migration in progress: not owned
            }
            let range = match s.split_once('-') {
                Some((a, b)) => a.parse::<u16>().ok().zip(b.parse::<u16>().ok()),
                None => s.parse::<u16>().ok().map(|a| (a, a)),
            };
            if let Some((a, b)) = range.filter(|(a, b)| a <= b && *b < SLOTS) {
                slots.push((a, b));
            }
        }
        out.push(NodeLine {
            addr,
            master: flags.split(',').any(|x| x == "master"),
            failed: flags.split(',').any(|x| x == "fail" || x == "noaddr"),
            epoch: epoch.parse().unwrap_or(0),
            slots,
        });
    }
    out
}

/// Merges several nodes' views: for each slot, the master claiming it with
/// the highest config epoch. A master flagged `fail` (the cluster agreed it
/// is down) claims nothing: its slots are uncovered until a replica takes
/// them.
fn merge(views: &[Vec<NodeLine>]) -> Map {
    let mut best: Vec<Option<(u64, String)>> = vec![None; usize::from(SLOTS)];
    let mut epochs: BTreeMap<String, u64> = BTreeMap::new();
    let mut replicas = Vec::new();
    for view in views {
        for n in view {
            if !n.master {
                replicas.push(n.addr.clone());
                continue;
            }
            if n.failed {
                continue; // the cluster agreed it is down: its slots wait for a replica
            }
            for &(a, b) in &n.slots {
                for s in a..=b {
                    let Some(cell) = best.get_mut(usize::from(s)) else {
                        continue;
                    };
                    if cell.as_ref().is_none_or(|(e, _)| n.epoch > *e) {
                        *cell = Some((n.epoch, n.addr.clone()));
                    }
                }
            }
            let e = epochs.entry(n.addr.clone()).or_insert(0);
            *e = (*e).max(n.epoch);
        }
    }
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let mut masters: Vec<Master> = Vec::new();
    let mut owner = vec![None; usize::from(SLOTS)];
    for (s, cell) in best.iter().enumerate() {
        let Some((_, addr)) = cell else { continue };
        let i = *index.entry(addr.clone()).or_insert_with(|| {
            masters.push(Master {
                addr: addr.clone(),
                epoch: epochs.get(addr).copied().unwrap_or(0),
                slots: Vec::new(),
                lineage: Bytes::new(),
            });
            masters.len() - 1
        });
        if let Some(o) = owner.get_mut(s) {
            *o = Some(i);
        }
        let Some(m) = masters.get_mut(i) else {
            continue;
        };
        let s = s as u16;
        match m.slots.last_mut() {
            Some((_, b)) if *b + 1 == s => *b = s,
            _ => m.slots.push((s, s)),
        }
    }
    replicas.sort();
    replicas.dedup();
    // A view that has not heard of a promotion still lists the promoted
    // node as a replica: what the merged map calls a master is none.
    replicas.retain(|r| !masters.iter().any(|m| &m.addr == r));
    Map {
        owner,
        masters,
        replicas,
    }
}

/// A master's replication history as its `INFO replication` says.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Replication {
    /// `master_replid`: new whenever the node becomes a master by
    /// promotion (or starts afresh); unchanged by a resharding.
    replid: String,
    /// `master_replid2`: the id it had before its promotion, if any.
    replid2: Option<String>,
}

/// Reads `INFO replication`; `None` unless the node says it is a master.
fn parse_replication(text: &str) -> Option<Replication> {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            l.trim_end()
                .strip_prefix(name)
                .and_then(|r| r.strip_prefix(':'))
                .map(str::to_string)
        })
    };
    if field("role").as_deref() != Some("master") {
        return None;
    }
    let valid =
        |id: &String| !id.is_empty() && !id.bytes().all(|b| b == b'0') && !id.contains([',', ';']);
    let replid = field("master_replid").filter(valid)?;
    let replid2 = field("master_replid2").filter(valid);
    Some(Replication { replid, replid2 })
}

/// Fills each master's [`Master::lineage`] from the masters' replication
/// ids (`info`, by address; a master missing there gets none, and the
/// scripts fall back to comparing config epochs).
///
/// Only a master never promoted lists the others. One that was promoted
/// (it has a former id) cannot tell keys moved into it after its
/// promotion (whole) from keys moved into the master it replaced, whose
/// writes there it may lack: both still name the master they came from.
fn set_lineages(map: &mut Map, info: &BTreeMap<String, Replication>) {
    let ids: Vec<&str> = map
        .masters
        .iter()
        .filter_map(|m| info.get(&m.addr).map(|r| r.replid.as_str()))
        .collect();
    let lineages: Vec<Bytes> = map
        .masters
        .iter()
        .map(|m| {
            let Some(me) = info.get(&m.addr) else {
                return Bytes::new();
            };
            let mut arg = format!("{};,", me.replid);
            if me.replid2.is_none() {
                for id in ids.iter().filter(|id| **id != me.replid) {
                    arg.push_str(id);
                    arg.push(',');
                }
            }
            Bytes::from(arg)
        })
        .collect();
    for (m, l) in map.masters.iter_mut().zip(lineages) {
        m.lineage = l;
    }
}

/// What a cluster target knows: its seeds and the slot map as last
/// learned. Shared by the command and subscriber links of a target (in
/// [`crate::target::Target`]).
pub struct Topology {
    seeds: Vec<String>,
    map: Mutex<Option<Arc<Map>>>,
    failovers: AtomicU64,
    refreshes: AtomicU64,
    /// The last refresh's error, for `/readyz`.
    last_error: Mutex<Option<String>>,
}

impl std::fmt::Debug for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topology")
            .field("seeds", &self.seeds)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Topology {
    fn eq(&self, other: &Topology) -> bool {
        self.seeds == other.seeds
    }
}
impl Eq for Topology {}

impl Topology {
    /// `HOST[:PORT],HOST[:PORT]...` (port 6379 by default).
    pub(crate) fn parse(hosts: &str) -> Result<Topology, &'static str> {
        let mut seeds = Vec::new();
        for h in hosts.split(',') {
            let h = h.trim();
            if h.is_empty() {
                return Err("an empty cluster node address");
            }
            let addr = match h.rsplit_once(':') {
                Some((host, port)) if !h.ends_with(']') => {
                    if host.is_empty() {
                        return Err("a cluster node without a host");
                    }
                    port.parse::<u16>()
                        .map_err(|_| "a cluster node's port is not a number")?;
                    h.to_string()
                }
                _ => format!("{h}:{DEFAULT_PORT}"),
            };
            seeds.push(addr);
        }
        Ok(Topology {
            seeds,
            map: Mutex::new(None),
            failovers: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
            last_error: Mutex::new(None),
        })
    }

    /// The seed addresses.
    pub fn seeds(&self) -> &[String] {
        &self.seeds
    }

    /// The slot map as last learned (`None` before any node answered).
    pub fn map(&self) -> Option<Arc<Map>> {
        lock(&self.map).clone()
    }

    /// Fail-overs seen: replicas that became masters between two maps.
    pub fn failovers(&self) -> u64 {
        self.failovers.load(Ordering::Relaxed)
    }

    /// Maps learned since start.
    pub fn refreshes(&self) -> u64 {
        self.refreshes.load(Ordering::Relaxed)
    }

    /// Why the last refresh failed or found the map incomplete, if it did.
    pub fn last_error(&self) -> Option<String> {
        lock(&self.last_error).clone()
    }

    /// Nodes to ask: the masters and replicas known, then the seeds.
    fn candidates(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        if let Some(m) = self.map() {
            out.extend(m.masters.iter().map(|m| m.addr.clone()));
            out.extend(m.replicas.iter().cloned());
        }
        for s in &self.seeds {
            if !out.contains(s) {
                out.push(s.clone());
            }
        }
        out
    }

    /// An address to subscribe at (classic pub/sub reaches every node of
    /// the cluster): a master as last learned, else a seed.
    pub(crate) fn any_node(&self, attempt: usize) -> String {
        let c = self.candidates();
        c.get(attempt % c.len().max(1))
            .cloned()
            .unwrap_or_else(|| self.seeds.first().cloned().unwrap_or_default())
    }

    /// Learns the map from every node it knows; `Err` when none answered.
    pub(crate) async fn refresh(&self, password: Option<&str>) -> Result<Arc<Map>, BrokerError> {
        let candidates = self.candidates();
        let asks = candidates.iter().map(|a| ask_nodes(a, password));
        let answers = futures_join_all(asks).await;
        let mut views = Vec::new();
        let mut info = BTreeMap::new();
        let mut errors = Vec::new();
        for (addr, r) in candidates.iter().zip(answers) {
            match r {
                Ok((text, replication)) => {
                    views.push(parse_nodes(&text, addr));
                    if let Some(r) = replication {
                        info.insert(addr.clone(), r);
                    }
                }
                Err(e) => errors.push(format!("{addr}: {e}")),
            }
        }
        if views.is_empty() {
            let why = format!("no cluster node answered ({})", errors.join("; "));
            *lock(&self.last_error) = Some(why.clone());
            return Err(unavailable(why));
        }
        let mut map = merge(&views);
        set_lineages(&mut map, &info);
        let map = Arc::new(map);
        let uncovered = map.uncovered();
        *lock(&self.last_error) = (uncovered > 0).then(|| {
            format!("{uncovered} of {SLOTS} slots have no master (cluster-require-full-coverage?)")
        });
        let old = lock(&self.map).replace(map.clone());
        if let Some(old) = old {
            let promoted = map
                .masters
                .iter()
                .filter(|m| old.replicas.contains(&m.addr))
                .count();
            if promoted > 0 {
                self.failovers.fetch_add(promoted as u64, Ordering::Relaxed);
                tracing::warn!(
                    promoted,
                    "redis cluster: replicas became masters (fail-over)"
                );
            }
        }
        self.refreshes.fetch_add(1, Ordering::Relaxed);
        Ok(map)
    }

    /// Corrects the map for one slot after `-MOVED` (until the next refresh
    /// says more).
    pub(crate) fn moved(&self, slot: u16, addr: &str) {
        let mut guard = lock(&self.map);
        let Some(map) = guard.as_ref() else { return };
        let mut m = (**map).clone();
        let i = match m.masters.iter().position(|x| x.addr == addr) {
            Some(i) => i,
            None => {
                m.masters.push(Master {
                    addr: addr.to_string(),
                    epoch: 0,
                    slots: Vec::new(),
                    lineage: Bytes::new(),
                });
                m.masters.len() - 1
            }
        };
        if let Some(o) = m.owner.get_mut(usize::from(slot)) {
            *o = Some(i);
        }
        *guard = Some(Arc::new(m));
    }
}

/// Runs futures concurrently (a few: one per cluster node) and returns
/// their outputs in order.
async fn futures_join_all<F>(fs: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    for (i, f) in fs.enumerate() {
        set.spawn(async move { (i, f.await) });
    }
    let mut out: Vec<(usize, F::Output)> = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok(x) = r {
            out.push(x);
        }
    }
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, x)| x).collect()
}

/// Asks one node `CLUSTER NODES` and `INFO replication` (one write, so
/// both describe one moment of the node): the node's view of the map, and
/// its replication ids if it is a master.
fn ask_nodes(
    addr: &str,
    password: Option<&str>,
) -> impl Future<Output = Result<(String, Option<Replication>), String>> + Send + 'static {
    let addr = addr.to_string();
    let password = password.map(str::to_string);
    async move {
        let work = async {
            let mut stream = TcpStream::connect(&addr).await.map_err(|e| e.to_string())?;
            let mut out = BytesMut::new();
            let mut n = 2;
            if let Some(p) = &password {
                resp::encode(&["AUTH", p.as_str()], &mut out);
                n += 1;
            }
            resp::encode(&["CLUSTER", "NODES"], &mut out);
            resp::encode(&["INFO", "replication"], &mut out);
            stream.write_all(&out).await.map_err(|e| e.to_string())?;
            let mut buf = BytesMut::with_capacity(4096);
            let mut replies = Vec::new();
            while replies.len() < n {
                match resp::decode(&mut buf).map_err(|e| e.to_string())? {
                    Some(v) => replies.push(v),
                    None => {
                        if buf.len() > 16 << 20 {
                            return Err("reply too long".into());
                        }
                        if stream.read_buf(&mut buf).await.map_err(|e| e.to_string())? == 0 {
                            return Err("connection closed".into());
                        }
                    }
                }
            }
            let text = |v: &Value| v.bytes().map(|b| String::from_utf8_lossy(b).into_owned());
            // AUTH's and CLUSTER NODES' errors are the node's answer; an
            // INFO refused (a renamed command) only costs the lineage.
            if let Some(Value::Error(e)) = replies[..n - 1]
                .iter()
                .find(|v| matches!(v, Value::Error(_)))
            {
                return Err(String::from_utf8_lossy(e).into_owned());
            }
            let nodes = replies
                .get(n - 2)
                .and_then(text)
                .ok_or("not a CLUSTER NODES answer")?;
            let replication = replies
                .get(n - 1)
                .and_then(text)
                .and_then(|t| parse_replication(&t));
            Ok((nodes, replication))
        };
        tokio::time::timeout(ASK_TIMEOUT, work)
            .await
            .map_err(|_| "no answer in time".to_string())?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "\
07c3 127.0.0.1:30004@40004 slave e7d1 0 1426238317239 4 connected
67ed 127.0.0.1:30002@40002 master - 0 1426238316232 2 connected 5461-10922
292f 127.0.0.1:30003@40003 master - 0 1426238318243 3 connected 10923-16383 [1->-e7d1]
e7d1 :30001@40001 myself,master - 0 0 1 connected 0-5460
";

    #[test]
    fn reads_cluster_nodes() {
        let v = parse_nodes(NODES, "127.0.0.1:30001");
        assert_eq!(v.len(), 4);
        assert_eq!(v[3].addr, "127.0.0.1:30001");
        assert_eq!(v[2].slots, vec![(10923, 16383)]);
        assert!(!v[0].master);
        let map = merge(&[v]);
        assert_eq!(map.uncovered(), 0);
        assert_eq!(map.masters().len(), 3);
        assert_eq!(
            map.owner(12182).map(|m| m.addr.as_str()),
            Some("127.0.0.1:30003")
        );
        assert_eq!(map.owner(0).map(|m| m.epoch), Some(1));
    }

    #[test]
    fn the_highest_epoch_wins_a_slot() {
        let old = parse_nodes(NODES, "127.0.0.1:30001");
        // 30004 was promoted over 30001 under epoch 7; a node that has not
        // heard of it yet still says 30001.
        let new = parse_nodes(
            "07c3 127.0.0.1:30004@40004 myself,master - 0 0 7 connected 0-5460\n",
            "127.0.0.1:30004",
        );
        for views in [vec![old.clone(), new.clone()], vec![new, old]] {
            let map = merge(&views);
            assert_eq!(
                map.owner(100).map(|m| m.addr.as_str()),
                Some("127.0.0.1:30004")
            );
            assert_eq!(map.owner(100).map(|m| m.epoch), Some(7));
        }
    }

    #[test]
    fn a_promoted_node_is_not_also_a_replica() {
        let stale = parse_nodes(NODES, "127.0.0.1:30001");
        let new = parse_nodes(
            "07c3 127.0.0.1:30004@40004 myself,master - 0 0 7 connected 0-5460\n",
            "127.0.0.1:30004",
        );
        let map = merge(&[stale, new]);
        assert!(map.replicas.is_empty(), "{:?}", map.replicas);
    }

    #[test]
    fn uncovered_slots_are_counted() {
        let v = parse_nodes(
            "a 127.0.0.1:1@2 myself,master - 0 0 1 connected 0-99\n",
            "127.0.0.1:1",
        );
        let map = merge(&[v]);
        assert_eq!(map.uncovered(), usize::from(SLOTS) - 100);
        assert!(map.owner(100).is_none());
    }

    const INFO_MASTER: &str = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n\
master_failover_state:no-failover\r\n\
master_replid:8b2e6c1f0a9d4e3b7c6a5f4e3d2c1b0a9f8e7d6c\r\n\
master_replid2:0000000000000000000000000000000000000000\r\n\
master_repl_offset:1234\r\n";

    #[test]
    fn reads_replication_ids_of_masters_only() {
        let r = parse_replication(INFO_MASTER).expect("a master");
        assert_eq!(r.replid, "8b2e6c1f0a9d4e3b7c6a5f4e3d2c1b0a9f8e7d6c");
        assert_eq!(r.replid2, None, "all zeros: no former id");
        let promoted = INFO_MASTER.replace(
            "master_replid2:0000000000000000000000000000000000000000",
            "master_replid2:aaaa",
        );
        assert_eq!(
            parse_replication(&promoted).and_then(|r| r.replid2),
            Some("aaaa".to_string())
        );
        assert!(parse_replication(&INFO_MASTER.replace("role:master", "role:slave")).is_none());
        assert!(parse_replication("role:master\r\n").is_none(), "no id");
        assert!(parse_replication("role:master\r\nmaster_replid:a;b\r\n").is_none());
    }

    #[test]
    fn only_a_master_never_promoted_lists_the_others() {
        let mut map = merge(&[parse_nodes(NODES, "127.0.0.1:30001")]);
        let rep = |id: &str, id2: Option<&str>| Replication {
            replid: id.to_string(),
            replid2: id2.map(str::to_string),
        };
        let mut info = BTreeMap::new();
        info.insert("127.0.0.1:30001".to_string(), rep("a1", Some("old")));
        info.insert("127.0.0.1:30002".to_string(), rep("b1", None));
        info.insert("127.0.0.1:30003".to_string(), rep("c1", None));
        set_lineages(&mut map, &info);
        let lineage = |map: &Map, addr: &str| {
            let m = map
                .masters()
                .iter()
                .find(|m| m.addr == addr)
                .expect("master");
            String::from_utf8_lossy(&m.lineage).into_owned()
        };
        assert_eq!(
            lineage(&map, "127.0.0.1:30001"),
            "a1;,",
            "promoted: itself only"
        );
        assert_eq!(lineage(&map, "127.0.0.1:30002"), "b1;,a1,c1,");
        assert_eq!(lineage(&map, "127.0.0.1:30003"), "c1;,a1,b1,");
        info.remove("127.0.0.1:30002");
        set_lineages(&mut map, &info);
        assert_eq!(lineage(&map, "127.0.0.1:30002"), "", "unknown: no lineage");
        assert_eq!(lineage(&map, "127.0.0.1:30003"), "c1;,a1,");
    }

    #[test]
    fn parses_seed_lists() {
        let t = Topology::parse("a:1,b").expect("seeds");
        assert_eq!(t.seeds(), ["a:1", "b:6379"]);
        for bad in ["", "a:x", ":1", "a,,b"] {
            assert!(Topology::parse(bad).is_err(), "{bad:?}");
        }
    }
}
