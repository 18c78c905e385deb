//! Tables on demand (`play`, protocol §5f) on one real server: the
//! join-or-create race (200 players, exactly ⌈200/6⌉ tables, nobody seated
//! twice), private tables by code, the caps, tables that close when empty
//! and leave the lobby, a reconnect taking its seat back, and bad input.
mod common;

use common::*;
use futures_util::future::join_all;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const SECRET: &str = "play-secret-play-secret-play-secret!!";
const KEY: &str = "play-api-key";

fn args() -> ServeArgs {
    ServeArgs {
        token_hmac_secret: Some(SECRET.into()),
        api_key: Some(KEY.into()),
        ..ServeArgs::default()
    }
}

/// A connected player (JSON over WebSocket) with its own user id.
async fn player(srv: &TestServer, user: &str) -> Ws {
    let (ws, r) = connect_with_token(srv.addr, Some(&user_token(SECRET, user))).await;
    assert!(r["connect"].is_object(), "{r}");
    ws
}

/// Sends command `id` and returns its answer (reply or error), skipping
/// pushes.
async fn ask(ws: &mut Ws, id: u32, cmd: Value) -> Value {
    let mut msg = cmd;
    msg["id"] = json!(id);
    send_json(ws, msg).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "no answer to {id}");
        let m = recv_json(ws).await;
        if m["id"] == id {
            return m;
        }
    }
}

fn error_code(m: &Value) -> u64 {
    m["error"]["code"]
        .as_u64()
        .unwrap_or_else(|| panic!("not an error: {m}"))
}

fn join_or_create() -> Value {
    json!({"play": {"game": "holdem", "seats": 6, "attrs": {"timing": "super-express"}}})
}

async fn tables(srv: &TestServer) -> Vec<Value> {
    let auth = format!("apikey {KEY}");
    let (status, _, body) = http(
        srv.addr,
        "GET",
        "/api/tables",
        &[("authorization", &auth)],
        "",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    v["tables"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_players_at_once_fill_exactly_34_tables() {
    let srv = start(ServeArgs {
        // Every player may create: only the server's count decides.
        ..args()
    })
    .await;
    let mut players = Vec::new();
    for i in 0..200 {
        players.push(player(&srv, &format!("racer{i}")).await);
    }
    // Everyone asks at once.
    let replies = join_all(players.iter_mut().map(|ws| ask(ws, 7, join_or_create()))).await;
    let mut seats: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    let mut created = 0;
    for r in &replies {
        let p = &r["play"];
        assert!(p.is_object(), "{r}");
        assert!(p["code"].is_null(), "a public table has no code: {r}");
        let (table, seat) = (p["table"].as_u64().unwrap(), p["seat"].as_u64().unwrap());
        assert!(seat < 6, "{r}");
        assert!(
            seats.entry(table).or_default().insert(seat),
            "seat {seat} of table {table} given twice"
        );
        if p["created"] == true {
            created += 1;
        }
    }
    assert_eq!(seats.len(), 34, "⌈200/6⌉ tables: {seats:?}");
    assert_eq!(created, 34, "one creator per table");
    let full = seats.values().filter(|s| s.len() == 6).count();
    assert_eq!(full, 33, "all full but one: {seats:?}");
    // The lobby agrees (entries are updated within the lobby interval).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed = tables(&srv).await;
        let players: u64 = listed.iter().map(|t| t["players"].as_u64().unwrap()).sum();
        if listed.len() == 34 && players == 200 {
            assert!(
                listed.iter().all(|t| t["attrs"]["play"] == true),
                "{listed:?}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "lobby: {listed:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A 201st player opens a new table only when asking again does not fit:
    // one seat is free at the last table, so it goes there.
    let mut late = player(&srv, "late").await;
    let r = ask(&mut late, 8, join_or_create()).await;
    assert_eq!(r["play"]["created"], Value::Null, "{r}");
    let last = *seats.iter().find(|(_, s)| s.len() < 6).unwrap().0;
    assert_eq!(r["play"]["table"], last, "{r}");
    // Other attributes never match these tables: a new one.
    let mut picky = player(&srv, "picky").await;
    let other = json!({"play": {"game": "holdem", "seats": 6, "attrs": {"timing": "express"}}});
    let r = ask(&mut picky, 9, other).await;
    assert_eq!(r["play"]["created"], true, "{r}");
    assert!(
        !seats.contains_key(&r["play"]["table"].as_u64().unwrap()),
        "{r}"
    );
}

#[tokio::test]
async fn private_tables_admit_only_their_code() {
    let srv = start(args()).await;
    let mut host = player(&srv, "host").await;
    let private = json!({"play": {"game": "holdem", "seats": 2, "private": true}});
    let r = ask(&mut host, 2, private).await;
    let p = &r["play"];
    assert_eq!(p["created"], true, "{r}");
    let code = p["code"].as_str().expect("a code").to_string();
    let table = p["table"].as_u64().unwrap();
    assert_eq!(code.len(), 6);

    // A stranger playing publicly is never seated there.
    let mut stranger = player(&srv, "stranger").await;
    let r = ask(
        &mut stranger,
        3,
        json!({"play": {"game": "holdem", "seats": 2}}),
    )
    .await;
    assert_ne!(r["play"]["table"], table, "{r}");
    // Nor with `sit`, nor watching.
    let mut other = player(&srv, "other").await;
    let r = ask(&mut other, 4, json!({"sit": {"table": table}})).await;
    assert_eq!(error_code(&r), 116, "{r}");
    let r = ask(&mut other, 5, json!({"watch": {"table": table}})).await;
    assert_eq!(error_code(&r), 104, "{r}");
    // A wrong code, and one that is not even in the alphabet.
    let r = ask(&mut other, 6, json!({"play": {"code": "ZZZZZZ"}})).await;
    assert_eq!(error_code(&r), 121, "{r}");
    let r = ask(&mut other, 7, json!({"play": {"code": "0O1I"}})).await;
    assert_eq!(error_code(&r), 121, "{r}");
    // The code admits a friend.
    let mut friend = player(&srv, "friend").await;
    let r = ask(&mut friend, 8, json!({"play": {"code": code}})).await;
    assert_eq!(r["play"]["table"], table, "{r}");
    assert_eq!(r["play"]["code"], code.as_str(), "{r}");
    assert_eq!(r["play"]["created"], Value::Null, "{r}");
    // Two seats: a third holder of the code finds it full.
    let r = ask(&mut other, 9, json!({"play": {"code": code}})).await;
    assert_eq!(error_code(&r), 116, "{r}");
    // The lobby shows it as private.
    let listed = tables(&srv).await;
    let entry = listed.iter().find(|t| t["table"] == table).expect("listed");
    assert_eq!(entry["attrs"]["private"], true, "{entry}");
    assert_eq!(entry["players"], 2, "{entry}");
}

#[tokio::test]
async fn caps_per_server_and_per_user() {
    let srv = start(ServeArgs {
        play_max_tables: Some(3),
        play_max_tables_per_user: Some(1),
        ..args()
    })
    .await;
    let private = || json!({"play": {"game": "holdem", "seats": 2, "private": true}});
    let mut u1 = player(&srv, "u1").await;
    assert!(ask(&mut u1, 2, private()).await["play"].is_object());
    let r = ask(&mut u1, 3, private()).await;
    assert_eq!(error_code(&r), 107, "per-user cap: {r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("you created"),
        "{r}"
    );
    let mut u2 = player(&srv, "u2").await;
    let mut u3 = player(&srv, "u3").await;
    assert!(ask(&mut u2, 2, private()).await["play"].is_object());
    assert!(ask(&mut u3, 2, private()).await["play"].is_object());
    let mut u4 = player(&srv, "u4").await;
    let r = ask(&mut u4, 2, private()).await;
    assert_eq!(error_code(&r), 107, "server cap: {r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("this server"),
        "{r}"
    );
    let r = ask(&mut u4, 3, json!({"play": {"game": "holdem", "seats": 4}})).await;
    assert_eq!(
        error_code(&r),
        107,
        "creating a public table is capped too: {r}"
    );
    // Nothing else changed: three tables, u4's connection still works.
    assert_eq!(tables(&srv).await.len(), 3);
    assert!(ask(&mut u4, 4, json!({"ping": {}})).await["ping"].is_object());
}

#[tokio::test]
async fn an_empty_table_closes_after_its_time_and_leaves_the_lobby() {
    let srv = start(ServeArgs {
        play_empty_close: Some(1),
        play_max_tables_per_user: Some(1),
        ..args()
    })
    .await;
    let mut watcher = player(&srv, "watcher").await;
    let r = ask(&mut watcher, 2, json!({"lobby": {}})).await;
    assert!(r["lobby"].is_object(), "{r}");

    let mut u = player(&srv, "u").await;
    let private = json!({"play": {"game": "holdem", "seats": 2, "private": true}});
    let r = ask(&mut u, 2, private.clone()).await;
    let table = r["play"]["table"].as_u64().unwrap();
    let code = r["play"]["code"].as_str().unwrap().to_string();
    // Seated, it stays open well past the empty time.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(tables(&srv).await.iter().any(|t| t["table"] == table));
    // Stand: one second later it is gone, from the lobby too.
    let r = ask(&mut u, 3, json!({"stand": {"table": table}})).await;
    assert!(r["stand"].is_object(), "{r}");
    let stood = Instant::now();
    let deadline = stood + Duration::from_secs(10);
    loop {
        let m = recv_json(&mut watcher).await;
        if let Some(removed) = m["lobby_update"]["removed"].as_array() {
            if removed.contains(&json!(table)) {
                break;
            }
        }
        assert!(Instant::now() < deadline, "no removal of {table}");
    }
    assert!(
        stood.elapsed() >= Duration::from_millis(900),
        "closed too early"
    );
    assert!(!tables(&srv).await.iter().any(|t| t["table"] == table));
    // Its code is gone with it, and its creator may create again (the
    // per-user cap counts open tables).
    let r = ask(&mut u, 4, json!({"play": {"code": code}})).await;
    assert_eq!(error_code(&r), 121, "{r}");
    let r = ask(&mut u, 5, private).await;
    assert!(r["play"].is_object(), "{r}");
}

#[tokio::test]
async fn a_reconnected_player_takes_its_seat_back_with_sit() {
    let srv = start(args()).await;
    let mut first = player(&srv, "back").await;
    let r = ask(
        &mut first,
        2,
        json!({"play": {"game": "holdem", "seats": 3}}),
    )
    .await;
    let (table, seat) = (r["play"]["table"].clone(), r["play"]["seat"].clone());
    drop(first);
    let mut again = player(&srv, "back").await;
    let r = ask(&mut again, 2, json!({"sit": {"table": table}})).await;
    assert_eq!(r["sit"]["seat"], seat, "{r}");
    // `play` again with the same key gives the same seat back too, and
    // counts no second seat.
    let r = ask(
        &mut again,
        3,
        json!({"play": {"game": "holdem", "seats": 3}}),
    )
    .await;
    assert_eq!(r["play"]["table"], table, "{r}");
    assert_eq!(r["play"]["seat"], seat, "{r}");
    let mut other = player(&srv, "other").await;
    let r = ask(
        &mut other,
        2,
        json!({"play": {"game": "holdem", "seats": 3}}),
    )
    .await;
    assert_eq!(r["play"]["table"], table, "two of three seats free: {r}");
}

#[tokio::test]
async fn bad_play_commands_get_clear_errors_and_change_nothing() {
    let srv = start(args()).await;
    let mut ws = player(&srv, "bad").await;
    let cases = [
        (json!({"play": {"game": "chess", "seats": 2}}), 120),
        (json!({"play": {"seats": 2}}), 103),
        (json!({"play": {"game": "holdem"}}), 103),
        (json!({"play": {"game": "holdem", "seats": 0}}), 103),
        (json!({"play": {"game": "holdem", "seats": 65}}), 103),
        (
            json!({"play": {"game": "holdem", "seats": 2, "attrs": {"x": [1]}}}),
            103,
        ),
        (
            json!({"play": {"game": "holdem", "seats": 2, "attrs": {"timing": 5}}}),
            103,
        ),
        (
            json!({"play": {"game": "holdem", "seats": 2, "attrs": [1]}}),
            103,
        ),
        (
            json!({"play": {"game": "holdem", "seats": 2, "attrs": {"stakes": "1/2"}}}),
            103,
        ),
        (json!({"play": {"game": "holdem", "code": "ABCDEF"}}), 103),
        (json!({"play": {"code": "ABCDEF", "private": true}}), 103),
        (json!({"play": {"code": 5}}), 103),
        (
            json!({"play": {"game": "holdem", "seats": 2, "private": "yes"}}),
            103,
        ),
    ];
    for (i, (cmd, code)) in cases.iter().enumerate() {
        let r = ask(&mut ws, 10 + i as u32, cmd.clone()).await;
        assert_eq!(error_code(&r), *code, "{cmd} -> {r}");
    }
    assert!(tables(&srv).await.is_empty(), "no table made by bad input");
    assert!(ask(&mut ws, 99, json!({"ping": {}})).await["ping"].is_object());

    // `play` switched off.
    let off = start(ServeArgs {
        play: Some(false),
        ..args()
    })
    .await;
    let mut ws = player(&off, "x").await;
    let r = ask(&mut ws, 2, json!({"play": {"game": "holdem", "seats": 2}})).await;
    assert_eq!(error_code(&r), 111, "{r}");
}
