//! Group commit of durable tables (decision 0009), with a store in memory
//! whose saves can be held: what a table's mailbox gathered during one save
//! is handled together and saved once, nothing of it reaches a player
//! before that save returned, and it arrives in order; the saves of many
//! tables go to the store in one batch, each fenced on its own.

#![allow(clippy::unwrap_used, missing_docs)]

use bytes::Bytes;
use herald_core::games::Games;
use herald_core::Client;
use herald_game::durable::{BoxFuture, Claimed, Durability, Lease, StoreError, TableStore};
use herald_game::testing::drain;
use herald_game::{
    ActionError, Ctx, Engine, EngineConfig, Game, GameFactory, Seat, TableParams, TableSpec,
};
use herald_proto::{ErrorCode, Push, Reply, ServerMsg};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// Counts `inc` actions, telling the table each new count; saves the count.
struct Count {
    n: u64,
}

impl Game for Count {
    fn can_sit(&self, _seat: Seat, _user: &str, _data: &[u8]) -> Result<(), String> {
        Ok(())
    }
    fn sat(&mut self, _ctx: &mut Ctx, _seat: Seat, _user: &str, _data: &[u8]) {}
    fn left(&mut self, _ctx: &mut Ctx, _seat: Seat) {}
    fn dropped(&mut self, _ctx: &mut Ctx, _seat: Seat) {}
    fn timer(&mut self, _ctx: &mut Ctx, _key: u64) {}
    fn act(&mut self, ctx: &mut Ctx, _seat: Seat, data: &[u8]) -> Result<(), ActionError> {
        if data != b"\"inc\"" {
            return Err(ActionError::Illegal("only inc".into()));
        }
        self.n += 1;
        ctx.send_table(format!("{{\"n\":{}}}", self.n));
        Ok(())
    }
    fn snapshot(&self, _seat: Option<Seat>) -> Bytes {
        format!("{{\"n\":{}}}", self.n).into()
    }
    fn save(&self) -> Option<Vec<u8>> {
        Some(format!("n={}", self.n).into_bytes())
    }
}

struct CountFactory;

impl GameFactory for CountFactory {
    fn name(&self) -> &'static str {
        "count"
    }
    fn create(&self, _params: &TableParams) -> Result<Box<dyn Game>, String> {
        Ok(Box::new(Count { n: 0 }))
    }
}

/// A store in memory: every claim wins, saves wait while the gate is
/// closed, tables in `fenced` are refused; every call to the store's save
/// path is logged as the list of (table, record) it carried.
struct Store {
    /// Saves that may still pass: `None` open, `Some(n)` n more.
    gate: Mutex<Option<u64>>,
    moved: Notify,
    fenced: Mutex<HashSet<u64>>,
    calls: Mutex<Vec<Vec<(u64, Bytes)>>>,
    /// Saves waiting at the gate.
    waiting: AtomicU64,
}

impl Store {
    fn new() -> Arc<Store> {
        Arc::new(Store {
            gate: Mutex::new(None),
            moved: Notify::new(),
            fenced: Mutex::new(HashSet::new()),
            calls: Mutex::new(Vec::new()),
            waiting: AtomicU64::new(0),
        })
    }
    fn calls(&self) -> Vec<Vec<(u64, Bytes)>> {
        self.calls.lock().unwrap().clone()
    }
    fn set_gate(&self, gate: Option<u64>) {
        *self.gate.lock().unwrap() = gate;
        self.moved.notify_waiters();
    }
    async fn pass(&self) {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        loop {
            let moved = self.moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            {
                let mut gate = self.gate.lock().unwrap();
                match *gate {
                    None => break,
                    Some(n) if n > 0 => {
                        *gate = Some(n - 1);
                        break;
                    }
                    Some(_) => {}
                }
            }
            moved.await;
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }
    fn result(&self, lease: Lease) -> Result<u64, StoreError> {
        if self.fenced.lock().unwrap().contains(&lease.table) {
            Err(StoreError::Fenced(Some("other:9".into())))
        } else {
            Ok(1)
        }
    }
}

impl TableStore for Store {
    fn node(&self) -> &str {
        "n1"
    }
    fn claim(
        &self,
        table: u64,
        _floor: u64,
        _lease: Duration,
    ) -> BoxFuture<'_, Result<Claimed, StoreError>> {
        Box::pin(async move {
            Ok(Claimed::Won {
                lease: Lease { table, token: 1 },
                now_ms: 1,
                saved: None,
            })
        })
    }
    fn save(&self, lease: Lease, record: Bytes) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            self.calls.lock().unwrap().push(vec![(lease.table, record)]);
            self.pass().await;
            self.result(lease)
        })
    }
    fn save_all(
        &self,
        saves: Vec<(Lease, Bytes)>,
    ) -> BoxFuture<'_, Result<Vec<Result<u64, StoreError>>, StoreError>> {
        Box::pin(async move {
            self.calls
                .lock()
                .unwrap()
                .push(saves.iter().map(|(l, r)| (l.table, r.clone())).collect());
            self.pass().await;
            Ok(saves.iter().map(|(l, _)| self.result(*l)).collect())
        })
    }
    fn renew(&self, _lease: Lease, _time: Duration) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async { Ok(true) })
    }
}

/// Lets every ready task run (one thread: when this returns, every task
/// that could move has moved).
fn client(user: &str) -> Arc<Client> {
    herald_game::testing::client(user, herald_proto::Encoding::Json)
}

async fn settle() {
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn engine(store: Arc<Store>) -> Arc<Engine> {
    Engine::with_durability(
        EngineConfig {
            grace: Duration::from_secs(60),
            lobby_interval: Duration::from_millis(250),
            mailbox: 256,
            ..EngineConfig::default()
        },
        vec![Arc::new(CountFactory)],
        Durability {
            store,
            lease: Duration::from_secs(30),
        },
    )
}

fn spec() -> TableSpec {
    TableSpec {
        game: "count".into(),
        seats: 4,
        timing: "normal".into(),
        path: None,
        params: Default::default(),
    }
}

fn sit(e: &Engine, c: &Arc<Client>, id: u32, table: u64) {
    e.command(
        c,
        id,
        herald_proto::Command::Sit {
            table,
            seat: None,
            data: Bytes::new(),
        },
    );
}

fn act(e: &Engine, c: &Arc<Client>, id: u32, table: u64) {
    e.command(
        c,
        id,
        herald_proto::Command::Act {
            table,
            data: Bytes::from_static(b"\"inc\""),
        },
    );
}

/// A table with one seated player, everything so far delivered.
async fn seated(e: &Engine, table: u64, user: &str) -> Arc<Client> {
    e.claim_table(table, &spec()).await.unwrap();
    let c = client(user);
    sit(e, &c, 1, table);
    settle().await;
    let got = drain(&c);
    assert!(
        got.iter().any(|m| matches!(
            m,
            ServerMsg::Reply {
                id: 1,
                reply: Reply::Sit { .. }
            }
        )),
        "{got:?}"
    );
    c
}

/// What a client got, as `reply ID` and `n=N` (game pushes).
fn story(msgs: &[ServerMsg]) -> Vec<String> {
    msgs.iter()
        .filter_map(|m| match m {
            ServerMsg::Reply { id, .. } => Some(format!("reply {id}")),
            ServerMsg::Push(Push::Game { data, .. }) => {
                Some(String::from_utf8_lossy(data).to_string())
            }
            ServerMsg::Push(Push::Unseat { code, .. }) => Some(format!("unseat {code}")),
            _ => None,
        })
        .collect()
}

/// Messages that queued while a save was held are handled as one group
/// and saved once; nothing reaches the player before that save returns;
/// everything arrives in the order it was produced.
#[tokio::test]
async fn messages_queued_during_a_save_are_saved_once_and_sent_after_it() {
    let store = Store::new();
    let e = engine(store.clone());
    let c = seated(&e, 1, "alice").await;
    let before = store.calls().len();
    store.set_gate(Some(0));
    act(&e, &c, 2, 1);
    settle().await;
    assert_eq!(
        store.waiting.load(Ordering::SeqCst),
        1,
        "act 2's save is held"
    );
    for id in 3..=7 {
        act(&e, &c, id, 1);
    }
    settle().await;
    assert_eq!(drain(&c), vec![], "nothing before its save returned");
    assert_eq!(
        store.calls().len(),
        before + 1,
        "one save in flight per table"
    );
    // Only act 2's save passes; the group's is held in turn.
    store.set_gate(Some(1));
    settle().await;
    let calls = store.calls();
    assert_eq!(
        calls.len(),
        before + 2,
        "acts 3..7 saved together: {calls:?}"
    );
    let got = story(&drain(&c));
    assert_eq!(got, vec!["reply 2", "{\"n\":1}"], "act 2's save returned");
    store.set_gate(None);
    settle().await;
    let got = story(&drain(&c));
    let want: Vec<String> = (3..=7)
        .flat_map(|id| [format!("reply {id}"), format!("{{\"n\":{}}}", id - 1)])
        .collect();
    assert_eq!(got, want, "in order, after the group's save");
    let (table, record) = &store.calls()[before + 1][0];
    assert_eq!(*table, 1);
    assert!(
        record.ends_with(b"n=6"),
        "the group's save holds all five acts"
    );
    assert_eq!(store.calls().len(), before + 2);
}

/// The saves of many tables made while one batch was in flight go to the
/// store together, in one call; a table fenced in that batch stops alone
/// (its player hears `unseat` 115, not the reply), the others are answered.
#[tokio::test]
async fn saves_of_many_tables_go_in_one_batch_each_fenced_on_its_own() {
    let store = Store::new();
    let e = engine(store.clone());
    let mut players = Vec::new();
    for t in 1..=20 {
        players.push(seated(&e, t, &format!("p{t}")).await);
    }
    let before = store.calls().len();
    store.set_gate(Some(0));
    act(&e, &players[0], 2, 1);
    settle().await;
    store.fenced.lock().unwrap().insert(5);
    for t in 2..=20u64 {
        act(&e, &players[t as usize - 1], 2, t);
    }
    settle().await;
    for p in &players {
        assert_eq!(drain(p), vec![], "nothing before the saves returned");
    }
    store.set_gate(None);
    settle().await;
    let calls = store.calls();
    let tables: Vec<Vec<u64>> = calls[before..]
        .iter()
        .map(|c| {
            let mut t: Vec<u64> = c.iter().map(|(t, _)| *t).collect();
            t.sort_unstable();
            t
        })
        .collect();
    assert_eq!(tables, vec![vec![1], (2..=20).collect::<Vec<u64>>()]);
    for (i, p) in players.iter().enumerate() {
        let got = story(&drain(p));
        if i + 1 == 5 {
            let moved = format!("unseat {}", ErrorCode::UnknownTable.code());
            assert_eq!(got, vec![moved], "the fenced table sends nothing else");
        } else {
            assert_eq!(got, vec!["reply 2", "{\"n\":1}"], "table {}", i + 1);
        }
    }
    let leases = e.leases();
    assert!(!leases.contains_key(&5), "the fenced table stopped");
    assert_eq!(leases.len(), 19);
}
