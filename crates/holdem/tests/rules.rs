//! Hold'em's rules on the fake-clock harness: the evaluator against a table
//! of known rankings, scripted hands (blinds, raising rules, side pots,
//! split pots, timeouts, leavers, busting), refused actions, and chip
//! conservation over thousands of random hands.

use herald_game::testing::{Harness, To};
use herald_game::{ActionError, TableParams};
use herald_holdem::cards::{parse_cards, Card};
use herald_holdem::eval::best;
use herald_holdem::{Config, Holdem};
use serde_json::{json, Map, Value};
use std::time::Duration;

fn params(seats: u32, extra: Value) -> TableParams {
    let mut params: Map<String, Value> = extra.as_object().cloned().unwrap_or_default();
    params.entry("seed").or_insert(json!(1));
    TableParams {
        id: 1,
        seats,
        timing: "super-express".into(),
        params,
    }
}

fn holdem(seats: u32, extra: Value) -> Holdem {
    Holdem::new(Config::from_params(&params(seats, extra)).expect("config"))
}

/// A table whose next hands are dealt from `decks` (dealing order, see
/// `Holdem::stack_decks`), players sat with `stacks` at seats 0.., and the
/// first hand started.
fn scripted(seats: u32, stacks: &[u64], decks: &[&str]) -> Harness {
    let mut g = holdem(seats, json!({"min_buyin": 1, "max_buyin": 100_000}));
    g.stack_decks(
        decks
            .iter()
            .map(|d| with_rest(&parse_cards(d).expect("deck")))
            .collect(),
    );
    let mut h = Harness::new(Box::new(g));
    for (seat, stack) in stacks.iter().enumerate() {
        h.sit(
            seat as u32,
            &format!("p{seat}"),
            json!({"buyin": stack}).to_string().as_bytes(),
        )
        .expect("sit");
    }
    h.advance(Duration::from_secs(1));
    h
}

/// `first` followed by every other card, so a scripted deck never runs out.
fn with_rest(first: &[Card]) -> Vec<Card> {
    let mut deck = first.to_vec();
    deck.extend(Card::deck().into_iter().filter(|c| !first.contains(c)));
    deck
}

fn events(h: &Harness) -> Vec<Value> {
    h.sent
        .iter()
        .filter(|(to, _)| *to == To::Table)
        .map(|(_, b)| serde_json::from_slice(b).expect("JSON"))
        .collect()
}

fn last(h: &Harness, t: &str) -> Value {
    events(h)
        .into_iter()
        .rev()
        .find(|e| e["t"] == t)
        .unwrap_or_else(|| panic!("no {t} event"))
}

fn state(h: &Harness) -> Value {
    serde_json::from_slice(&h.game().snapshot(None)).expect("state")
}

fn act(h: &mut Harness, seat: u32, a: Value) -> Result<(), ActionError> {
    h.act(seat, a.to_string().as_bytes())
}

fn ok(h: &mut Harness, seat: u32, a: Value) {
    act(h, seat, a.clone()).unwrap_or_else(|e| panic!("seat {seat} {a}: {e}"));
}

fn turn(h: &Harness) -> Option<u32> {
    state(h)["turn"].as_u64().map(|t| t as u32)
}

fn stacks(result: &Value) -> Vec<u64> {
    result["stacks"]
        .as_array()
        .expect("stacks")
        .iter()
        .map(|s| s["stack"].as_u64().expect("stack"))
        .collect()
}

/// Fires timers (street deals, the next hand) until `pred` holds.
fn run_until(h: &mut Harness, pred: impl Fn(&Harness) -> bool) {
    for _ in 0..100 {
        if pred(h) {
            return;
        }
        assert!(h.fire_next(), "no timer left and the condition never held");
    }
    panic!(
        "condition never held; timers {:?}, now {:?}",
        h.pending_timers(),
        h.now()
    );
}

#[test]
fn the_evaluator_orders_a_table_of_known_hands() {
    // Weakest to strongest; hands on one line tie.
    let table: &[&[&str]] = &[
        &["2c 3d 4h 5s 7c 8d 9h"], // nine high: 9 8 7 5 4
        &["2c 3d 4h 6s 7c 8d Th"],
        &["Ac Kd Qh Js 8c 4d 2h"],
        &["Ac Kd Qh Js 9c 3d 2h", "Ad Kh Qs Jc 9h 3s 2c"], // the fifth card decides
        &["2c 2d 4h 5s 7c 9d Jh"],
        &["2c 2d 4h 5s 7c 9d Qh"],
        &["Ac Ad 3h 4s 6c 8d 9h"],
        &["Ac Ad Kh 4s 6c 8d 9h"],
        &["3c 3d 2h 2s Ac Kd 9h"],
        &["4c 4d 2h 2s 5c 6d 8h"],
        &["4c 4d 3h 3s 5c 6d 8h"],
        &["Ac Ad Kh Ks 2c 3d 4h", "Ah As Kc Kd 2d 3h 4c"],
        &["Ac Ad Kh Ks Qc 3d 4h"],
        &["7c 7d 7h 2s 3c 9d Jh"],
        &["7c 7d 7h As 3c 9d Jh"],
        &["Ah 2c 3d 4s 5h 9c Jd"], // the wheel
        &["2c 3d 4s 5h 6h Jc Qd"],
        &["Tc Jd Qh Ks Ac 2d 3h", "Td Jh Qs Kc Ad 4s 5c"],
        &["2h 4h 6h 8h Th Kc Kd"],
        &["2h 4h 6h 8h Jh Kc Kd"],
        &["2h 4h 6h 9h Jh 3c 3d"],
        &["Ah 3h 4h 5h 7h Ac Ad"],
        &["2c 2d 2h 3s 3c 9d Jh"],
        &["2c 2d 2h As Ac 9d Jh"],
        &["3c 3d 3h 2s 2c 9d Jh"],
        &["3c 3d 3h 3s 2c 9d Jh"],
        &["3c 3d 3h 3s Ac 9d Jh"],
        &["4c 4d 4h 4s 2c 3d 5h"],
        &["Ah 2h 3h 4h 5h Kc Kd"],
        &["2h 3h 4h 5h 6h Ac Ad"],
        &["9s Ts Js Qs Ks 2c 2d"],
        &["Ts Js Qs Ks As 2c 2d", "Th Jh Qh Kh Ah 3c 3d"],
    ];
    let rank = |s: &str| best(&parse_cards(s).expect("cards")).0;
    let mut prev = None;
    for (i, group) in table.iter().enumerate() {
        let r = rank(group[0]);
        for h in &group[1..] {
            assert_eq!(rank(h), r, "{h} should tie {}", group[0]);
        }
        if let Some((p, ph)) = prev {
            assert!(r > p, "row {i}: {} should beat {ph}", group[0]);
        }
        prev = Some((r, group[0]));
    }
    let names: Vec<&str> = [
        "2c 3d 4h 6s 7c 8d Th",
        "2c 2d 4h 5s 7c 9d Jh",
        "3c 3d 2h 2s Ac Kd 9h",
        "7c 7d 7h 2s 3c 9d Jh",
        "Ah 2c 3d 4s 5h 9c Jd",
        "2h 4h 6h 8h Th Kc Kd",
        "2c 2d 2h 3s 3c 9d Jh",
        "4c 4d 4h 4s 2c 3d 5h",
        "Ah 2h 3h 4h 5h Kc Kd",
    ]
    .iter()
    .map(|h| rank(h).name())
    .collect();
    assert_eq!(
        names,
        [
            "high card",
            "pair",
            "two pair",
            "three of a kind",
            "straight",
            "flush",
            "full house",
            "four of a kind",
            "straight flush"
        ]
    );
}

#[test]
fn heads_up_the_button_posts_the_small_blind_and_acts_first_only_before_the_flop() {
    let mut h = scripted(2, &[1000, 1000], &["Ac Ad Kc Kd 2s 3h 7c 9d 4s Jh 5s 8h"]);
    assert_eq!(
        events(&h)[..2],
        [
            json!({"t": "sat", "seat": 0, "user": "p0", "stack": 1000}),
            json!({"t": "sat", "seat": 1, "user": "p1", "stack": 1000}),
        ]
    );
    let hand = last(&h, "hand");
    assert_eq!(
        (&hand["button"], &hand["sb_seat"], &hand["bb_seat"]),
        (&json!(0), &json!(0), &json!(1))
    );
    assert_eq!(turn(&h), Some(0), "the button acts first before the flop");
    let t = last(&h, "turn");
    assert_eq!(
        (&t["to_call"], &t["min_raise_to"], &t["max_raise_to"]),
        (&json!(5), &json!(20), &json!(1000))
    );
    // Hole cards go to their seat only.
    let cards: Vec<Value> = h
        .sent_to(To::Seat(0))
        .iter()
        .map(|b| serde_json::from_slice(b).expect("json"))
        .collect();
    assert_eq!(cards[0]["cards"], json!(["Ac", "Ad"]));
    ok(&mut h, 0, json!({"a": "call"}));
    assert_eq!(turn(&h), Some(1), "the big blind has the option");
    ok(&mut h, 1, json!({"a": "check"}));
    run_until(&mut h, |h| turn(h).is_some());
    assert_eq!(
        state(&h)["board"],
        json!(["3h", "7c", "9d"]),
        "burn, then the flop"
    );
    assert_eq!(turn(&h), Some(1), "the big blind acts first after the flop");
    for _ in 0..3 {
        ok(&mut h, 1, json!({"a": "check"}));
        ok(&mut h, 0, json!({"a": "check"}));
        run_until(&mut h, |h| turn(h).is_some() || h.hands == 1);
    }
    let result = last(&h, "result");
    assert_eq!(result["board"], json!(["3h", "7c", "9d", "Jh", "8h"]));
    assert_eq!(
        result["pots"],
        json!([{"amount": 20, "winners": [0], "rank": "pair"}])
    );
    assert_eq!(stacks(&result), [1010, 990]);
    // The next hand: the button moves.
    run_until(&mut h, |h| last(h, "hand")["hand"] == 2);
    assert_eq!(last(&h, "hand")["button"], 1);
}

#[test]
fn three_handed_blinds_sit_left_of_the_button_and_the_button_moves() {
    let mut h = scripted(6, &[500, 500, 500], &[]);
    let hand = last(&h, "hand");
    assert_eq!(
        (&hand["button"], &hand["sb_seat"], &hand["bb_seat"]),
        (&json!(0), &json!(1), &json!(2))
    );
    assert_eq!(turn(&h), Some(0), "under the gun is left of the big blind");
    ok(&mut h, 0, json!({"a": "fold"}));
    ok(&mut h, 1, json!({"a": "fold"}));
    let result = last(&h, "result");
    assert_eq!(
        result["shown"],
        json!([]),
        "no showdown when everyone folds"
    );
    assert_eq!(
        result["returned"],
        json!({"seat": 2, "amount": 5}),
        "the uncalled part of the big blind"
    );
    assert_eq!(stacks(&result), [500, 495, 505]);
    run_until(&mut h, |h| last(h, "hand")["hand"] == 2);
    let hand = last(&h, "hand");
    assert_eq!(
        (&hand["button"], &hand["sb_seat"], &hand["bb_seat"]),
        (&json!(1), &json!(2), &json!(0))
    );
}

#[test]
fn no_limit_raising_rules_and_a_short_all_in_does_not_reopen_the_betting() {
    // Seats: 0 button (1000), 1 small blind (1000), 2 big blind (1000), 3 short (65).
    let mut h = scripted(4, &[1000, 1000, 1000, 65], &[]);
    assert_eq!(turn(&h), Some(3));
    ok(&mut h, 3, json!({"a": "call"}));
    assert_eq!(turn(&h), Some(0));
    // A raise to less than the big blind above the bet is refused...
    let e = act(&mut h, 0, json!({"a": "raise", "to": 15})).expect_err("too small");
    assert!(matches!(e, ActionError::Illegal(_)), "{e}");
    // ...a raise to 40 (by 30) sets the minimum raise to 30.
    ok(&mut h, 0, json!({"a": "raise", "to": 40}));
    let t = last(&h, "turn");
    assert_eq!(
        (&t["seat"], &t["to_call"], &t["min_raise_to"]),
        (&json!(1), &json!(35), &json!(70))
    );
    ok(&mut h, 1, json!({"a": "fold"}));
    ok(&mut h, 2, json!({"a": "call"}));
    // The short stack goes all-in for 65: 25 more, under a full raise of 30.
    assert_eq!(turn(&h), Some(3));
    ok(&mut h, 3, json!({"a": "allin"}));
    assert_eq!(last(&h, "action")["a"], "allin");
    // Seat 0 raised last and already acted: call or fold only.
    let t = last(&h, "turn");
    assert_eq!(t["seat"], 0);
    assert_eq!(t["to_call"], 25);
    assert!(t.get("min_raise_to").is_none(), "{t}");
    let e = act(&mut h, 0, json!({"a": "raise", "to": 200})).expect_err("not reopened");
    assert!(matches!(e, ActionError::Illegal(_)), "{e}");
    ok(&mut h, 0, json!({"a": "call"}));
    ok(&mut h, 2, json!({"a": "call"}));
    assert_eq!(state(&h)["pot"], 5 + 65 * 3);
}

#[test]
fn side_pots_go_to_the_best_hand_each_can_win() {
    // Seat 0 (100 chips) has aces, seat 1 (300) kings, seat 2 (500) queens.
    let deck = "Ac Ad Kc Kd Qc Qd 2s 3h 7c 9d 4s Jh 5s 8h";
    let mut h = scripted(3, &[100, 300, 500], &[deck]);
    ok(&mut h, 0, json!({"a": "allin"}));
    ok(&mut h, 1, json!({"a": "allin"}));
    ok(&mut h, 2, json!({"a": "allin"}));
    run_until(&mut h, |h| h.hands == 1);
    let result = last(&h, "result");
    assert_eq!(
        result["pots"],
        json!([
            {"amount": 300, "winners": [0], "rank": "pair"},
            {"amount": 400, "winners": [1], "rank": "pair"},
        ])
    );
    // Seat 2's all-in is a call of 300: nobody can call more.
    assert_eq!(result["returned"], Value::Null);
    assert_eq!(stacks(&result), [300, 400, 200]);
    assert_eq!(result["shown"].as_array().map(Vec::len), Some(3));
}

#[test]
fn a_busted_player_has_the_rebuy_delay_then_is_stood_up() {
    for rebuys in [false, true] {
        let deck = "Kc Kd Ac Ad 2s 3h 7c 9d 4s Jh 5s 8h";
        let mut h = scripted(2, &[100, 1000], &[deck]);
        ok(&mut h, 0, json!({"a": "allin"}));
        ok(&mut h, 1, json!({"a": "call"}));
        run_until(&mut h, |h| h.hands == 1);
        assert_eq!(stacks(&last(&h, "result")), [0, 1100]);
        let busted_at = h.now();
        if rebuys {
            ok(&mut h, 0, json!({"a": "rebuy", "amount": 500}));
            run_until(&mut h, |h| h.hands == 2);
            assert!(h.unseated.is_empty(), "a rebuy keeps the seat");
        } else {
            run_until(&mut h, |h| !h.unseated.is_empty());
            assert_eq!(h.unseated, [(0, "busted".to_string())]);
            assert_eq!(h.now() - busted_at, Duration::from_millis(7500));
            assert_eq!(state(&h)["seats"].as_array().map(Vec::len), Some(1));
        }
    }
}

#[test]
fn a_split_pot_gives_the_odd_chip_left_of_the_button() {
    // Button 0, small blind 1, big blind 2; the board is a royal flush.
    let deck = "2c 3d 4c 5d 6c 7d 2s Ts Js Qs 2h Ks 3h As";
    let mut h = scripted(3, &[1000, 1000, 1000], &[deck]);
    ok(&mut h, 0, json!({"a": "call"}));
    ok(&mut h, 1, json!({"a": "fold"}));
    ok(&mut h, 2, json!({"a": "check"}));
    for _ in 0..3 {
        run_until(&mut h, |h| turn(h).is_some());
        ok(&mut h, 2, json!({"a": "check"}));
        ok(&mut h, 0, json!({"a": "check"}));
    }
    let result = last(&h, "result");
    assert_eq!(
        result["pots"],
        json!([{"amount": 25, "winners": [0, 2], "rank": "straight flush"}])
    );
    // Seat 2 is first left of the button among the winners: 13 to it, 12 to seat 0.
    assert_eq!(stacks(&result), [1002, 995, 1003]);
}

#[test]
fn the_timer_checks_or_folds_and_acts_sooner_for_a_dropped_player() {
    let mut h = scripted(2, &[1000, 1000], &[]);
    // Seat 0 owes 5: the timer folds it 4 s (super-express) after its turn.
    let left = h
        .pending_timers()
        .into_iter()
        .find(|(k, _)| *k == 1)
        .map(|(_, d)| d)
        .expect("action timer");
    assert!(left > Duration::from_millis(3000) && left <= Duration::from_secs(4));
    h.advance(left - Duration::from_millis(1));
    assert_eq!(turn(&h), Some(0));
    h.advance(Duration::from_millis(1));
    let a = last(&h, "action");
    assert_eq!(
        (&a["seat"], &a["a"], &a["auto"]),
        (&json!(0), &json!("fold"), &json!(true))
    );
    assert_eq!(h.hands, 1);
    // Next hand: seat 1 is the button and acts first; it calls, seat 0
    // drops, and its option is checked for it after a quarter of the time.
    run_until(&mut h, |h| turn(h) == Some(1));
    ok(&mut h, 1, json!({"a": "call"}));
    assert_eq!(turn(&h), Some(0));
    h.drop_seat(0);
    h.advance(Duration::from_millis(1000));
    let a = last(&h, "action");
    assert_eq!(
        (&a["seat"], &a["a"], &a["auto"]),
        (&json!(0), &json!("check"), &json!(true))
    );
    // Back: full time again.
    h.return_seat(0);
    run_until(&mut h, |h| turn(h).is_some());
    assert_eq!(last(&h, "turn")["timeout_ms"], 4000);
}

#[test]
fn a_player_leaving_mid_hand_folds_and_takes_the_stack() {
    let mut h = scripted(3, &[1000, 1000, 1000], &[]);
    ok(&mut h, 0, json!({"a": "raise", "to": 30}));
    // The big blind leaves while the small blind is to act.
    h.leave(2);
    let a = last(&h, "action");
    assert_eq!((&a["seat"], &a["a"]), (&json!(2), &json!("fold")));
    assert_eq!(turn(&h), Some(1));
    ok(&mut h, 1, json!({"a": "fold"}));
    let result = last(&h, "result");
    assert_eq!(
        stacks(&result),
        [1015, 995],
        "the leaver's 10 stays in the pot"
    );
    // Two left: the game goes on heads-up.
    run_until(&mut h, |h| last(h, "hand")["hand"] == 2);
}

#[test]
fn refused_actions_change_nothing() {
    let mut h = scripted(2, &[1000, 1000], &[]);
    let before = state(&h);
    let n = h.sent.len();
    for (seat, data, kind) in [
        (1, json!({"a": "call"}), "out"),
        (0, json!({"a": "check"}), "illegal"),
        (0, json!({"a": "raise", "to": 5000}), "illegal"),
        (0, json!({"a": "raise"}), "malformed"),
        (0, json!({"a": "fly"}), "malformed"),
        (0, json!({"a": "call", "extra": 1}), "malformed"),
        (0, json!({"a": "rebuy", "amount": 10}), "illegal"),
    ] {
        let e = act(&mut h, seat, data.clone()).expect_err("refused");
        let got = match e {
            ActionError::OutOfTurn(_) => "out",
            ActionError::Illegal(_) => "illegal",
            ActionError::Malformed(_) => "malformed",
        };
        assert_eq!(got, kind, "{data}: {e}");
    }
    let e = h.act(0, b"\xff not json").expect_err("garbage");
    assert!(matches!(e, ActionError::Malformed(_)));
    assert_eq!(state(&h), before);
    assert_eq!(h.sent.len(), n, "nothing was sent");
}

#[test]
fn sitting_out_skips_hands_and_rebuys_top_up_between_hands() {
    let mut h = scripted(3, &[1000, 1000, 1000], &[]);
    ok(&mut h, 1, json!({"a": "sitout"}));
    ok(&mut h, 0, json!({"a": "fold"}));
    ok(&mut h, 1, json!({"a": "fold"}));
    let e = act(&mut h, 1, json!({"a": "rebuy", "amount": 500_000})).expect_err("over max");
    assert!(matches!(e, ActionError::Illegal(_)));
    ok(&mut h, 1, json!({"a": "rebuy", "amount": 100}));
    assert_eq!(last(&h, "rebuy")["stack"], 1095);
    run_until(&mut h, |h| last(h, "hand")["hand"] == 2);
    let dealt: Vec<u64> = last(&h, "hand")["seats"]
        .as_array()
        .expect("seats")
        .iter()
        .map(|s| s["seat"].as_u64().expect("seat"))
        .collect();
    assert_eq!(dealt, [0, 2], "seat 1 sits out");
}

#[test]
fn the_snapshot_shows_a_seat_its_own_cards_only() {
    let h = scripted(2, &[1000, 1000], &["Ac Ad Kc Kd"]);
    let own: Value = serde_json::from_slice(&h.game().snapshot(Some(1))).expect("json");
    assert_eq!(own["cards"], json!(["Kc", "Kd"]));
    assert_eq!(own["street"], "preflop");
    assert_eq!(own["pot"], 15);
    assert!(state(&h).get("cards").is_none());
}

#[test]
fn bad_table_parameters_are_refused() {
    for (seats, timing, extra) in [
        (1, "normal", json!({})),
        (11, "normal", json!({})),
        (6, "glacial", json!({})),
        (6, "normal", json!({"big_blind": 0})),
        (6, "normal", json!({"small_blind": 20, "big_blind": 10})),
        (6, "normal", json!({"buyin": 5})),
        (6, "normal", json!({"big_blind": "ten"})),
        (6, "normal", json!({"bigblind": 10})),
        (6, "normal", json!({"action_ms": 0})),
        (6, "normal", json!({"rebuy_ms": 3_600_001})),
    ] {
        let mut p = params(seats, extra.clone());
        p.timing = timing.into();
        assert!(Config::from_params(&p).is_err(), "{seats} {timing} {extra}");
    }
    let c = Config::from_params(&params(10, json!({"big_blind": 20}))).expect("ok");
    assert_eq!((c.small_blind, c.big_blind, c.buyin), (10, 20, 2000));
}

/// Over thousands of random hands with random actions (legal and not),
/// timeouts, drops, returns, leavers, newcomers, sit-outs and rebuys: the
/// chips on the table change only by what came in and went out, and every
/// hand that starts ends.
#[test]
fn chips_are_conserved_and_every_hand_ends() {
    let mut rng = fastrand::Rng::with_seed(2026);
    let mut total_hands = 0;
    for table in 0..40 {
        let seats = [2, 6, 10][table % 3];
        let g = holdem(
            seats,
            json!({"seed": table, "small_blind": 1 + table as u64 % 5, "big_blind": 10}),
        );
        let mut h = Harness::new(Box::new(g));
        let (mut chips_in, mut chips_out) = (0u64, 0u64);
        let mut users = 0;
        let mut steps = 0;
        while h.hands < 100 && steps < 20_000 {
            steps += 1;
            let s = state(&h);
            let on_table: u64 = s["seats"]
                .as_array()
                .expect("seats")
                .iter()
                .map(|p| p["stack"].as_u64().expect("stack"))
                .sum::<u64>()
                + s["pot"].as_u64().expect("pot");
            if on_table != chips_in - chips_out {
                let ev = events(&h);
                let tail: Vec<String> = ev
                    .iter()
                    .rev()
                    .take(25)
                    .rev()
                    .map(|e| e.to_string())
                    .collect();
                panic!(
                    "table {table} step {steps}: {on_table} != {} in, {} out\n{s}\n{}",
                    chips_in,
                    chips_out,
                    tail.join("\n")
                );
            }
            let roll = rng.u32(0..100);
            let turn = s["turn"].as_u64().map(|t| t as u32);
            match (roll, turn) {
                (0..=69, Some(seat)) => {
                    let to = rng.u64(0..3000);
                    let a = match rng.u32(0..8) {
                        0 => json!({"a": "fold"}),
                        1 | 2 => json!({"a": "check"}),
                        3 | 4 => json!({"a": "call"}),
                        5 => json!({"a": "raise", "to": to}),
                        6 => json!({"a": "allin"}),
                        _ => json!({"a": "raise", "to": s["min_raise_to"].as_u64().unwrap_or(to)}),
                    };
                    let _ = act(&mut h, seat, a);
                }
                (70..=79, _) => {
                    h.fire_next();
                }
                (80..=85, _) => {
                    let free: Vec<u32> =
                        (0..seats).filter(|x| !h.seats().contains_key(x)).collect();
                    if !free.is_empty() {
                        let seat = free[rng.usize(..free.len())];
                        let buyin = rng.u64(200..=2000);
                        users += 1;
                        if h.sit(
                            seat,
                            &format!("u{users}"),
                            json!({"buyin": buyin}).to_string().as_bytes(),
                        )
                        .is_ok()
                        {
                            chips_in += buyin;
                        }
                    }
                }
                (86..=87, _) => {
                    let seated: Vec<u32> = h.seats().keys().copied().collect();
                    if !seated.is_empty() {
                        let seat = seated[rng.usize(..seated.len())];
                        let stack = s["seats"]
                            .as_array()
                            .expect("seats")
                            .iter()
                            .find(|p| p["seat"] == seat)
                            .and_then(|p| p["stack"].as_u64())
                            .expect("seated player's stack");
                        h.leave(seat);
                        chips_out += stack;
                    }
                }
                (88..=91, _) => {
                    if let Some(&seat) = h.seats().keys().nth(rng.usize(..10)) {
                        if rng.bool() {
                            h.drop_seat(seat);
                        } else {
                            h.return_seat(seat);
                        }
                    }
                }
                (92..=95, _) => {
                    if let Some(&seat) = h.seats().keys().nth(rng.usize(..10)) {
                        let amount = rng.u64(1..500);
                        if act(&mut h, seat, json!({"a": "rebuy", "amount": amount})).is_ok() {
                            chips_in += amount;
                        }
                    }
                }
                (96..=99, _) => {
                    if let Some(&seat) = h.seats().keys().nth(rng.usize(..10)) {
                        let a = if rng.bool() { "sitout" } else { "sitin" };
                        let _ = act(&mut h, seat, json!({"a": a}));
                    }
                }
                _ => {
                    h.fire_next();
                }
            }
        }
        // Let the timers finish whatever hand is running.
        for _ in 0..200 {
            if state(&h)["street"] == "idle" {
                break;
            }
            h.fire_next();
        }
        let started = events(&h).iter().filter(|e| e["t"] == "hand").count();
        let ended = events(&h).iter().filter(|e| e["t"] == "result").count();
        assert!(
            ended + 1 >= started && ended <= started,
            "table {table}: {started} started, {ended} ended"
        );
        assert_eq!(
            state(&h)["street"],
            "idle",
            "table {table}: the last hand ends by the timers"
        );
        assert_eq!(ended as u64, h.hands);
        total_hands += h.hands;
    }
    assert!(total_hands >= 2000, "only {total_hands} hands were played");
}
