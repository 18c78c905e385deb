//! Hold'em's durable state (decision 0009): a table restored from its save
//! at any moment, mid-hand included, plays on exactly as the original would
//! have (same deck, same messages, same chips), and a save that is not a
//! table's (corrupt, from another table, inconsistent) is refused with a
//! reason instead of panicking or inventing chips.

use herald_game::testing::Harness;
use herald_game::TableParams;
use herald_holdem::{factory, Config, Holdem};
use serde_json::{json, Map, Value};
use std::time::Instant;

fn params(seats: u32, seed: u64) -> TableParams {
    let mut params = Map::new();
    params.insert("seed".into(), json!(seed));
    params.insert("big_blind".into(), json!(10));
    params.insert("small_blind".into(), json!(1 + seed % 5));
    TableParams {
        id: 1,
        seats,
        timing: "super-express".into(),
        params,
    }
}

fn state(h: &Harness) -> Value {
    serde_json::from_slice(&h.game().snapshot(None)).expect("state")
}

/// Stacks plus the pot: the chips on the table.
fn on_table(s: &Value) -> u64 {
    s["seats"]
        .as_array()
        .expect("seats")
        .iter()
        .map(|p| p["stack"].as_u64().expect("stack"))
        .sum::<u64>()
        + s["pot"].as_u64().expect("pot")
}

/// One random step (the same on both harnesses for the same roll).
fn step(h: &mut Harness, rng: &mut fastrand::Rng, seats: u32, users: &mut u32) {
    let s = state(h);
    let turn = s["turn"].as_u64().map(|t| t as u32);
    match (rng.u32(0..100), turn) {
        (0..=64, Some(seat)) => {
            let to = rng.u64(0..3000);
            let a = match rng.u32(0..8) {
                0 => json!({"a": "fold"}),
                1 | 2 => json!({"a": "check"}),
                3 | 4 => json!({"a": "call"}),
                5 => json!({"a": "raise", "to": to}),
                6 => json!({"a": "allin"}),
                _ => json!({"a": "raise", "to": s["min_raise_to"].as_u64().unwrap_or(to)}),
            };
            let _ = h.act(seat, a.to_string().as_bytes());
        }
        (65..=84, _) => {
            h.fire_next();
        }
        (85..=90, _) => {
            let free: Vec<u32> = (0..seats).filter(|x| !h.seats().contains_key(x)).collect();
            if !free.is_empty() {
                let seat = free[rng.usize(..free.len())];
                *users += 1;
                let buyin = json!({"buyin": rng.u64(200..=2000)}).to_string();
                let _ = h.sit(seat, &format!("u{users}"), buyin.as_bytes());
            }
        }
        (91..=92, _) => {
            if let Some(&seat) = h.seats().keys().nth(rng.usize(..10)) {
                h.leave(seat);
            }
        }
        (93..=96, _) => {
            if let Some(&seat) = h.seats().keys().nth(rng.usize(..10)) {
                if rng.bool() {
                    h.drop_seat(seat);
                } else {
                    h.return_seat(seat);
                }
            }
        }
        _ => {
            if let Some(&seat) = h.seats().keys().nth(rng.usize(..10)) {
                let a = match rng.u32(0..3) {
                    0 => json!({"a": "sitout"}),
                    1 => json!({"a": "sitin"}),
                    _ => json!({"a": "rebuy", "amount": rng.u64(1..500)}),
                };
                let _ = h.act(seat, a.to_string().as_bytes());
            }
        }
    }
}

/// Two copies of each table get the same random inputs; one of them is
/// replaced, before every step, by a table restored from its own save (as a
/// node taking it over would). Every message either sends must be the same
/// (cards dealt in later hands included: the deck's generator is saved), and
/// the chips on the table do not change across a restore.
#[test]
fn a_table_restored_at_every_step_plays_on_exactly_like_the_original() {
    let f = factory();
    let (mut restores, mut mid_hand, mut hands) = (0u64, 0u64, 0u64);
    for table in 0..6u64 {
        let seats = [2, 6, 10][table as usize % 3];
        let p = params(seats, table);
        let mut original = Harness::new(f.create(&p).expect("table"));
        let mut restored = Harness::new(f.create(&p).expect("table"));
        let (mut rng_a, mut rng_b) = (
            fastrand::Rng::with_seed(table),
            fastrand::Rng::with_seed(table),
        );
        let (mut users_a, mut users_b) = (0, 0);
        for n in 0..1_200 {
            let before = state(&restored);
            let saved = restored.game().save().expect("holdem saves");
            restored.replace_game(f.restore(&p, &saved).expect("restore"));
            restores += 1;
            if before["street"] != "idle" {
                mid_hand += 1;
            }
            let after = state(&restored);
            assert_eq!(
                before, after,
                "table {table} step {n}: restore changed the table"
            );
            assert_eq!(on_table(&before), on_table(&after));
            assert_eq!(
                restored.game().save().expect("save"),
                saved,
                "table {table} step {n}: save(restore(x)) != x"
            );
            step(&mut original, &mut rng_a, seats, &mut users_a);
            step(&mut restored, &mut rng_b, seats, &mut users_b);
            assert_eq!(
                original.sent.len(),
                restored.sent.len(),
                "table {table} step {n}"
            );
            if let Some(i) =
                (0..original.sent.len()).find(|&i| original.sent[i] != restored.sent[i])
            {
                panic!(
                    "table {table} step {n}: message {i} differs:\n{:?}\n{:?}",
                    original.sent[i], restored.sent[i]
                );
            }
            assert_eq!(original.pending_timers(), restored.pending_timers());
        }
        assert_eq!(original.hands, restored.hands);
        hands += original.hands;
    }
    assert!(hands >= 80, "only {hands} hands were played");
    assert!(
        mid_hand * 2 >= restores,
        "only {mid_hand} of {restores} restores were mid-hand"
    );
}

/// A 10-seat table mid-hand, each seat dealt in.
fn ten_seats_mid_hand() -> (TableParams, Harness) {
    let p = params(10, 7);
    let mut h = Harness::new(factory().create(&p).expect("table"));
    for seat in 0..10 {
        h.sit(seat, &format!("player-{seat}"), b"").expect("sit");
    }
    while state(&h)["street"] == "idle" {
        assert!(h.fire_next(), "the hand never started");
    }
    let s = state(&h);
    let turn = s["turn"].as_u64().expect("turn") as u32;
    h.act(turn, br#"{"a":"call"}"#).expect("call");
    (p, h)
}

/// Prints what a save costs (size, encode and decode time) for the figure in
/// bench/RESULTS.md; the numbers are not asserted (the machine is shared).
#[test]
fn snapshot_size() {
    let (p, h) = ten_seats_mid_hand();
    let saved = h.game().save().expect("save");
    let rounds = 2_000u32;
    let t = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(h.game().save());
    }
    let encode = t.elapsed() / rounds;
    let t = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(Holdem::restore(
            Config::from_params(&p).expect("config"),
            &saved,
        ))
        .expect("restore");
    }
    let decode = t.elapsed() / rounds;
    println!(
        "holdem save, 10 seats mid-hand: {} bytes, encode {encode:?}, restore {decode:?}",
        saved.len()
    );
    assert!(saved.len() > 500, "the save holds the hand");
}

/// Saves that are not this table's are refused with a reason, never a
/// panic: garbage, another version, another seat count, a card twice, a
/// turn at an empty seat, amounts that could overflow a sum.
#[test]
fn a_corrupt_or_foreign_save_is_refused() {
    let (p, h) = ten_seats_mid_hand();
    let saved: Value = serde_json::from_slice(&h.game().save().expect("save")).expect("JSON");
    let f = factory();
    let refuse = |state: &[u8], why: &str| match f.restore(&p, state) {
        Ok(_) => panic!("{why}: restored"),
        Err(e) => e,
    };
    refuse(b"", "empty");
    refuse(b"\xff\x00", "binary");
    refuse(b"{}", "empty object");
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut v = saved.clone();
        f(&mut v);
        serde_json::to_vec(&v).expect("JSON")
    };
    let e = refuse(&edit(&|v| v["v"] = json!(2)), "version");
    assert!(e.contains("version"), "{e}");
    let e = refuse(&edit(&|v| v["seats"] = json!(6)), "seats");
    assert!(e.contains("seats"), "{e}");
    let e = refuse(
        &edit(&|v| v["hand"]["deck"][0] = v["hand"]["deck"][1].clone()),
        "a card twice",
    );
    assert!(e.contains("twice"), "{e}");
    let e = refuse(
        &edit(&|v| v["hand"]["turn"] = json!(42)),
        "turn out of range",
    );
    assert!(e.contains("turn"), "{e}");
    let e = refuse(
        &edit(&|v| v["hand"]["button"] = json!(10)),
        "button out of range",
    );
    assert!(e.contains("fit"), "{e}");
    let e = refuse(
        &edit(&|v| v["players"][3]["stack"] = json!(u64::MAX)),
        "a huge stack",
    );
    assert!(e.contains("range"), "{e}");
    let e = refuse(
        &edit(&|v| v["hand"]["seats"][2]["committed"] = json!(u64::MAX)),
        "a huge pot",
    );
    assert!(e.contains("seat 2"), "{e}");
    let e = refuse(
        &edit(&|v| v["players"][8] = Value::Null),
        "a dealt seat emptied",
    );
    assert!(e.contains("seat 8"), "{e}");
    refuse(
        &edit(&|v| v["hand"]["seats"][0]["cards"] = json!(["Zz", "Ah"])),
        "a bad card",
    );
    refuse(&edit(&|v| v["extra"] = json!(1)), "an unknown field");
    // The original itself restores.
    assert!(f
        .restore(&p, &serde_json::to_vec(&saved).expect("JSON"))
        .is_ok());
}
