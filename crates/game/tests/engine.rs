//! The engine with a tiny counting game, on tokio's paused clock: seats,
//! the seat race, reply-before-broadcast order, drops and the grace period,
//! reconnects, timers, a panicking game, and the lobby's snapshot + deltas.

use bytes::Bytes;
use herald_core::games::Games;
use herald_core::Client;
use herald_game::testing::drain;
use herald_game::{
    ActionError, Ctx, Engine, EngineConfig, Game, GameFactory, Seat, TableParams, TableSpec,
};
use herald_proto::{Encoding, Push, Reply, SeatStatus, ServerMsg, TableEntry};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Counts `inc` actions; `tick` to the table 5 s after each sit; refuses
/// user "banned"; `bad` is illegal; `panic` panics.
struct Count {
    n: u64,
}

impl Game for Count {
    fn can_sit(&self, _seat: Seat, user: &str, _data: &[u8]) -> Result<(), String> {
        if user == "banned" {
            Err("you are banned".into())
        } else {
            Ok(())
        }
    }
    fn sat(&mut self, ctx: &mut Ctx, _seat: Seat, _user: &str, _data: &[u8]) {
        ctx.set_timer(1, Duration::from_secs(5));
        ctx.set_attr("n", self.n);
    }
    fn left(&mut self, ctx: &mut Ctx, seat: Seat) {
        ctx.send_table(format!("{{\"left\":{seat}}}"));
    }
    fn dropped(&mut self, ctx: &mut Ctx, seat: Seat) {
        ctx.send_players(format!("{{\"dropped\":{seat}}}"));
    }
    fn act(&mut self, ctx: &mut Ctx, seat: Seat, data: &[u8]) -> Result<(), ActionError> {
        match data {
            b"\"inc\"" => {
                self.n += 1;
                ctx.send_table(format!("{{\"n\":{},\"by\":{seat}}}", self.n));
                ctx.send_to(seat, "\"private\"");
                ctx.set_attr("n", self.n);
                ctx.hand_finished();
                Ok(())
            }
            b"\"unseat\"" => {
                ctx.unseat(seat, "you asked for it");
                Ok(())
            }
            b"\"panic\"" => panic!("the game's own bug"),
            _ => Err(ActionError::Illegal("only inc".into())),
        }
    }
    fn timer(&mut self, ctx: &mut Ctx, key: u64) {
        ctx.send_table(format!("{{\"tick\":{key}}}"));
    }
    fn snapshot(&self, seat: Option<Seat>) -> Bytes {
        match seat {
            Some(s) => format!("{{\"n\":{},\"you\":{s}}}", self.n).into(),
            None => format!("{{\"n\":{}}}", self.n).into(),
        }
    }
}

struct CountFactory;

impl GameFactory for CountFactory {
    fn name(&self) -> &'static str {
        "count"
    }
    fn create(&self, params: &TableParams) -> Result<Box<dyn Game>, String> {
        if params.timing == "never" {
            return Err("no such timing".into());
        }
        Ok(Box::new(Count { n: 0 }))
    }
}

/// Lets every task run (the clock is paused, so nothing else moves).
fn client(user: &str) -> Arc<Client> {
    herald_game::testing::client(user, Encoding::Json)
}

fn binary_client(user: &str) -> Arc<Client> {
    herald_game::testing::client(user, Encoding::Binary)
}

async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

fn engine(grace: u64) -> Arc<Engine> {
    Engine::new(
        EngineConfig {
            grace: Duration::from_secs(grace),
            lobby_interval: Duration::from_millis(250),
            mailbox: 64,
            ..EngineConfig::default()
        },
        vec![Arc::new(CountFactory)],
    )
}

fn spec(seats: u32) -> TableSpec {
    TableSpec {
        game: "count".into(),
        seats,
        timing: "normal".into(),
        path: None,
        params: Default::default(),
    }
}

fn sit(e: &Engine, c: &Arc<Client>, id: u32, table: u64, seat: Option<u32>) {
    e.command(
        c,
        id,
        herald_proto::Command::Sit {
            table,
            seat,
            data: Bytes::new(),
        },
    );
}

fn act(e: &Engine, c: &Arc<Client>, id: u32, table: u64, data: &'static str) {
    e.command(
        c,
        id,
        herald_proto::Command::Act {
            table,
            data: Bytes::from_static(data.as_bytes()),
        },
    );
}

fn error_code(m: &ServerMsg) -> Option<u16> {
    match m {
        ServerMsg::Error { code, .. } => Some(*code),
        _ => None,
    }
}

fn game_data(m: &ServerMsg) -> Option<String> {
    match m {
        ServerMsg::Push(Push::Game { data, .. }) => Some(String::from_utf8_lossy(data).into()),
        _ => None,
    }
}

#[tokio::test(start_paused = true)]
async fn sit_act_stand_in_order() {
    let e = engine(60);
    let t = e.create_table(&spec(2)).unwrap();
    let (a, b) = (client("ann"), binary_client("bob"));
    sit(&e, &a, 1, t, Some(0));
    settle().await;
    sit(&e, &b, 1, t, None);
    settle().await;
    let got = drain(&a);
    assert_eq!(
        got[0],
        ServerMsg::Reply {
            id: 1,
            reply: Reply::Sit {
                seat: 0,
                data: Bytes::from_static(b"{\"n\":0,\"you\":0}")
            }
        }
    );
    // Ann sees Bob sit.
    assert!(got.iter().any(|m| matches!(m,
        ServerMsg::Push(Push::Seat { seat: 1, user, status: SeatStatus::Sat, .. }) if user == "bob")));
    let got = drain(&b);
    assert!(
        matches!(
            &got[0],
            ServerMsg::Reply {
                id: 1,
                reply: Reply::Sit { seat: 1, .. }
            }
        ),
        "{got:?}"
    );

    act(&e, &b, 2, t, "\"inc\"");
    settle().await;
    let got = drain(&b);
    // The reply comes before the broadcast of what the action did.
    assert_eq!(
        got[0],
        ServerMsg::Reply {
            id: 2,
            reply: Reply::Act
        }
    );
    assert_eq!(game_data(&got[1]).as_deref(), Some("{\"n\":1,\"by\":1}"));
    assert_eq!(game_data(&got[2]).as_deref(), Some("\"private\""));
    let got = drain(&a);
    assert_eq!(
        got.len(),
        1,
        "ann gets the broadcast, not bob's private message"
    );
    assert_eq!(game_data(&got[0]).as_deref(), Some("{\"n\":1,\"by\":1}"));

    // Refused action: error 118, nothing sent to anyone.
    act(&e, &a, 3, t, "\"bad\"");
    settle().await;
    let got = drain(&a);
    assert_eq!(error_code(&got[0]), Some(118));
    assert!(drain(&b).is_empty());

    e.command(&a, 4, herald_proto::Command::Stand { table: t });
    settle().await;
    let got = drain(&a);
    assert!(got.iter().any(|m| *m
        == ServerMsg::Reply {
            id: 4,
            reply: Reply::Stand
        }));
    let got = drain(&b);
    assert!(got.iter().any(|m| matches!(
        m,
        ServerMsg::Push(Push::Seat {
            seat: 0,
            status: SeatStatus::Left,
            ..
        })
    )));
    assert_eq!(e.metrics().players.get(), 1);
    assert_eq!(e.metrics().hands.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn bad_input_gets_codes() {
    let e = engine(60);
    let t = e.create_table(&spec(2)).unwrap();
    let a = client("ann");
    sit(&e, &a, 1, 999, None);
    act(&e, &a, 2, t, "\"inc\"");
    sit(&e, &a, 3, t, Some(7));
    let banned = client("banned");
    sit(&e, &banned, 4, t, None);
    settle().await;
    let got: Vec<_> = drain(&a).iter().filter_map(error_code).collect();
    assert_eq!(got, vec![115, 117, 116]);
    assert_eq!(
        drain(&banned)
            .iter()
            .filter_map(error_code)
            .collect::<Vec<_>>(),
        vec![116]
    );
    // Sitting twice on the same connection; watching while seated.
    sit(&e, &a, 5, t, None);
    settle().await;
    sit(&e, &a, 6, t, None);
    e.command(&a, 7, herald_proto::Command::Watch { table: t });
    settle().await;
    let codes: Vec<_> = drain(&a).iter().filter_map(error_code).collect();
    assert_eq!(codes, vec![119, 119]);
    // Unknown game, refused parameters.
    let mut s = spec(2);
    s.game = "chess".into();
    assert!(e.create_table(&s).is_err());
    let mut s = spec(2);
    s.timing = "never".into();
    assert!(e.create_table(&s).is_err());
}

#[tokio::test(start_paused = true)]
async fn seat_race_has_one_winner() {
    let e = engine(60);
    let t = e.create_table(&spec(2)).unwrap();
    let players: Vec<_> = (0..8).map(|i| client(&format!("p{i}"))).collect();
    for p in &players {
        sit(&e, p, 1, t, Some(1));
    }
    settle().await;
    let mut won = 0;
    let mut lost = 0;
    for p in &players {
        match &drain(p)[0] {
            ServerMsg::Reply {
                reply: Reply::Sit { seat: 1, .. },
                ..
            } => won += 1,
            m if error_code(m) == Some(116) => lost += 1,
            m => panic!("unexpected {m:?}"),
        }
    }
    assert_eq!((won, lost), (1, 7));
}

#[tokio::test(start_paused = true)]
async fn dropped_player_keeps_seat_for_the_grace_period_and_returns() {
    let e = engine(30);
    let t = e.create_table(&spec(2)).unwrap();
    let (a, b) = (client("ann"), client("bob"));
    sit(&e, &a, 1, t, Some(0));
    sit(&e, &b, 1, t, Some(1));
    settle().await;
    drain(&a);
    drain(&b);

    e.gone(&a);
    settle().await;
    let got = drain(&b);
    assert!(
        got.iter().any(|m| matches!(
            m,
            ServerMsg::Push(Push::Seat {
                seat: 0,
                status: SeatStatus::Away,
                ..
            })
        )),
        "{got:?}"
    );
    assert!(got
        .iter()
        .any(|m| game_data(m).as_deref() == Some("{\"dropped\":0}")));
    let info = e.table(t).await.unwrap();
    assert_eq!(info.seats[0], (0, "ann".to_string(), true));

    // Ann comes back on another connection (another transport would do the
    // same: the session is the same for all) within the grace period.
    tokio::time::advance(Duration::from_secs(20)).await;
    let a2 = binary_client("ann");
    sit(&e, &a2, 9, t, None);
    settle().await;
    let got = drain(&a2);
    assert_eq!(
        got[0],
        ServerMsg::Reply {
            id: 9,
            reply: Reply::Sit {
                seat: 0,
                data: Bytes::from_static(b"{\"n\":0,\"you\":0}")
            }
        }
    );
    assert!(drain(&b).iter().any(|m| matches!(
        m,
        ServerMsg::Push(Push::Seat {
            seat: 0,
            status: SeatStatus::Back,
            ..
        })
    )));
    // The old grace timer does not fire any more.
    tokio::time::advance(Duration::from_secs(30)).await;
    settle().await;
    assert_eq!(e.table(t).await.unwrap().seats.len(), 2);
    act(&e, &a2, 10, t, "\"inc\"");
    settle().await;
    assert_eq!(
        drain(&a2)[0],
        ServerMsg::Reply {
            id: 10,
            reply: Reply::Act
        }
    );

    // Bob drops and does not come back: his seat is freed after 30 s.
    e.gone(&b);
    settle().await;
    tokio::time::advance(Duration::from_secs(29)).await;
    settle().await;
    assert_eq!(e.table(t).await.unwrap().seats.len(), 2);
    tokio::time::advance(Duration::from_secs(2)).await;
    settle().await;
    let info = e.table(t).await.unwrap();
    assert_eq!(info.seats, vec![(0, "ann".to_string(), false)]);
    assert!(drain(&a2).iter().any(|m| matches!(
        m,
        ServerMsg::Push(Push::Seat {
            seat: 1,
            status: SeatStatus::Left,
            ..
        })
    )));
    assert_eq!(e.metrics().players.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn same_user_on_a_new_connection_takes_the_seat_over() {
    let e = engine(30);
    let t = e.create_table(&spec(2)).unwrap();
    let a = client("ann");
    sit(&e, &a, 1, t, None);
    settle().await;
    drain(&a);
    let a2 = client("ann");
    sit(&e, &a2, 1, t, None);
    settle().await;
    assert!(matches!(
        drain(&a2)[0],
        ServerMsg::Reply {
            reply: Reply::Sit { seat: 0, .. },
            ..
        }
    ));
    assert!(matches!(
        drain(&a)[0],
        ServerMsg::Push(Push::Unseat { code: 117, .. })
    ));
    // The old connection can no longer act for the seat.
    act(&e, &a, 2, t, "\"inc\"");
    settle().await;
    assert_eq!(error_code(&drain(&a)[0]), Some(117));
}

#[tokio::test(start_paused = true)]
async fn timers_fire_on_the_paused_clock() {
    let e = engine(60);
    let t = e.create_table(&spec(2)).unwrap();
    let a = client("ann");
    sit(&e, &a, 1, t, None);
    settle().await;
    drain(&a);
    tokio::time::advance(Duration::from_millis(4999)).await;
    settle().await;
    assert!(drain(&a).is_empty());
    tokio::time::advance(Duration::from_millis(2)).await;
    settle().await;
    let got = drain(&a);
    assert_eq!(game_data(&got[0]).as_deref(), Some("{\"tick\":1}"));
}

#[tokio::test(start_paused = true)]
async fn a_game_that_panics_closes_only_its_table() {
    let e = engine(60);
    let t1 = e.create_table(&spec(2)).unwrap();
    let t2 = e.create_table(&spec(2)).unwrap();
    let (a, b, w) = (client("ann"), client("bob"), client("wat"));
    sit(&e, &a, 1, t1, None);
    sit(&e, &b, 1, t2, None);
    e.command(&w, 1, herald_proto::Command::Watch { table: t1 });
    settle().await;
    drain(&a);
    drain(&b);
    drain(&w);
    act(&e, &a, 2, t1, "\"panic\"");
    settle().await;
    let got = drain(&a);
    assert_eq!(error_code(&got[0]), Some(100));
    assert!(got
        .iter()
        .any(|m| matches!(m, ServerMsg::Push(Push::Unseat { code: 100, .. }))));
    assert!(drain(&w)
        .iter()
        .any(|m| matches!(m, ServerMsg::Push(Push::Unseat { code: 100, .. }))));
    assert!(e.table(t1).await.is_err());
    assert_eq!(e.table_count(), 1);
    act(&e, &b, 2, t2, "\"inc\"");
    settle().await;
    assert_eq!(
        drain(&b)[0],
        ServerMsg::Reply {
            id: 2,
            reply: Reply::Act
        }
    );
    assert_eq!(e.metrics().players.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_game_can_unseat_and_close_tells_everyone() {
    let e = engine(60);
    let t = e.create_table(&spec(3)).unwrap();
    let (a, b) = (client("ann"), client("bob"));
    sit(&e, &a, 1, t, None);
    sit(&e, &b, 1, t, None);
    settle().await;
    drain(&a);
    drain(&b);
    act(&e, &a, 2, t, "\"unseat\"");
    settle().await;
    let got = drain(&a);
    assert!(got.iter().any(|m| matches!(m, ServerMsg::Push(Push::Unseat { code: 117, reason, .. }) if reason == "you asked for it")), "{got:?}");
    let info = e.close_table(t).await.unwrap();
    assert_eq!(info.seats.len(), 1);
    settle().await;
    assert!(drain(&b)
        .iter()
        .any(|m| matches!(m, ServerMsg::Push(Push::Unseat { code: 115, .. }))));
    assert_eq!(e.table_count(), 0);
    assert_eq!(e.metrics().players.get(), 0);
    assert!(e.tables().is_empty());
}

/// Applies a lobby message to a client-side copy, checking seq order.
fn apply(copy: &mut BTreeMap<u64, TableEntry>, seq: &mut u64, m: &ServerMsg) {
    match m {
        ServerMsg::Reply {
            reply: Reply::Lobby { seq: s, tables },
            ..
        } => {
            copy.clear();
            for t in tables {
                copy.insert(t.table, t.clone());
            }
            *seq = *s;
        }
        ServerMsg::Push(Push::LobbyUpdate {
            seq: s,
            tables,
            removed,
            ..
        }) => {
            assert!(*s > *seq, "deltas arrive in seq order");
            *seq = *s;
            for t in tables {
                copy.insert(t.table, t.clone());
            }
            for r in removed {
                copy.remove(r);
            }
        }
        _ => {}
    }
}

#[tokio::test(start_paused = true)]
async fn lobby_snapshot_plus_deltas_equals_a_fresh_snapshot_under_churn() {
    let e = engine(1);
    let mut tables: Vec<u64> = (0..6)
        .map(|i| {
            let mut s = spec(if i % 2 == 0 { 2 } else { 6 });
            if i % 3 == 0 {
                s.path = Some(format!("other/{i}"));
            }
            e.create_table(&s).unwrap()
        })
        .collect();
    let watcher = client("lobby");
    let branch_watcher = client("branch");
    e.command(
        &watcher,
        1,
        herald_proto::Command::Lobby {
            path: String::new(),
        },
    );
    e.command(
        &branch_watcher,
        1,
        herald_proto::Command::Lobby {
            path: "count".into(),
        },
    );
    let (mut copy, mut seq) = (BTreeMap::new(), 0);
    let (mut bcopy, mut bseq) = (BTreeMap::new(), 0);
    let mut rng = fastrand::Rng::with_seed(7);
    let players: Vec<_> = (0..20).map(|i| client(&format!("u{i}"))).collect();
    let mut deltas = 0;
    for step in 0..400 {
        let p = &players[rng.usize(..players.len())];
        let t = tables[rng.usize(..tables.len())];
        match rng.u8(..10) {
            0..=3 => sit(&e, p, 1, t, None),
            4..=5 => e.command(p, 1, herald_proto::Command::Stand { table: t }),
            6 => e.command(p, 1, herald_proto::Command::Watch { table: t }),
            7 => act(&e, p, 1, t, "\"inc\""),
            8 => e.gone(p),
            _ if step % 50 == 0 => {
                let gone = tables.remove(rng.usize(..tables.len()));
                e.close_table(gone).await.unwrap();
                tables.push(e.create_table(&spec(2)).unwrap());
            }
            _ => {}
        }
        settle().await;
        if rng.bool() {
            tokio::time::advance(Duration::from_millis(rng.u64(1..300))).await;
            settle().await;
        }
        for m in drain(&watcher) {
            deltas += usize::from(matches!(m, ServerMsg::Push(Push::LobbyUpdate { .. })));
            apply(&mut copy, &mut seq, &m);
        }
        for m in drain(&branch_watcher) {
            apply(&mut bcopy, &mut bseq, &m);
        }
        for p in &players {
            drain(p);
        }
    }
    // Past every grace period, one flush interval at a time.
    for _ in 0..8 {
        tokio::time::advance(Duration::from_millis(300)).await;
        settle().await;
    }
    for m in drain(&watcher) {
        apply(&mut copy, &mut seq, &m);
    }
    for m in drain(&branch_watcher) {
        apply(&mut bcopy, &mut bseq, &m);
    }
    assert!(deltas > 20, "the churn produced deltas ({deltas})");
    // A fresh snapshot, whole and for the branch.
    let fresh = client("fresh");
    e.command(
        &fresh,
        1,
        herald_proto::Command::Lobby {
            path: String::new(),
        },
    );
    e.command(
        &fresh,
        2,
        herald_proto::Command::Lobby {
            path: "count".into(),
        },
    );
    let got = drain(&fresh);
    let (mut want, mut wseq) = (BTreeMap::new(), 0);
    apply(&mut want, &mut wseq, &got[0]);
    assert_eq!(copy, want);
    assert_eq!(seq, wseq);
    let (mut bwant, mut bwseq) = (BTreeMap::new(), 0);
    apply(&mut bwant, &mut bwseq, &got[1]);
    assert_eq!(bcopy, bwant);
    assert!(bwant.values().all(|t| t.path.starts_with("count/")));
    assert!(want.len() > bwant.len());
}

#[tokio::test(start_paused = true)]
async fn lobby_deltas_are_coalesced_per_interval() {
    let e = engine(60);
    let t = e.create_table(&spec(10)).unwrap();
    let w = client("lobby");
    e.command(
        &w,
        1,
        herald_proto::Command::Lobby {
            path: String::new(),
        },
    );
    tokio::time::advance(Duration::from_millis(300)).await;
    settle().await;
    drain(&w);
    // Ten players sit and act many times within one interval...
    for i in 0..10 {
        let p = client(&format!("p{i}"));
        sit(&e, &p, 1, t, None);
        for _ in 0..5 {
            act(&e, &p, 0, t, "\"inc\"");
        }
    }
    settle().await;
    tokio::time::advance(Duration::from_millis(250)).await;
    settle().await;
    // ... and the lobby subscriber hears one delta with the final entry.
    let got = drain(&w);
    assert_eq!(got.len(), 1, "{got:?}");
    let ServerMsg::Push(Push::LobbyUpdate { tables, .. }) = &got[0] else {
        panic!("{got:?}")
    };
    assert_eq!(tables[0].players, 10);
    assert_eq!(
        &tables[0].attrs[..],
        &b"{\"game\":\"count\",\"n\":50,\"timing\":\"normal\"}"[..]
    );
}
