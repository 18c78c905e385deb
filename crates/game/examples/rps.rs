//! Rock-paper-scissors, best of three, on the same `Game` trait as Hold'em:
//! the engine knows nothing of cards. Picks are secret until both are in; no
//! pick within 5 s loses the round. `cargo run -p herald-game --example rps`
//! plays a match on the fake-clock harness; a server registers `RpsFactory`.

use bytes::Bytes;
use herald_game::testing::Harness;
use herald_game::{ActionError, Ctx, Game, GameFactory, Seat, TableParams};
use std::time::Duration;

const PICKS: [&str; 3] = ["rock", "paper", "scissors"];

#[derive(Default)]
struct Rps {
    picks: [Option<usize>; 2],
    wins: [u32; 2],
    seated: [bool; 2],
}

impl Rps {
    fn start_round(&mut self, ctx: &mut Ctx) {
        self.picks = [None, None];
        ctx.send_table(format!(r#"{{"t":"round","score":{:?}}}"#, self.wins));
        ctx.set_timer(0, Duration::from_secs(5));
    }

    /// Decides the round; a missing pick loses (both missing: nobody scores).
    fn decide(&mut self, ctx: &mut Ctx) {
        ctx.cancel_timer(0);
        let winner = match self.picks {
            [Some(a), Some(b)] if a == b => None,
            [Some(a), Some(b)] => Some(if (a + 3 - b) % 3 == 1 { 0 } else { 1 }),
            [None, None] => None,
            [a, _] => Some(if a.is_some() { 0 } else { 1 }),
        };
        if let Some(w) = winner {
            self.wins[w] += 1;
        }
        let shown = self.picks.map(|p| p.map_or("none", |p| PICKS[p]));
        let w = winner.map_or("null".into(), |w| w.to_string());
        ctx.send_table(format!(r#"{{"t":"reveal","picks":{shown:?},"w":{w}}}"#));
        if let Some(w) = self.wins.iter().position(|&n| n == 2) {
            ctx.send_table(format!(r#"{{"t":"match","winner":{w}}}"#));
            ctx.hand_finished();
            self.wins = [0, 0];
        }
        if self.seated == [true, true] {
            self.start_round(ctx);
        }
    }
}

impl Game for Rps {
    fn can_sit(&self, seat: Seat, _user: &str, _data: &[u8]) -> Result<(), String> {
        (seat < 2).then_some(()).ok_or("two seats".into())
    }

    fn sat(&mut self, ctx: &mut Ctx, seat: Seat, _user: &str, _data: &[u8]) {
        self.seated[seat as usize] = true;
        ctx.set_attr("waiting", self.seated != [true, true]);
        if self.seated == [true, true] {
            self.start_round(ctx);
        }
    }

    fn left(&mut self, ctx: &mut Ctx, seat: Seat) {
        (self.seated[seat as usize], self.wins) = (false, [0, 0]);
        ctx.cancel_timer(0);
        ctx.set_attr("waiting", true);
    }

    fn act(&mut self, ctx: &mut Ctx, seat: Seat, data: &[u8]) -> Result<(), ActionError> {
        let pick = PICKS
            .iter()
            .position(|p| p.as_bytes() == data)
            .ok_or_else(|| ActionError::Malformed("rock, paper or scissors".into()))?;
        let mine = &mut self.picks[seat as usize];
        if mine.is_some() || self.seated != [true, true] {
            return Err(ActionError::OutOfTurn("wait for the next round".into()));
        }
        *mine = Some(pick);
        ctx.send_to(
            seat,
            format!(r#"{{"t":"picked","pick":"{}"}}"#, PICKS[pick]),
        );
        if self.picks.iter().all(Option::is_some) {
            self.decide(ctx);
        }
        Ok(())
    }

    fn timer(&mut self, ctx: &mut Ctx, _key: u64) {
        self.decide(ctx);
    }

    fn snapshot(&self, _seat: Option<Seat>) -> Bytes {
        Bytes::from(format!(r#"{{"t":"state","score":{:?}}}"#, self.wins))
    }
}

/// Registers `game = "rps"`.
pub struct RpsFactory;

impl GameFactory for RpsFactory {
    fn name(&self) -> &'static str {
        "rps"
    }

    fn create(&self, p: &TableParams) -> Result<Box<dyn Game>, String> {
        let two = p.seats == 2;
        two.then(|| Box::<Rps>::default() as _)
            .ok_or("rps needs 2 seats".into())
    }
}

fn play() -> Harness {
    let mut h = Harness::new(Box::<Rps>::default());
    h.sit(0, "ann", b"").expect("sit");
    h.sit(1, "bob", b"").expect("sit");
    h.act(0, b"rock").expect("pick");
    assert!(h.act(0, b"paper").is_err(), "one pick per round");
    h.act(1, b"scissors").expect("pick"); // ann 1-0
    h.act(1, b"paper").expect("pick");
    h.advance(Duration::from_secs(5)); // ann too slow: bob 1-1
    h.act(0, b"paper").expect("pick");
    h.act(1, b"rock").expect("pick"); // ann 2-1
    h
}

fn main() {
    for (to, msg) in &play().sent {
        println!("{to:?}: {}", String::from_utf8_lossy(msg));
    }
}

#[test]
fn ann_wins_two_rounds_to_one() {
    let mut h = play();
    assert_eq!(h.hands, 1);
    let sent = h.sent_to(herald_game::testing::To::Table);
    assert_eq!(&sent[sent.len() - 2][..], br#"{"t":"match","winner":0}"#);
    assert!(matches!(h.act(0, b"x"), Err(ActionError::Malformed(_))));
}
