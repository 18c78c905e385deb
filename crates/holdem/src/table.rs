//! One Hold'em table: the state machine between hands, betting rounds and
//! the showdown, and the JSON it sends (format in the crate's README).
//!
//! Chips only ever move between a player's stack and the hand's
//! `committed` amounts, and back at the end of the hand, so the chips on a
//! table change only by buy-ins, rebuys and leavers' stacks (the property
//! test in `tests/rules.rs` checks this over thousands of hands).

use crate::cards::Card;
use crate::eval::{best, Rank};
use crate::Config;
use bytes::Bytes;
use herald_game::{ActionError, Ctx, Game, Seat};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::time::Duration;

/// Timer keys.
const T_ACTION: u64 = 1;
const T_HAND: u64 = 2;
const T_STREET: u64 = 3;
/// `T_BUST + seat`: a busted player's time to rebuy.
const T_BUST: u64 = 100;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Player {
    user: String,
    stack: u64,
    away: bool,
    sitting_out: bool,
    busted: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Street {
    Preflop,
    Flop,
    Turn,
    River,
}

impl Street {
    fn name(self) -> &'static str {
        match self {
            Street::Preflop => "preflop",
            Street::Flop => "flop",
            Street::Turn => "turn",
            Street::River => "river",
        }
    }
}

/// A seat dealt into the current hand.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct InHand {
    cards: [Card; 2],
    /// Chips put in on this street.
    bet: u64,
    /// Chips put in during the whole hand (this street included).
    committed: u64,
    folded: bool,
    all_in: bool,
    /// Must still act in this betting round.
    to_act: bool,
    /// May raise when it acts (false once it acted and only a short all-in
    /// raised since).
    can_raise: bool,
    /// The player left the table during the hand (folded, stack gone).
    gone: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Hand {
    number: u64,
    button: Seat,
    street: Street,
    deck: Vec<Card>,
    board: Vec<Card>,
    seats: Vec<Option<InHand>>,
    current_bet: u64,
    /// The last full bet or raise of this street (at least the big blind).
    min_raise: u64,
    turn: Option<Seat>,
}

impl Hand {
    fn get(&self, seat: Seat) -> Option<&InHand> {
        self.seats.get(seat as usize).and_then(Option::as_ref)
    }

    fn get_mut(&mut self, seat: Seat) -> Option<&mut InHand> {
        self.seats.get_mut(seat as usize).and_then(Option::as_mut)
    }

    fn dealt(&self) -> impl Iterator<Item = (Seat, &InHand)> {
        self.seats
            .iter()
            .enumerate()
            .filter_map(|(s, h)| h.as_ref().map(|h| (s as Seat, h)))
    }

    fn contenders(&self) -> Vec<Seat> {
        self.dealt()
            .filter(|(_, h)| !h.folded)
            .map(|(s, _)| s)
            .collect()
    }

    /// Seats that can still bet: in the hand and not all-in.
    fn active(&self) -> impl Iterator<Item = (Seat, &InHand)> {
        self.dealt().filter(|(_, h)| !h.folded && !h.all_in)
    }

    fn pot(&self) -> u64 {
        self.dealt().map(|(_, h)| h.committed).sum()
    }

    fn round_over(&self) -> bool {
        let max_bet = self
            .dealt()
            .filter(|(_, h)| !h.folded)
            .map(|(_, h)| h.bet)
            .max()
            .unwrap_or(0);
        let active: Vec<&InHand> = self.active().map(|(_, h)| h).collect();
        match active.as_slice() {
            [] => true,
            [only] if only.bet >= max_bet => true,
            _ => active.iter().all(|h| !h.to_act),
        }
    }
}

/// A parsed action.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Action {
    a: String,
    #[serde(default)]
    to: Option<u64>,
    #[serde(default)]
    amount: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bet {
    Fold,
    Check,
    Call,
    RaiseTo(u64),
    AllIn,
}

/// One Texas Hold'em table.
#[derive(Debug)]
pub struct Holdem {
    cfg: Config,
    rng: fastrand::Rng,
    players: Vec<Option<Player>>,
    hand: Option<Hand>,
    hands_played: u64,
    /// The button of the last hand.
    button: Option<Seat>,
    /// A `T_HAND` timer is pending.
    hand_pending: bool,
    /// Decks to deal before shuffling again (tests and replays).
    stacked: Vec<Vec<Card>>,
}

fn bytes(v: Value) -> Bytes {
    Bytes::from(v.to_string())
}

fn cards_json(cards: &[Card]) -> Value {
    Value::Array(cards.iter().map(|c| Value::from(c.to_string())).collect())
}

impl Holdem {
    /// A table with no one seated.
    pub fn new(cfg: Config) -> Holdem {
        Holdem {
            rng: fastrand::Rng::with_seed(cfg.seed),
            players: (0..cfg.seats).map(|_| None).collect(),
            hand: None,
            hands_played: 0,
            button: None,
            hand_pending: false,
            stacked: Vec::new(),
            cfg,
        }
    }

    /// Deals the next hands from these decks instead of shuffled ones, each
    /// in dealing order: two cards per seat dealt in (lowest seat first),
    /// then burn and flop, burn and turn, burn and river. For scripted tests
    /// and replays; a deck must hold every card the hand may need.
    pub fn stack_decks(&mut self, decks: Vec<Vec<Card>>) {
        self.stacked = decks;
    }

    /// Hands finished at this table.
    pub fn hands_played(&self) -> u64 {
        self.hands_played
    }

    fn player(&self, seat: Seat) -> Option<&Player> {
        self.players.get(seat as usize).and_then(Option::as_ref)
    }

    fn player_mut(&mut self, seat: Seat) -> Option<&mut Player> {
        self.players.get_mut(seat as usize).and_then(Option::as_mut)
    }

    fn stack(&self, seat: Seat) -> u64 {
        self.player(seat).map_or(0, |p| p.stack)
    }

    /// Seats that would be dealt into a hand starting now.
    fn eligible(&self) -> Vec<Seat> {
        self.players
            .iter()
            .enumerate()
            .filter_map(|(s, p)| p.as_ref().map(|p| (s as Seat, p)))
            .filter(|(_, p)| !p.sitting_out && p.stack > 0)
            .map(|(s, _)| s)
            .collect()
    }

    /// The first seat after `from` (going round the table, `from` itself
    /// last) that satisfies `pred`.
    fn next_seat(&self, from: Seat, pred: impl Fn(Seat) -> bool) -> Option<Seat> {
        let n = self.cfg.seats;
        (1..=n).map(|i| (from + i) % n).find(|&s| pred(s))
    }

    fn maybe_schedule(&mut self, ctx: &mut Ctx) {
        if self.hand.is_none() && !self.hand_pending && self.eligible().len() >= 2 {
            self.hand_pending = true;
            ctx.set_timer(T_HAND, self.cfg.timing.hand);
        }
    }

    fn action_timeout(&self, seat: Seat) -> Duration {
        let t = self.cfg.timing.action;
        if self.player(seat).is_some_and(|p| p.away) {
            t / 4
        } else {
            t
        }
    }

    /// Moves chips from a seat's stack into the hand.
    fn put(&mut self, seat: Seat, amount: u64) -> u64 {
        let Some(p) = self.players.get_mut(seat as usize).and_then(Option::as_mut) else {
            return 0;
        };
        let amount = amount.min(p.stack);
        p.stack -= amount;
        let now_empty = p.stack == 0;
        if let Some(h) = self.hand.as_mut().and_then(|h| h.get_mut(seat)) {
            h.bet += amount;
            h.committed += amount;
            h.all_in |= now_empty;
        }
        amount
    }

    fn start_hand(&mut self, ctx: &mut Ctx) {
        let dealt = self.eligible();
        if dealt.len() < 2 {
            return;
        }
        let button = match self.button {
            None => dealt[0],
            Some(b) => self
                .next_seat(b, |s| dealt.contains(&s))
                .unwrap_or(dealt[0]),
        };
        let after = |s: Seat| self.next_seat(s, |x| dealt.contains(&x)).unwrap_or(s);
        let (sb_seat, bb_seat) = if dealt.len() == 2 {
            (button, after(button))
        } else {
            (after(button), after(after(button)))
        };
        let mut deck = if self.stacked.is_empty() {
            let mut deck = Card::deck();
            self.rng.shuffle(&mut deck);
            deck
        } else {
            let mut deck = self.stacked.remove(0);
            deck.reverse();
            deck
        };
        let mut seats: Vec<Option<InHand>> = (0..self.cfg.seats).map(|_| None).collect();
        let mut before = Vec::new();
        for &s in &dealt {
            let (Some(a), Some(b)) = (deck.pop(), deck.pop()) else {
                return;
            };
            seats[s as usize] = Some(InHand {
                cards: [a, b],
                bet: 0,
                committed: 0,
                folded: false,
                all_in: false,
                to_act: true,
                can_raise: true,
                gone: false,
            });
            before.push(json!({"seat": s, "stack": self.stack(s)}));
        }
        self.hand_pending = false;
        self.hand = Some(Hand {
            number: self.hands_played + 1,
            button,
            street: Street::Preflop,
            deck,
            board: Vec::new(),
            seats,
            current_bet: 0,
            min_raise: self.cfg.big_blind,
            turn: None,
        });
        let sb = self.put(sb_seat, self.cfg.small_blind);
        let bb = self.put(bb_seat, self.cfg.big_blind);
        let Some(hand) = self.hand.as_mut() else {
            return;
        };
        hand.current_bet = sb.max(bb);
        for s in &dealt {
            if let Some(h) = hand.get_mut(*s) {
                h.to_act = !h.all_in;
            }
        }
        let number = hand.number;
        ctx.send_table(bytes(json!({
            "t": "hand", "hand": number, "button": button,
            "sb_seat": sb_seat, "bb_seat": bb_seat, "sb": sb, "bb": bb,
            "seats": before,
        })));
        for (s, h) in hand.dealt() {
            ctx.send_to(
                s,
                bytes(json!({"t": "cards", "hand": number, "cards": cards_json(&h.cards)})),
            );
        }
        self.advance(ctx, bb_seat);
    }

    /// After an action by `from` (or at the start of a round, `from` being
    /// the seat before the first to act): ends the hand, ends the round, or
    /// gives the turn to the next seat that must act.
    fn advance(&mut self, ctx: &mut Ctx, from: Seat) {
        let Some(hand) = self.hand.as_ref() else {
            return;
        };
        if hand.contenders().len() <= 1 || hand.round_over() {
            self.end_round(ctx);
            return;
        }
        let next = self.next_seat(from, |s| {
            hand.get(s)
                .is_some_and(|h| !h.folded && !h.all_in && h.to_act)
        });
        let Some(seat) = next else {
            self.end_round(ctx);
            return;
        };
        if let Some(hand) = self.hand.as_mut() {
            hand.turn = Some(seat);
        }
        let turn = self.turn_json(seat);
        ctx.send_table(bytes(turn));
        ctx.set_timer(T_ACTION, self.action_timeout(seat));
    }

    /// Whether `seat` may raise now.
    fn may_raise(&self, seat: Seat) -> bool {
        let Some(hand) = self.hand.as_ref() else {
            return false;
        };
        let Some(h) = hand.get(seat) else {
            return false;
        };
        h.can_raise
            && h.bet + self.stack(seat) > hand.current_bet
            && hand.active().any(|(s, _)| s != seat)
    }

    fn turn_json(&self, seat: Seat) -> Value {
        let Some(hand) = self.hand.as_ref() else {
            return Value::Null;
        };
        let bet = hand.get(seat).map_or(0, |h| h.bet);
        let stack = self.stack(seat);
        let mut v = json!({
            "t": "turn", "seat": seat,
            "to_call": hand.current_bet.saturating_sub(bet).min(stack),
            "pot": hand.pot(),
            "timeout_ms": self.action_timeout(seat).as_millis() as u64,
        });
        if self.may_raise(seat) {
            let max = bet + stack;
            v["min_raise_to"] = json!((hand.current_bet + hand.min_raise).min(max));
            v["max_raise_to"] = json!(max);
        }
        v
    }

    /// The betting round is over: deal the next street after a pause, or
    /// settle the hand.
    fn end_round(&mut self, ctx: &mut Ctx) {
        ctx.cancel_timer(T_ACTION);
        let Some(hand) = self.hand.as_mut() else {
            return;
        };
        hand.turn = None;
        if hand.contenders().len() <= 1 || hand.street == Street::River {
            self.finish_hand(ctx);
        } else {
            ctx.set_timer(T_STREET, self.cfg.timing.street);
        }
    }

    fn deal_street(&mut self, ctx: &mut Ctx) {
        let big_blind = self.cfg.big_blind;
        let Some(hand) = self.hand.as_mut() else {
            return;
        };
        let (street, n) = match hand.street {
            Street::Preflop => (Street::Flop, 3),
            Street::Flop => (Street::Turn, 1),
            Street::Turn | Street::River => (Street::River, 1),
        };
        hand.street = street;
        hand.deck.pop(); // the burn card
        for _ in 0..n {
            if let Some(c) = hand.deck.pop() {
                hand.board.push(c);
            }
        }
        hand.current_bet = 0;
        hand.min_raise = big_blind;
        for h in hand.seats.iter_mut().flatten() {
            h.bet = 0;
            h.to_act = !h.folded && !h.all_in;
            h.can_raise = true;
        }
        ctx.send_table(bytes(json!({
            "t": "street", "street": street.name(),
            "board": cards_json(&hand.board), "pot": hand.pot(),
        })));
        let button = hand.button;
        self.advance(ctx, button);
    }

    /// Applies a betting action of the seat whose turn it is.
    fn bet(&mut self, ctx: &mut Ctx, seat: Seat, bet: Bet, auto: bool) -> Result<(), ActionError> {
        let stack = self.stack(seat);
        let may_raise = self.may_raise(seat);
        let Some(hand) = self.hand.as_ref() else {
            return Err(ActionError::OutOfTurn("no hand is being played".into()));
        };
        if hand.turn != Some(seat) {
            return Err(ActionError::OutOfTurn(match hand.turn {
                Some(t) => format!("it is seat {t}'s turn"),
                None => "nobody is to act now".into(),
            }));
        }
        let Some(h) = hand.get(seat) else {
            return Err(ActionError::OutOfTurn("not in this hand".into()));
        };
        let current = hand.current_bet;
        let min_raise = hand.min_raise;
        let to_call = current.saturating_sub(h.bet);
        let max_to = h.bet + stack;
        // Turn an all-in into the call or raise it is.
        let bet = match bet {
            Bet::AllIn if max_to <= current || !may_raise => Bet::Call,
            Bet::AllIn => Bet::RaiseTo(max_to),
            Bet::Call if to_call == 0 => Bet::Check,
            b => b,
        };
        let (name, raise_to) = match bet {
            Bet::Fold => ("fold", None),
            Bet::Check if to_call > 0 => {
                return Err(ActionError::Illegal(format!(
                    "cannot check: {to_call} to call"
                )))
            }
            Bet::Check => ("check", None),
            Bet::Call => ("call", None),
            Bet::RaiseTo(to) => {
                if !may_raise {
                    return Err(ActionError::Illegal(
                        "you may not raise now (the betting was not reopened): call or fold".into(),
                    ));
                }
                if to > max_to {
                    return Err(ActionError::Illegal(format!(
                        "raise to {to} is more than you have (at most {max_to})"
                    )));
                }
                let min_to = current + min_raise;
                if to < min_to && to != max_to {
                    return Err(ActionError::Illegal(format!(
                        "raise to at least {min_to} (or all-in for {max_to})"
                    )));
                }
                ("raise", Some(to))
            }
            Bet::AllIn => ("allin", None),
        };
        let amount = match (bet, raise_to) {
            (Bet::Call, _) => self.put(seat, to_call),
            (_, Some(to)) => self.put(seat, to.saturating_sub(h.bet)),
            _ => 0,
        };
        let Some(hand) = self.hand.as_mut() else {
            return Ok(());
        };
        if let Some(to) = raise_to {
            let full = to - current >= min_raise;
            if full {
                hand.min_raise = to - current;
            }
            hand.current_bet = to;
            for (s, other) in hand.seats.iter_mut().enumerate() {
                let Some(other) = other.as_mut() else {
                    continue;
                };
                if s as Seat == seat || other.folded || other.all_in {
                    continue;
                }
                if full {
                    other.can_raise = true;
                } else if !other.to_act {
                    other.can_raise = false;
                }
                other.to_act = true;
            }
        }
        let pot = hand.pot();
        let Some(h) = hand.get_mut(seat) else {
            return Ok(());
        };
        h.to_act = false;
        h.folded |= bet == Bet::Fold;
        let event = json!({
            "t": "action", "seat": seat, "a": if h.all_in && amount > 0 { "allin" } else { name },
            "amount": amount, "bet": h.bet, "stack": self.stack(seat), "pot": pot,
            "auto": auto,
        });
        ctx.cancel_timer(T_ACTION);
        ctx.send_table(bytes(event));
        self.advance(ctx, seat);
        Ok(())
    }

    /// Settles the hand: uncalled chips back, pots to the best hands,
    /// stacks, busts, the next hand.
    fn finish_hand(&mut self, ctx: &mut Ctx) {
        ctx.cancel_timer(T_ACTION);
        ctx.cancel_timer(T_STREET);
        let Some(mut hand) = self.hand.take() else {
            return;
        };
        let n = self.cfg.seats;
        // Uncalled chips: the top contributor's excess over the second.
        let mut by_committed: Vec<(u64, Seat)> =
            hand.dealt().map(|(s, h)| (h.committed, s)).collect();
        by_committed.sort_unstable_by(|a, b| b.cmp(a));
        let mut returned = Value::Null;
        if let [(top, seat), rest @ ..] = by_committed.as_slice() {
            let second = rest.first().map_or(0, |r| r.0);
            let excess = top - second;
            // Only a player still in the hand takes chips back; a folded
            // (departed) top contributor forfeits them to the pot.
            let contender = hand.get(*seat).is_some_and(|h| !h.folded && !h.gone);
            if excess > 0 && contender {
                if let Some(h) = hand.get_mut(*seat) {
                    h.committed -= excess;
                }
                if let Some(p) = self.player_mut(*seat) {
                    p.stack += excess;
                }
                returned = json!({"seat": seat, "amount": excess});
            }
        }
        let contenders = hand.contenders();
        let showdown = contenders.len() > 1;
        let mut ranks: Vec<(Seat, Rank)> = Vec::new();
        let mut shown = Vec::new();
        if showdown {
            for &s in &contenders {
                if let Some(h) = hand.get(s) {
                    let mut seven = hand.board.clone();
                    seven.extend_from_slice(&h.cards);
                    let rank = if seven.len() >= 5 {
                        best(&seven).0
                    } else {
                        Rank(0)
                    };
                    ranks.push((s, rank));
                    shown.push(
                        json!({"seat": s, "cards": cards_json(&h.cards), "rank": rank.name()}),
                    );
                }
            }
        }
        // Pots: one layer per distinct contribution of a contender; the last
        // layer also takes whatever folded players put in above it.
        let mut levels: Vec<u64> = contenders
            .iter()
            .filter_map(|&s| hand.get(s).map(|h| h.committed))
            .collect();
        levels.sort_unstable();
        levels.dedup();
        let top_level = hand.dealt().map(|(_, h)| h.committed).max().unwrap_or(0);
        if let Some(last) = levels.last_mut() {
            *last = (*last).max(top_level);
        }
        // Seats in odd-chip order: first to the left of the button.
        let order: Vec<Seat> = (1..=n).map(|i| (hand.button + i) % n).collect();
        let mut pots = Vec::new();
        let mut prev = 0u64;
        for level in levels {
            let amount: u64 = hand
                .dealt()
                .map(|(_, h)| h.committed.min(level) - h.committed.min(prev))
                .sum();
            let eligible: Vec<Seat> = contenders
                .iter()
                .copied()
                .filter(|&s| hand.get(s).is_some_and(|h| h.committed > prev))
                .collect();
            prev = level;
            if amount == 0 || eligible.is_empty() {
                continue;
            }
            let best_rank = eligible
                .iter()
                .filter_map(|s| ranks.iter().find(|(r, _)| r == s).map(|(_, k)| *k))
                .max();
            let mut winners: Vec<Seat> = match best_rank {
                Some(b) if showdown => eligible
                    .iter()
                    .copied()
                    .filter(|s| ranks.iter().any(|(r, k)| r == s && *k == b))
                    .collect(),
                _ => eligible.clone(),
            };
            winners.sort_by_key(|s| order.iter().position(|o| o == s));
            let share = amount / winners.len() as u64;
            let odd = amount % winners.len() as u64;
            for (i, &w) in winners.iter().enumerate() {
                let won = share + u64::from((i as u64) < odd);
                if let Some(p) = self.player_mut(w) {
                    p.stack += won;
                }
            }
            winners.sort_unstable();
            pots.push(json!({
                "amount": amount, "winners": winners,
                "rank": if showdown { best_rank.map(|r| r.name()) } else { None },
            }));
        }
        self.hands_played += 1;
        self.button = Some(hand.button);
        let stacks: Vec<Value> = self
            .players
            .iter()
            .enumerate()
            .filter_map(|(s, p)| p.as_ref().map(|p| json!({"seat": s, "stack": p.stack})))
            .collect();
        ctx.send_table(bytes(json!({
            "t": "result", "hand": hand.number, "board": cards_json(&hand.board),
            "pots": pots, "shown": shown, "returned": returned, "stacks": stacks,
        })));
        ctx.hand_finished();
        let bust_wait = self.cfg.timing.rebuy;
        for (s, p) in self.players.iter_mut().enumerate() {
            if let Some(p) = p.as_mut() {
                if p.stack == 0 && !p.busted {
                    p.busted = true;
                    ctx.set_timer(T_BUST + s as u64, bust_wait);
                }
            }
        }
        self.maybe_schedule(ctx);
    }

    /// The table as `seat` (or a watcher) sees it.
    fn state_json(&self, viewer: Option<Seat>) -> Value {
        let hand = self.hand.as_ref();
        let seats: Vec<Value> = self
            .players
            .iter()
            .enumerate()
            .filter_map(|(s, p)| p.as_ref().map(|p| (s as Seat, p)))
            .map(|(s, p)| {
                let h = hand.and_then(|h| h.get(s)).filter(|h| !h.gone);
                json!({
                    "seat": s, "user": p.user, "stack": p.stack,
                    "bet": h.map_or(0, |h| h.bet),
                    "folded": h.is_some_and(|h| h.folded),
                    "all_in": h.is_some_and(|h| h.all_in),
                    "sitting_out": p.sitting_out,
                    "in_hand": h.is_some(),
                })
            })
            .collect();
        let mut v = json!({
            "t": "state",
            "hand": hand.map_or(self.hands_played, |h| h.number),
            "street": hand.map_or("idle", |h| h.street.name()),
            "button": hand.map(|h| h.button).or(self.button),
            "sb": self.cfg.small_blind, "bb": self.cfg.big_blind,
            "board": cards_json(hand.map_or(&[][..], |h| &h.board)),
            "pot": hand.map_or(0, Hand::pot),
            "seats": seats,
            "turn": hand.and_then(|h| h.turn),
        });
        if let Some(turn) = hand.and_then(|h| h.turn) {
            let t = self.turn_json(turn);
            for k in ["to_call", "min_raise_to", "max_raise_to"] {
                if let Some(x) = t.get(k) {
                    v[k] = x.clone();
                }
            }
        }
        if let Some(h) = viewer.and_then(|s| hand.and_then(|h| h.get(s))) {
            if !h.gone {
                v["cards"] = cards_json(&h.cards);
            }
        }
        v
    }

    /// Folds a seat that is not the one to act (it left, mid-hand).
    fn fold_out_of_turn(&mut self, ctx: &mut Ctx, seat: Seat) {
        let Some(hand) = self.hand.as_mut() else {
            return;
        };
        let Some(h) = hand.get_mut(seat) else { return };
        if h.folded {
            return;
        }
        h.folded = true;
        h.to_act = false;
        let bet = h.bet;
        let pot = hand.pot();
        let stack = self.stack(seat);
        ctx.send_table(bytes(json!({
            "t": "action", "seat": seat, "a": "fold", "amount": 0, "bet": bet,
            "stack": stack, "pot": pot, "auto": true,
        })));
        let Some(hand) = self.hand.as_ref() else {
            return;
        };
        if hand.contenders().len() <= 1 || hand.round_over() {
            self.end_round(ctx);
        }
    }
}

/// Version of the saved state's layout; a different one is refused.
const SAVE_VERSION: u32 = 1;
/// No stack, bet or pot in a sane saved state comes near this (buy-ins are
/// capped at 2^40 chips); a larger number is corruption, refused before any
/// sum could overflow.
const SAVE_CHIPS_MAX: u64 = 1 << 50;

/// The durable state as written (borrowing the table).
#[derive(Serialize)]
struct SavedRef<'a> {
    v: u32,
    seats: u32,
    rng: u64,
    players: &'a [Option<Player>],
    hand: &'a Option<Hand>,
    hands_played: u64,
    button: Option<Seat>,
    hand_pending: bool,
    stacked: &'a [Vec<Card>],
}

/// The durable state as read back.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Saved {
    v: u32,
    seats: u32,
    rng: u64,
    players: Vec<Option<Player>>,
    hand: Option<Hand>,
    hands_played: u64,
    button: Option<Seat>,
    hand_pending: bool,
    stacked: Vec<Vec<Card>>,
}

impl Holdem {
    /// The table's whole state as JSON (decision 0009): players, the hand in
    /// progress with its deck, the random generator's state, the button.
    fn save_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(&SavedRef {
            v: SAVE_VERSION,
            seats: self.cfg.seats,
            rng: self.rng.get_seed(),
            players: &self.players,
            hand: &self.hand,
            hands_played: self.hands_played,
            button: self.button,
            hand_pending: self.hand_pending,
            stacked: &self.stacked,
        })
    }

    /// The table saved by [`Game::save`], with the parameters it was created
    /// with. The state comes from outside (Redis): anything malformed or
    /// inconsistent (wrong seat count, a seat out of range, a card twice,
    /// absurd amounts) is refused with the reason.
    pub fn restore(cfg: Config, state: &[u8]) -> Result<Holdem, String> {
        let saved: Saved =
            serde_json::from_slice(state).map_err(|e| format!("not a saved holdem table: {e}"))?;
        if saved.v != SAVE_VERSION {
            return Err(format!(
                "saved holdem state version {} (this server reads {SAVE_VERSION})",
                saved.v
            ));
        }
        let n = cfg.seats;
        if saved.seats != n || saved.players.len() != n as usize {
            return Err(format!(
                "saved table has {} seats ({} players), the table {n}",
                saved.seats,
                saved.players.len()
            ));
        }
        let too_big = |x: u64| x > SAVE_CHIPS_MAX;
        if saved.players.iter().flatten().any(|p| too_big(p.stack)) {
            return Err("a saved stack is out of range".into());
        }
        if saved.button.is_some_and(|b| b >= n) {
            return Err("the saved button is not a seat".into());
        }
        if saved.stacked.iter().any(|d| d.len() > 52) {
            return Err("a stacked deck has more than 52 cards".into());
        }
        if let Some(hand) = &saved.hand {
            check_hand(hand, &saved.players, n)?;
        }
        let mut rng = fastrand::Rng::new();
        rng.seed(saved.rng);
        Ok(Holdem {
            cfg,
            rng,
            players: saved.players,
            hand: saved.hand,
            hands_played: saved.hands_played,
            button: saved.button,
            hand_pending: saved.hand_pending,
            stacked: saved.stacked,
        })
    }
}

/// The consistency a restored hand must have for the rules to go on from it
/// without panicking or inventing chips.
fn check_hand(hand: &Hand, players: &[Option<Player>], n: Seat) -> Result<(), String> {
    if hand.seats.len() != n as usize || hand.button >= n {
        return Err("the saved hand does not fit the table".into());
    }
    if hand.board.len() > 5 {
        return Err("the saved board has more than 5 cards".into());
    }
    if let Some(turn) = hand.turn {
        let ok = hand.get(turn).is_some_and(|h| !h.folded && !h.all_in)
            && players.get(turn as usize).is_some_and(Option::is_some);
        if !ok {
            return Err(format!("the saved turn {turn} is not a seat that can act"));
        }
    }
    if hand.min_raise == 0 || hand.min_raise > SAVE_CHIPS_MAX || hand.current_bet > SAVE_CHIPS_MAX {
        return Err("saved bets are out of range".into());
    }
    let mut seen = [false; 52];
    let mut mark = |c: &Card| -> Result<(), String> {
        let i = usize::from(c.rank()) * 4 + usize::from(c.suit());
        if std::mem::replace(&mut seen[i], true) {
            return Err(format!("the saved hand holds {c} twice"));
        }
        Ok(())
    };
    for c in hand.deck.iter().chain(&hand.board) {
        mark(c)?;
    }
    for (s, h) in hand.dealt() {
        for c in &h.cards {
            mark(c)?;
        }
        if h.bet > h.committed || h.committed > SAVE_CHIPS_MAX {
            return Err(format!("seat {s}'s saved bets are inconsistent"));
        }
        if !h.gone && players.get(s as usize).is_none_or(Option::is_none) {
            return Err(format!(
                "seat {s} is in the saved hand but not at the table"
            ));
        }
    }
    Ok(())
}

fn parse_buyin(data: &[u8], cfg: &Config) -> Result<u64, String> {
    if data.iter().all(u8::is_ascii_whitespace) {
        return Ok(cfg.buyin);
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Sit {
        buyin: u64,
    }
    let sit: Sit = serde_json::from_slice(data)
        .map_err(|e| format!("sit data must be empty or {{\"buyin\": N}}: {e}"))?;
    if !(cfg.min_buyin..=cfg.max_buyin).contains(&sit.buyin) {
        return Err(format!(
            "buy-in must be {} to {}",
            cfg.min_buyin, cfg.max_buyin
        ));
    }
    Ok(sit.buyin)
}

impl Game for Holdem {
    fn created(&mut self, ctx: &mut Ctx) {
        let c = &self.cfg;
        ctx.set_attr("sb", c.small_blind);
        ctx.set_attr("bb", c.big_blind);
        ctx.set_attr("stakes", format!("{}/{}", c.small_blind, c.big_blind));
        ctx.set_attr("min_buyin", c.min_buyin);
        ctx.set_attr("max_buyin", c.max_buyin);
    }

    fn can_sit(&self, _seat: Seat, _user: &str, data: &[u8]) -> Result<(), String> {
        parse_buyin(data, &self.cfg).map(|_| ())
    }

    fn sat(&mut self, ctx: &mut Ctx, seat: Seat, user: &str, data: &[u8]) {
        let stack = parse_buyin(data, &self.cfg).unwrap_or(self.cfg.buyin);
        ctx.send_table(bytes(
            json!({"t": "sat", "seat": seat, "user": user, "stack": stack}),
        ));
        if let Some(slot) = self.players.get_mut(seat as usize) {
            *slot = Some(Player {
                user: user.to_string(),
                stack,
                away: false,
                sitting_out: false,
                busted: false,
            });
        }
        self.maybe_schedule(ctx);
    }

    fn left(&mut self, ctx: &mut Ctx, seat: Seat) {
        let in_hand = self
            .hand
            .as_ref()
            .and_then(|h| h.get(seat))
            .is_some_and(|h| !h.folded);
        if in_hand {
            let my_turn = self.hand.as_ref().and_then(|h| h.turn) == Some(seat);
            if my_turn {
                let _ = self.bet(ctx, seat, Bet::Fold, true);
            } else {
                self.fold_out_of_turn(ctx, seat);
            }
        }
        if let Some(h) = self.hand.as_mut().and_then(|h| h.get_mut(seat)) {
            h.gone = true;
        }
        ctx.cancel_timer(T_BUST + u64::from(seat));
        if let Some(slot) = self.players.get_mut(seat as usize) {
            *slot = None;
        }
    }

    fn dropped(&mut self, ctx: &mut Ctx, seat: Seat) {
        if let Some(p) = self.player_mut(seat) {
            p.away = true;
        }
        if self.hand.as_ref().and_then(|h| h.turn) == Some(seat) {
            ctx.set_timer(T_ACTION, self.action_timeout(seat));
        }
    }

    fn returned(&mut self, _ctx: &mut Ctx, seat: Seat) {
        if let Some(p) = self.player_mut(seat) {
            p.away = false;
        }
    }

    fn act(&mut self, ctx: &mut Ctx, seat: Seat, data: &[u8]) -> Result<(), ActionError> {
        let action: Action = serde_json::from_slice(data).map_err(|e| {
            ActionError::Malformed(format!("expected {{\"a\": \"fold\"|\"check\"|...}}: {e}"))
        })?;
        let bet = match action.a.as_str() {
            "fold" => Bet::Fold,
            "check" => Bet::Check,
            "call" => Bet::Call,
            "raise" | "bet" => Bet::RaiseTo(action.to.ok_or_else(|| {
                ActionError::Malformed(format!("{} needs \"to\": the street's total bet", action.a))
            })?),
            "allin" => Bet::AllIn,
            "sitout" | "sitin" => {
                let out = action.a == "sitout";
                if let Some(p) = self.player_mut(seat) {
                    p.sitting_out = out;
                }
                ctx.send_table(bytes(json!({"t": action.a, "seat": seat})));
                self.maybe_schedule(ctx);
                return Ok(());
            }
            "rebuy" => {
                let amount = action.amount.filter(|a| *a > 0).ok_or_else(|| {
                    ActionError::Malformed("rebuy needs \"amount\" above 0".into())
                })?;
                let in_hand = self
                    .hand
                    .as_ref()
                    .and_then(|h| h.get(seat))
                    .is_some_and(|h| !h.folded);
                if in_hand {
                    return Err(ActionError::Illegal("cannot rebuy during a hand".into()));
                }
                let max = self.cfg.max_buyin;
                let Some(p) = self.player_mut(seat) else {
                    return Err(ActionError::OutOfTurn("not seated".into()));
                };
                if p.stack.saturating_add(amount) > max {
                    return Err(ActionError::Illegal(format!(
                        "a rebuy may top the stack up to {max}, not beyond"
                    )));
                }
                p.stack += amount;
                p.busted = false;
                let stack = p.stack;
                ctx.cancel_timer(T_BUST + u64::from(seat));
                ctx.send_table(bytes(
                    json!({"t": "rebuy", "seat": seat, "amount": amount, "stack": stack}),
                ));
                self.maybe_schedule(ctx);
                return Ok(());
            }
            other => {
                return Err(ActionError::Malformed(format!(
                    "unknown action {other:?}: fold, check, call, raise, bet, allin, sitout, sitin, rebuy"
                )))
            }
        };
        self.bet(ctx, seat, bet, false)
    }

    fn timer(&mut self, ctx: &mut Ctx, key: u64) {
        match key {
            T_HAND => {
                self.hand_pending = false;
                if self.hand.is_none() {
                    self.start_hand(ctx);
                }
            }
            T_STREET => self.deal_street(ctx),
            T_ACTION => {
                let Some(hand) = self.hand.as_ref() else {
                    return;
                };
                let Some(seat) = hand.turn else { return };
                let owes = hand.get(seat).is_some_and(|h| h.bet < hand.current_bet);
                let bet = if owes { Bet::Fold } else { Bet::Check };
                let _ = self.bet(ctx, seat, bet, true);
            }
            k if k >= T_BUST => {
                let seat = (k - T_BUST) as Seat;
                if self.player(seat).is_some_and(|p| p.busted && p.stack == 0) {
                    ctx.unseat(seat, "busted");
                }
            }
            _ => {}
        }
    }

    fn snapshot(&self, seat: Option<Seat>) -> Bytes {
        bytes(self.state_json(seat))
    }

    fn save(&self) -> Option<Vec<u8>> {
        // Serialising plain structs of numbers, strings and cards cannot
        // fail; were it to, "cannot be restored" is the honest answer.
        self.save_json().ok()
    }
}
