//! Game tables over a real server: a whole Hold'em hand on every
//! bidirectional transport (WebSocket JSON, WebSocket binary, raw TCP), the
//! seat race, reconnecting to a seat on another transport, watching over SSE
//! and long-polling, `/api/tables`, the lobby, and bad input.
mod common;

use bytes::{Bytes, BytesMut};
use common::*;
use futures_util::{SinkExt, StreamExt};
use herald_proto::{Command, Encoding, Push, Reply, Request, SeatStatus, ServerMsg};
use herald_server::config::TableConfig;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

const SECRET: &str = "game-secret-game-secret-game-secret!";

fn token(user: &str) -> String {
    user_token(SECRET, user)
}

fn holdem(seats: u32, count: u32) -> TableConfig {
    let mut params = serde_json::Map::new();
    params.insert("seed".into(), json!(42));
    TableConfig {
        game: "holdem".into(),
        count,
        seats,
        timing: "super-express".into(),
        path: None,
        params,
    }
}

fn args(tables: Vec<TableConfig>) -> ServeArgs {
    ServeArgs {
        token_hmac_secret: Some(SECRET.into()),
        allow_anonymous: Some(true),
        tables,
        ..ServeArgs::default()
    }
}

#[derive(Clone, Copy, Debug)]
enum Via {
    WsJson,
    WsBinary,
    Tcp,
}

/// A player on any bidirectional transport, speaking typed messages.
enum Player {
    Ws(Box<Ws>, Encoding),
    Tcp(TcpStream),
}

impl Player {
    async fn connect(srv: &TestServer, via: Via, user: Option<&str>) -> Player {
        let mut p = match via {
            Via::WsJson => Player::Ws(
                Box::new(connect(srv.addr, "/ws", Some("herald.json")).await),
                Encoding::Json,
            ),
            Via::WsBinary => Player::Ws(
                Box::new(connect(srv.addr, "/ws", Some("herald.binary")).await),
                Encoding::Binary,
            ),
            Via::Tcp => Player::Tcp(
                TcpStream::connect(srv.tcp_addr.expect("tcp listener"))
                    .await
                    .expect("tcp connect"),
            ),
        };
        p.send(
            1,
            Command::Connect {
                token: user.map(token),
                name: None,
            },
        )
        .await;
        let r = p.recv().await;
        assert!(
            matches!(
                r,
                ServerMsg::Reply {
                    id: 1,
                    reply: Reply::Connect { .. }
                }
            ),
            "{r:?}"
        );
        p
    }

    async fn send(&mut self, id: u32, cmd: Command) {
        let req = Request { id, cmd };
        match self {
            Player::Ws(ws, enc) => {
                let mut b = BytesMut::new();
                enc.encode_request(&req, &mut b);
                let m = match enc {
                    Encoding::Json => Message::text(String::from_utf8(b.to_vec()).expect("utf-8")),
                    Encoding::Binary => Message::binary(b.freeze()),
                };
                ws.send(m).await.expect("send");
            }
            Player::Tcp(s) => {
                let mut b = BytesMut::new();
                Encoding::Binary.encode_request(&req, &mut b);
                s.write_all(&(b.len() as u32).to_be_bytes())
                    .await
                    .expect("write");
                s.write_all(&b).await.expect("write");
            }
        }
    }

    async fn recv(&mut self) -> ServerMsg {
        match self {
            Player::Ws(ws, enc) => {
                let m = next_msg(ws).await;
                enc.decode_server(&m.into_data()).expect("decode")
            }
            Player::Tcp(s) => loop {
                let mut len = [0u8; 4];
                tokio::time::timeout(WAIT, s.read_exact(&mut len))
                    .await
                    .expect("timeout")
                    .expect("read");
                let n = u32::from_be_bytes(len) as usize;
                if n == 0 {
                    continue;
                }
                let mut body = vec![0u8; n];
                s.read_exact(&mut body).await.expect("body");
                return Encoding::Binary.decode_server(&body).expect("decode");
            },
        }
    }

    /// Messages until one matches `f`, which is returned.
    async fn until(&mut self, mut f: impl FnMut(&ServerMsg) -> bool) -> ServerMsg {
        loop {
            let m = self.recv().await;
            if f(&m) {
                return m;
            }
        }
    }

    async fn sit(&mut self, id: u32, table: u64, seat: Option<u32>) -> ServerMsg {
        self.send(
            id,
            Command::Sit {
                table,
                seat,
                data: Bytes::new(),
            },
        )
        .await;
        self.until(|m| is_answer(m, id)).await
    }
}

/// Ann (WebSocket JSON) and Bob (on `bob_via`) sit at `table`, in that
/// order, at any free seat.
async fn ann_and_bob_sit(srv: &TestServer, table: u64, bob_via: Via) -> (Player, Player) {
    let mut ann = Player::connect(srv, Via::WsJson, Some("ann")).await;
    let mut bob = Player::connect(srv, bob_via, Some("bob")).await;
    ann.sit(2, table, None).await;
    bob.sit(2, table, None).await;
    (ann, bob)
}

fn is_answer(m: &ServerMsg, want: u32) -> bool {
    match m {
        ServerMsg::Reply { id, .. } | ServerMsg::Error { id, .. } => *id == want,
        _ => false,
    }
}

fn game_json(m: &ServerMsg) -> Option<Value> {
    match m {
        ServerMsg::Push(Push::Game { data, .. }) => serde_json::from_slice(data).ok(),
        _ => None,
    }
}

fn error_code(m: &ServerMsg) -> Option<u16> {
    match m {
        ServerMsg::Error { code, .. } => Some(*code),
        _ => None,
    }
}

/// One HTTP/1.1 request: status and body.
async fn api(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let (status, _, body) = http(addr, method, path, headers, body.unwrap_or("")).await;
    (status, body)
}

async fn first_table(addr: SocketAddr) -> u64 {
    let (status, body) = api(addr, "GET", "/api/tables", None, &[]).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    v["tables"][0]["table"].as_u64().expect("a table")
}

/// Plays on until the hand's result, answering every turn with a call (or
/// a check). Returns the result event.
///
/// Players are read in turn; a `turn` event is public, so whichever player
/// reads it first makes the seat named in it act (sending needs no
/// reading). Turns are counted per reader so each is answered once: a
/// reader that joined later sees fewer and never leads.
async fn play_hand(players: &mut [(&mut Player, u32)]) -> Value {
    tokio::time::timeout(Duration::from_secs(30), answer_turns(players))
        .await
        .expect("the hand ends within 30 s")
}

async fn answer_turns(players: &mut [(&mut Player, u32)]) -> Value {
    let mut next_id = 100;
    let mut seen = vec![0usize; players.len()];
    let mut answered = 0usize;
    loop {
        for i in 0..players.len() {
            let m = players[i].0.recv().await;
            let Some(ev) = game_json(&m) else { continue };
            match ev["t"].as_str() {
                Some("result") => return ev,
                Some("turn") => {
                    seen[i] += 1;
                    if seen[i] <= answered {
                        continue;
                    }
                    answered = seen[i];
                    let Some(actor) = players
                        .iter()
                        .position(|(_, s)| ev["seat"].as_u64() == Some(u64::from(*s)))
                    else {
                        continue;
                    };
                    let action = if ev["to_call"].as_u64() == Some(0) {
                        json!({"a": "check"})
                    } else {
                        json!({"a": "call"})
                    };
                    next_id += 1;
                    let ServerMsg::Push(Push::Game { table, .. }) = &m else {
                        unreachable!()
                    };
                    players[actor]
                        .0
                        .send(
                            next_id,
                            Command::Act {
                                table: *table,
                                data: Bytes::from(action.to_string()),
                            },
                        )
                        .await;
                }
                _ => {}
            }
        }
    }
}

async fn a_whole_hand_over(via: Via) {
    let srv = start_with_tcp(args(vec![holdem(2, 1)])).await;
    let table = first_table(srv.addr).await;
    let mut ann = Player::connect(&srv, via, Some("ann")).await;
    let mut bob = Player::connect(&srv, Via::WsJson, Some("bob")).await;
    let r = ann.sit(2, table, Some(0)).await;
    let ServerMsg::Reply {
        reply: Reply::Sit { seat: 0, data },
        ..
    } = &r
    else {
        panic!("{r:?}")
    };
    let state: Value = serde_json::from_slice(data).expect("snapshot is JSON");
    assert_eq!(state["t"], "state", "{state}");
    let r = bob.sit(2, table, None).await;
    assert!(
        matches!(
            r,
            ServerMsg::Reply {
                reply: Reply::Sit { seat: 1, .. },
                ..
            }
        ),
        "{r:?}"
    );
    let result = play_hand(&mut [(&mut ann, 0), (&mut bob, 1)]).await;
    let pots = result["pots"].as_array().expect("pots");
    assert!(!pots.is_empty(), "{result}");
    // Chips are conserved: two buy-ins of 100 big blinds (10) each.
    let total: u64 = result["stacks"]
        .as_array()
        .expect("stacks")
        .iter()
        .map(|s| s["stack"].as_u64().expect("stack"))
        .sum();
    assert_eq!(total, 2000, "{result}");
    srv.shutdown.cancel();
}

#[tokio::test]
async fn a_whole_hand_over_websocket_json() {
    a_whole_hand_over(Via::WsJson).await;
}

#[tokio::test]
async fn a_whole_hand_over_websocket_binary() {
    a_whole_hand_over(Via::WsBinary).await;
}

#[tokio::test]
async fn a_whole_hand_over_raw_tcp() {
    a_whole_hand_over(Via::Tcp).await;
}

#[tokio::test]
async fn two_players_racing_for_one_seat_one_wins() {
    let srv = start_with_tcp(args(vec![holdem(6, 1)])).await;
    let table = first_table(srv.addr).await;
    let mut players = Vec::new();
    for (i, via) in [Via::WsJson, Via::WsBinary, Via::Tcp, Via::WsJson]
        .into_iter()
        .enumerate()
    {
        players.push(Player::connect(&srv, via, Some(&format!("racer{i}"))).await);
    }
    for p in players.iter_mut() {
        p.send(
            5,
            Command::Sit {
                table,
                seat: Some(3),
                data: Bytes::new(),
            },
        )
        .await;
    }
    let mut won = 0;
    let mut refused = 0;
    for p in players.iter_mut() {
        match p.until(|m| is_answer(m, 5)).await {
            ServerMsg::Reply {
                reply: Reply::Sit { seat: 3, .. },
                ..
            } => won += 1,
            m => {
                assert_eq!(error_code(&m), Some(116), "{m:?}");
                refused += 1;
            }
        }
    }
    assert_eq!((won, refused), (1, 3));
    srv.shutdown.cancel();
}

#[tokio::test]
async fn a_dropped_player_returns_to_the_seat_on_another_transport() {
    let srv = start_with_tcp(args(vec![holdem(2, 1)])).await;
    let table = first_table(srv.addr).await;
    let mut ann = Player::connect(&srv, Via::WsJson, Some("ann")).await;
    let mut bob = Player::connect(&srv, Via::WsBinary, Some("bob")).await;
    ann.sit(2, table, Some(0)).await;
    bob.sit(2, table, Some(1)).await;
    drop(ann);
    let away = bob
        .until(|m| {
            matches!(
                m,
                ServerMsg::Push(Push::Seat {
                    seat: 0,
                    status: SeatStatus::Away,
                    ..
                })
            )
        })
        .await;
    assert!(matches!(away, ServerMsg::Push(Push::Seat { ref user, .. }) if user == "ann"));
    // Ann is back, on raw TCP.
    let mut ann = Player::connect(&srv, Via::Tcp, Some("ann")).await;
    let r = ann.sit(3, table, None).await;
    let ServerMsg::Reply {
        reply: Reply::Sit { seat: 0, data },
        ..
    } = &r
    else {
        panic!("{r:?}")
    };
    let state: Value = serde_json::from_slice(data).expect("snapshot");
    assert_eq!(state["t"], "state");
    bob.until(|m| {
        matches!(
            m,
            ServerMsg::Push(Push::Seat {
                seat: 0,
                status: SeatStatus::Back,
                ..
            })
        )
    })
    .await;
    // And the game goes on with her.
    play_hand(&mut [(&mut ann, 0), (&mut bob, 1)]).await;
    srv.shutdown.cancel();
}

#[tokio::test]
async fn watchers_over_sse_and_long_polling_see_the_game() {
    let srv = start(args(vec![holdem(2, 1)])).await;
    let table = first_table(srv.addr).await;
    let mut events = sse(srv.addr, &format!("table={table}&lobby="), None).await;
    // The watch reply and the lobby snapshot come first, as `herald` events.
    let mut seen = Vec::new();
    for _ in 0..2 {
        let e = events.next().await;
        assert_eq!(field(&e, "event"), Some("herald"), "{e:?}");
        seen.push(serde_json::from_str::<Value>(field(&e, "data").expect("data")).expect("json"));
    }
    assert!(
        seen.iter().any(|v| v["watch"]["data"]["t"] == "state"),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|v| v["lobby"]["tables"][0]["table"] == table),
        "{seen:?}"
    );

    // A long-poll session watches too.
    let (status, body) = api(srv.addr, "POST", "/poll", None, &[]).await;
    assert_eq!(status, 200, "{body}");
    let session = serde_json::from_str::<Value>(&body).expect("json")["session"]
        .as_str()
        .expect("session")
        .to_string();
    let cmds = json!([{"id":1,"connect":{}},{"id":2,"watch":{"table":table}}]).to_string();
    let (status, _) = api(
        srv.addr,
        "POST",
        &format!("/poll/{session}"),
        Some(&cmds),
        &[],
    )
    .await;
    assert_eq!(status, 202);

    let (mut ann, mut bob) = ann_and_bob_sit(&srv, table, Via::WsJson).await;
    play_hand(&mut [(&mut ann, 0), (&mut bob, 1)]).await;
    // The SSE watcher saw the hand: seat pushes, then game events up to the result.
    let mut saw_result = false;
    while !saw_result {
        let e = events.next().await;
        let v: Value = serde_json::from_str(field(&e, "data").unwrap_or("{}")).unwrap_or_default();
        if let Some(data) = v["game"]["data"].as_object() {
            assert!(
                data.get("cards").is_none() || data["t"] != "cards",
                "watchers never see hole cards"
            );
            saw_result |= data["t"] == "result";
        }
    }
    // So did the long-poll watcher.
    let mut polled = Vec::new();
    while !polled
        .iter()
        .any(|v: &Value| v["game"]["data"]["t"] == "result")
    {
        let (status, body) = api(srv.addr, "GET", &format!("/poll/{session}"), None, &[]).await;
        assert_eq!(status, 200);
        polled.extend(serde_json::from_str::<Vec<Value>>(&body).expect("array"));
    }
    assert!(polled.iter().any(|v| v["watch"]["data"]["t"] == "state"));
    srv.shutdown.cancel();
}

/// The README's `GET /sse?table=7&lobby=holdem`: a stream watching a table
/// together with the lobby or a channel answers at once, as one watching
/// only the table does. (It used to send nothing, not even its head, until
/// the handshake timeout: its start-up wait was not woken by the second
/// answer.) The server's handshake timeout is 120 s; 30 s without a head
/// is that hang, not a slow machine.
#[tokio::test]
async fn a_stream_watching_a_table_and_more_answers_at_once() {
    let srv = start(ServeArgs {
        handshake_timeout: Some(120),
        ..args(vec![holdem(2, 2)])
    })
    .await;
    let table = first_table(srv.addr).await;
    for query in [
        format!("table={table}&lobby="),
        format!("table={table}&channel=chat"),
        format!("channel=chat&table={table}"),
        format!("table={table}&table={}", table + 1),
        format!("table={table}&lobby=&channel=chat"),
    ] {
        let mut events = tokio::time::timeout(Duration::from_secs(30), sse(srv.addr, &query, None))
            .await
            .unwrap_or_else(|_| panic!("/sse?{query}: no response head in 30 s"));
        let e = events.next().await;
        assert_eq!(field(&e, "event"), Some("herald"), "/sse?{query}: {e:?}");
    }
    srv.shutdown.cancel();
}

#[tokio::test]
async fn tables_over_the_http_api() {
    let srv = start(ServeArgs {
        api_key: Some("k".into()),
        ..args(Vec::new())
    })
    .await;
    let auth = [("authorization", "apikey k")];
    let (status, _) = api(srv.addr, "GET", "/api/tables", None, &[]).await;
    assert_eq!(status, 401, "the API key is required");
    let body = json!({"game":"holdem","seats":6,"timing":"express","count":3,"big_blind":20,"small_blind":10}).to_string();
    let (status, created) = api(srv.addr, "POST", "/api/tables", Some(&body), &auth).await;
    assert_eq!(status, 201, "{created}");
    let ids: Vec<u64> = serde_json::from_str::<Value>(&created).expect("json")["tables"]
        .as_array()
        .expect("ids")
        .iter()
        .map(|v| v.as_u64().expect("id"))
        .collect();
    assert_eq!(ids.len(), 3);
    let (_, list) = api(srv.addr, "GET", "/api/tables", None, &auth).await;
    let list: Value = serde_json::from_str(&list).expect("json");
    let entry = &list["tables"][0];
    assert_eq!(entry["path"], "holdem/6-seat/express", "{list}");
    assert_eq!(entry["seats"], 6);
    assert_eq!(entry["attrs"]["game"], "holdem");
    assert_eq!(entry["attrs"]["timing"], "express");

    let (status, one) = api(
        srv.addr,
        "GET",
        &format!("/api/tables/{}", ids[1]),
        None,
        &auth,
    )
    .await;
    assert_eq!(status, 200, "{one}");
    let one: Value = serde_json::from_str(&one).expect("json");
    assert_eq!(one["table"]["table"], ids[1]);
    assert_eq!(one["state"]["t"], "state");

    // A player at a table that is deleted is told.
    let mut ann = Player::connect(&srv, Via::WsJson, None).await;
    ann.sit(2, ids[1], None).await;
    let (status, _) = api(
        srv.addr,
        "DELETE",
        &format!("/api/tables/{}", ids[1]),
        None,
        &auth,
    )
    .await;
    assert_eq!(status, 200);
    let m = ann
        .until(|m| matches!(m, ServerMsg::Push(Push::Unseat { .. })))
        .await;
    assert!(
        matches!(m, ServerMsg::Push(Push::Unseat { code: 115, .. })),
        "{m:?}"
    );
    let (status, _) = api(
        srv.addr,
        "GET",
        &format!("/api/tables/{}", ids[1]),
        None,
        &auth,
    )
    .await;
    assert_eq!(status, 404);

    for bad in [
        json!({"game":"chess","seats":2}),
        json!({"game":"holdem","seats":2,"timing":"glacial"}),
        json!({"game":"holdem","seats":11}),
        json!({"game":"holdem"}),
        json!({"game":"holdem","seats":2,"count":0}),
    ] {
        let (status, body) = api(
            srv.addr,
            "POST",
            "/api/tables",
            Some(&bad.to_string()),
            &auth,
        )
        .await;
        assert_eq!(status, 400, "{bad} → {body}");
    }
    srv.shutdown.cancel();
}

#[tokio::test]
async fn bad_game_input_gets_its_code_and_the_table_goes_on() {
    let srv = start_with_tcp(args(vec![holdem(2, 1)])).await;
    let table = first_table(srv.addr).await;
    let mut ann = Player::connect(&srv, Via::WsJson, Some("ann")).await;
    let mut bob = Player::connect(&srv, Via::Tcp, Some("bob")).await;
    let mut eve = Player::connect(&srv, Via::WsBinary, Some("eve")).await;
    ann.sit(2, table, Some(0)).await;
    // Unknown table, acting without a seat, a taken seat, a seat out of range.
    eve.sit(3, 999_999, None).await;
    let checks: [(u32, Command, u16); 4] = [
        (
            4,
            Command::Sit {
                table: 999_999,
                seat: None,
                data: Bytes::new(),
            },
            115,
        ),
        (
            5,
            Command::Act {
                table,
                data: Bytes::from_static(b"{\"a\":\"call\"}"),
            },
            117,
        ),
        (
            6,
            Command::Sit {
                table,
                seat: Some(0),
                data: Bytes::new(),
            },
            116,
        ),
        (
            7,
            Command::Sit {
                table,
                seat: Some(9),
                data: Bytes::new(),
            },
            116,
        ),
    ];
    for (id, cmd, code) in checks {
        eve.send(id, cmd).await;
        let m = eve.until(|m| is_answer(m, id)).await;
        assert_eq!(error_code(&m), Some(code), "{m:?}");
    }
    bob.sit(2, table, Some(1)).await;
    // Garbage and out-of-turn actions from a seated player: 118 each.
    for (id, data) in [
        (8, &b"not json"[..]),
        (9, b"{\"a\":\"raise\",\"to\":1}"),
        (10, b"{\"a\":\"fly\"}"),
    ] {
        ann.send(
            id,
            Command::Act {
                table,
                data: Bytes::copy_from_slice(data),
            },
        )
        .await;
        let m = ann.until(|m| is_answer(m, id)).await;
        assert!(matches!(error_code(&m), Some(118)), "{m:?}");
    }
    // A game command before connect, and on a server whose games are fine:
    // the hand is still played to the end.
    play_hand(&mut [(&mut ann, 0), (&mut bob, 1)]).await;
    let mut fresh = connect(srv.addr, "/ws", Some("herald.json")).await;
    send_json(&mut fresh, json!({"id":1,"sit":{"table":table}})).await;
    assert_eq!(recv_json(&mut fresh).await["error"]["code"], 101);
    fresh.close(None).await.ok();
    let _ = fresh.next().await;
    srv.shutdown.cancel();
}

fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .parse()
        .expect("number")
}

#[tokio::test]
async fn game_metrics_count_tables_players_hands_and_pass_promtool() {
    let srv = start(args(vec![holdem(2, 3)])).await;
    let table = first_table(srv.addr).await;
    let (mut ann, mut bob) = ann_and_bob_sit(&srv, table, Via::WsBinary).await;
    play_hand(&mut [(&mut ann, 0), (&mut bob, 1)]).await;
    let (status, _, text) = http(srv.addr, "GET", "/metrics", &[], "").await;
    assert_eq!(status, 200);
    assert_eq!(metric(&text, "herald_game_tables"), 3.0, "{text}");
    assert_eq!(metric(&text, "herald_game_players"), 2.0, "{text}");
    assert!(metric(&text, "herald_game_hands_total") >= 1.0, "{text}");
    // A heads-up hand takes at least two actions (call, check) unless
    // someone folds, and play_hand never folds.
    let actions = metric(&text, "herald_game_actions_total");
    assert!(actions >= 2.0, "{text}");
    assert!(metric(&text, "herald_game_events_total") >= 10.0, "{text}");
    assert_eq!(
        metric(&text, "herald_game_action_duration_seconds_count"),
        actions,
        "{text}"
    );
    promtool_check(&text);
    srv.shutdown.cancel();
}

#[tokio::test]
async fn table_chat_is_a_channel_players_and_watchers_share_with_history() {
    let srv = start(args(vec![holdem(6, 1)])).await;
    let table = first_table(srv.addr).await;
    let chat = format!("table:{table}");
    let mut ann = Player::connect(&srv, Via::WsJson, Some("ann")).await;
    ann.sit(2, table, None).await;
    ann.send(
        3,
        Command::Subscribe {
            channel: chat.clone(),
            recover: None,
            join_leave: false,
            token: None,
        },
    )
    .await;
    ann.until(|m| is_answer(m, 3)).await;
    // A watcher over SSE reads the table's chat.
    let mut events = sse(srv.addr, &format!("table={table}&channel={chat}"), None).await;
    let mut ws = connect(srv.addr, "/ws", Some("herald.json")).await;
    send_json(&mut ws, json!({"id":1,"connect":{}})).await;
    recv_json(&mut ws).await;
    send_json(
        &mut ws,
        json!({"id":2,"publish":{"channel":chat,"data":{"text":"gl hf"}}}),
    )
    .await;
    let got = ann
        .until(|m| matches!(m, ServerMsg::Push(Push::Publication { .. })))
        .await;
    let ServerMsg::Push(Push::Publication { channel, data, .. }) = got else {
        unreachable!()
    };
    assert_eq!(channel, chat);
    assert_eq!(&data[..], br#"{"text":"gl hf"}"#);
    let mut seen = false;
    while !seen {
        let e = events.next().await;
        seen = field(&e, "data").is_some_and(|d| d.contains("gl hf"));
    }
    // The chat keeps history like any channel: a late joiner reads it.
    send_json(&mut ws, json!({"id":3,"history":{"channel":chat}})).await;
    let mut reply = recv_json(&mut ws).await;
    while reply["id"] != 3 {
        reply = recv_json(&mut ws).await;
    }
    assert!(reply.to_string().contains("gl hf"), "{reply}");
    srv.shutdown.cancel();
}
