//! Hold'em tables made durable in a real `redis-server` (decision 0009),
//! run by two engines, each on its own runtime like two nodes: when the
//! owner dies mid-hand (its runtime dropped: no goodbye, no release) the
//! other claims the table once the lease expires, restores it, and the same
//! hand goes on (same cards, same pot, every chip accounted for, the turn
//! timer still running); an owner cut off from Redis while another node
//! took its table cannot send or save anything more.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use bytes::Bytes;
use herald_core::games::Games;
use herald_core::Client;
use herald_game::durable::Durability;
use herald_game::{Engine, EngineConfig, EngineError, TableSpec};
use herald_proto::{Command, Encoding, Push, Reply, ServerMsg};
use herald_redis::conn::{Link, Target};
use herald_redis::lua;
use herald_redis::tables::TableStore;
use herald_redis::testing::RedisServer;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A node: an engine on its own runtime, with its own Redis connection.
struct Node {
    rt: Option<tokio::runtime::Runtime>,
    engine: Arc<Engine>,
}

impl Node {
    fn start(redis: &RedisServer, name: &str, lease: Duration) -> Node {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let url = redis.url();
        let engine = rt.block_on(async {
            let link = Link::start(
                Target::parse(&url).unwrap(),
                lua::setup(),
                Duration::from_secs(2),
            );
            let deadline = Instant::now() + Duration::from_secs(10);
            while !link.is_up() {
                assert!(Instant::now() < deadline, "no redis");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Engine::with_durability(
                EngineConfig::default(),
                vec![herald_holdem::factory()],
                Durability {
                    store: Arc::new(TableStore::new(link, "herald", name)),
                    lease,
                },
            )
        });
        Node {
            rt: Some(rt),
            engine,
        }
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.as_ref().expect("node alive").block_on(f)
    }

    fn claim(
        &self,
        table: u64,
        spec: &TableSpec,
    ) -> Result<herald_game::engine::Owned, EngineError> {
        self.block_on(self.engine.claim_table(table, spec))
    }

    /// Dies like a SIGKILLed process: every task stops where it is.
    fn kill(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// A player: a connection and everything it received, decoded.
struct Player {
    c: Arc<Client>,
    got: Vec<ServerMsg>,
}

impl Player {
    fn new(user: &str) -> Player {
        Player {
            c: herald_game::testing::client(user, Encoding::Json),
            got: Vec::new(),
        }
    }

    fn read(&mut self) {
        self.got.extend(herald_game::testing::drain(&self.c));
    }

    /// Waits for a message matching `pred`, returning it (and forgetting
    /// everything received up to it).
    fn wait<T>(&mut self, what: &str, mut pred: impl FnMut(&ServerMsg) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            self.read();
            if let Some(i) = self.got.iter().position(|m| pred(m).is_some()) {
                let m = self.got.drain(..=i).last().expect("found");
                return pred(&m).expect("matches");
            }
            assert!(
                Instant::now() < deadline,
                "{}: no {what}; got {:?}",
                self.c.user(),
                self.got
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn game_event(&mut self, t: &str) -> Value {
        self.wait(t, |m| match m {
            ServerMsg::Push(Push::Game { data, .. }) => {
                let v: Value = serde_json::from_slice(data).ok()?;
                (v["t"] == t).then_some(v)
            }
            _ => None,
        })
    }

    fn sit(&mut self, e: &Engine, table: u64) -> Value {
        e.command(
            &self.c,
            1,
            Command::Sit {
                table,
                seat: None,
                data: Bytes::new(),
            },
        );
        self.wait("sit reply", |m| match m {
            ServerMsg::Reply {
                reply: Reply::Sit { data, .. },
                ..
            } => serde_json::from_slice(data).ok(),
            ServerMsg::Error { code, message, .. } => panic!("sit refused: {code} {message}"),
            _ => None,
        })
    }

    fn act(&mut self, e: &Engine, table: u64, id: u32, a: Value) {
        e.command(
            &self.c,
            id,
            Command::Act {
                table,
                data: Bytes::from(a.to_string()),
            },
        );
        self.wait("act reply", |m| match m {
            ServerMsg::Reply {
                id: i,
                reply: Reply::Act,
            } if *i == id => Some(()),
            ServerMsg::Error {
                id: i,
                code,
                message,
            } if *i == id => {
                panic!("act refused: {code} {message}")
            }
            _ => None,
        });
    }
}

fn spec(action_ms: u64) -> TableSpec {
    let mut params = serde_json::Map::new();
    params.insert("seed".into(), json!(5));
    params.insert("action_ms".into(), json!(action_ms));
    params.insert("hand_ms".into(), json!(1_000));
    params.insert("street_ms".into(), json!(50));
    TableSpec {
        game: "holdem".into(),
        seats: 3,
        timing: "super-express".into(),
        path: None,
        params,
    }
}

/// Stacks plus the pot.
fn chips(state: &Value) -> u64 {
    state["seats"]
        .as_array()
        .expect("seats")
        .iter()
        .map(|s| s["stack"].as_u64().expect("stack"))
        .sum::<u64>()
        + state["pot"].as_u64().expect("pot")
}

#[test]
fn the_owner_killed_mid_hand_the_other_node_resumes_the_same_hand() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let lease = Duration::from_millis(400);
    let mut a = Node::start(&redis, "a", lease);
    let b = Node::start(&redis, "b", lease);
    let spec = spec(3_000);
    let owned = a.claim(1, &spec).unwrap();
    assert!(!owned.restored);
    assert!(matches!(b.claim(1, &spec), Err(EngineError::Held(1, by)) if by == "a:1"));

    // Three players at a's table; the first hand starts.
    let users = ["ann", "bob", "cat"];
    let mut players: Vec<Player> = users.iter().map(|u| Player::new(u)).collect();
    for p in &mut players {
        p.sit(&a.engine, 1);
    }
    let mut cards = Vec::new();
    for p in &mut players {
        cards.push(p.game_event("cards")["cards"].clone());
    }
    // Two actions, each acknowledged (so saved) before a dies.
    let mut turn = players[0].game_event("turn");
    for id in 10..12 {
        let seat = turn["seat"].as_u64().unwrap() as usize;
        players[seat].act(&a.engine, 1, id, json!({"a": "call"}));
        turn = players[0].game_event("turn");
    }
    let before: Value =
        serde_json::from_slice(&a.block_on(a.engine.table(1)).unwrap().state).unwrap();
    assert_eq!(before["street"], "preflop");
    assert_eq!(before["turn"], turn["seat"]);

    a.kill();
    // b takes the table over once a's lease expires.
    let deadline = Instant::now() + Duration::from_secs(10);
    let owned = loop {
        match b.claim(1, &spec) {
            Ok(o) => break o,
            Err(EngineError::Held(..)) => {
                assert!(Instant::now() < deadline, "a's lease never expired");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("take-over failed: {e}"),
        }
    };
    assert!(owned.restored);
    assert_eq!(owned.lease.token, 2);

    // The players come back on b, to their seats, in the same hand.
    let mut players: Vec<Player> = users.iter().map(|u| Player::new(u)).collect();
    for (seat, p) in players.iter_mut().enumerate() {
        let mut snap = p.sit(&b.engine, 1);
        assert_eq!(
            snap["cards"], cards[seat],
            "{} keeps their cards",
            users[seat]
        );
        snap.as_object_mut().unwrap().remove("cards");
        for k in ["hand", "street", "board", "pot", "turn", "button", "seats"] {
            assert_eq!(snap[k], before[k], "{k} after the take-over");
        }
        assert_eq!(chips(&snap), chips(&before), "chips conserved");
    }
    // The turn timer resumed: nobody acts, and the table acts for the seat.
    let seat = before["turn"].as_u64().unwrap();
    let auto = players[0].game_event("action");
    assert_eq!(auto["seat"].as_u64(), Some(seat));
    assert_eq!(auto["auto"], true);
    // And the hand goes on with the players' own actions.
    let next = players[0].game_event("turn");
    let s = next["seat"].as_u64().unwrap() as usize;
    players[s].act(&b.engine, 1, 20, json!({"a": "call"}));
    let after: Value =
        serde_json::from_slice(&b.block_on(b.engine.table(1)).unwrap().state).unwrap();
    assert_eq!(after["hand"], before["hand"]);
    assert_eq!(chips(&after), chips(&before));
}

/// a's lease is gone while a is cut off from Redis (the key deleted as if
/// it had expired) and b takes the table. When a's player acts, a's save is
/// refused: the player gets no acknowledgement and no event from a, only
/// the news that the table moved, and the saved state stays b's.
#[test]
fn an_owner_that_lost_its_lease_sends_and_saves_nothing() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let lease = Duration::from_secs(10);
    let a = Node::start(&redis, "a", lease);
    let b = Node::start(&redis, "b", lease);
    let spec = spec(60_000);
    a.claim(2, &spec).unwrap();
    let mut players: Vec<Player> = ["ann", "bob"].iter().map(|u| Player::new(u)).collect();
    for p in &mut players {
        p.sit(&a.engine, 2);
    }
    let turn = players[0].game_event("turn");
    redis.command(&["DEL", "herald:t:{2}:lease"]).unwrap();
    let owned = b.claim(2, &spec).unwrap();
    assert!(owned.restored);
    assert_eq!(owned.lease.token, 2);

    let seat = turn["seat"].as_u64().unwrap() as usize;
    a.engine.command(
        &players[seat].c,
        30,
        Command::Act {
            table: 2,
            data: Bytes::from_static(br#"{"a":"call"}"#),
        },
    );
    let code = players[seat].wait("unseat", |m| match m {
        ServerMsg::Reply { id: 30, .. } => panic!("a acknowledged an action it could not save"),
        ServerMsg::Push(Push::Game { data, .. }) if data.starts_with(br#"{"t":"action""#) => {
            panic!("a sent an event it could not save")
        }
        ServerMsg::Push(Push::Unseat { code, .. }) => Some(*code),
        _ => None,
    });
    assert_eq!(code, 115);
    let deadline = Instant::now() + Duration::from_secs(5);
    while a.engine.runs_here(2) {
        assert!(Instant::now() < deadline, "a still runs the table");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(b.engine.runs_here(2));
    // b saves on taking over; a never writes again.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tok = redis
            .command(&["HGET", "herald:t:{2}:state", "tok"])
            .unwrap();
        if tok.int() == Some(2) {
            break;
        }
        assert!(Instant::now() < deadline, "b never saved: {tok:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    // b's table, restored before the action, still waits for that seat.
    let state: Value =
        serde_json::from_slice(&b.block_on(b.engine.table(2)).unwrap().state).unwrap();
    assert_eq!(state["turn"].as_u64(), Some(seat as u64));
}

/// Redis restarted without its data in the middle of a hand: the owner,
/// alive, still has the table in memory. Its next save (or renewal) finds
/// no lease, claims the table again with a token above its old one, and
/// writes its state back: nothing is reset, the hand goes on.
#[test]
fn redis_losing_its_data_does_not_reset_a_table_whose_owner_lives() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let a = Node::start(&redis, "a", Duration::from_secs(2));
    a.claim(3, &spec(60_000)).unwrap();
    let mut players: Vec<Player> = ["ann", "bob"].iter().map(|u| Player::new(u)).collect();
    for p in &mut players {
        p.sit(&a.engine, 3);
    }
    let turn = players[0].game_event("turn");
    let before: Value =
        serde_json::from_slice(&a.block_on(a.engine.table(3)).unwrap().state).unwrap();
    redis.restart();
    let seat = turn["seat"].as_u64().unwrap() as usize;
    players[seat].act(&a.engine, 3, 40, json!({"a": "call"}));
    let after: Value =
        serde_json::from_slice(&a.block_on(a.engine.table(3)).unwrap().state).unwrap();
    assert_eq!(after["hand"], before["hand"]);
    assert_eq!(chips(&after), chips(&before), "{before}\n{after}");
    assert!(a.engine.runs_here(3));
    let tok = redis
        .command(&["HGET", "herald:t:{3}:state", "tok"])
        .unwrap();
    assert_eq!(tok.int(), Some(2), "claimed again above the old token");
}

/// Redis restarted without its data after the owner died: nobody has the
/// table's state. A node that knew the table (it saw its lease) refuses to
/// start it afresh, which would silently reset its players' chips.
#[test]
fn a_table_whose_state_and_owner_are_both_gone_is_not_reset() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let lease = Duration::from_millis(400);
    let mut a = Node::start(&redis, "a", lease);
    let b = Node::start(&redis, "b", lease);
    let spec = spec(60_000);
    a.claim(4, &spec).unwrap();
    assert!(matches!(b.claim(4, &spec), Err(EngineError::Held(4, _))));
    let mut p = Player::new("ann");
    p.sit(&a.engine, 4);
    a.kill();
    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    let err = loop {
        match b.claim(4, &spec) {
            Err(EngineError::Store(_)) => {
                assert!(Instant::now() < deadline, "redis never came back");
                std::thread::sleep(Duration::from_millis(50));
            }
            other => break other,
        }
    };
    match err {
        Err(EngineError::Restore(4, why)) => assert!(why.contains("not started afresh"), "{why}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(!b.engine.runs_here(4));
}
