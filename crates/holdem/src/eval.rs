//! The hand evaluator: the best five of up to seven cards, as one number
//! that orders hands exactly as poker does (higher wins, equal splits).
//!
//! A [`Rank`] is `category << 20` followed by up to five 4-bit ranks, the
//! tie-breakers in the order they count (the pair before the kickers, the
//! trips before the pair of a full house, the top card of a straight). Seven
//! cards are ranked by trying all 21 five-card subsets: a showdown happens
//! once per hand, so clarity wins over lookup tables (`cargo bench -p
//! herald-holdem` measures it).

use crate::cards::Card;

/// Hand categories, weakest first.
pub const CATEGORIES: [&str; 9] = [
    "high card",
    "pair",
    "two pair",
    "three of a kind",
    "straight",
    "flush",
    "full house",
    "four of a kind",
    "straight flush",
];

/// The strength of a five-card hand: compare with `<`, `==`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rank(pub u32);

impl Rank {
    /// 0 (high card) to 8 (straight flush): an index into [`CATEGORIES`].
    pub fn category(self) -> usize {
        (self.0 >> 20) as usize
    }

    /// The category's name (`"two pair"`).
    pub fn name(self) -> &'static str {
        CATEGORIES.get(self.category()).copied().unwrap_or("?")
    }
}

/// Ranks exactly five cards.
pub fn rank5(cards: &[Card; 5]) -> Rank {
    let mut counts = [0u8; 13];
    let mut mask = 0u16;
    for c in cards {
        counts[c.rank() as usize] += 1;
        mask |= 1 << c.rank();
    }
    let flush = cards.iter().all(|c| c.suit() == cards[0].suit());
    let straight_top = straight_top(mask);
    // Ranks grouped by how often they occur, most often first, then highest.
    let mut groups: Vec<(u8, u8)> = (0..13u8)
        .rev()
        .filter(|&r| counts[r as usize] > 0)
        .map(|r| (counts[r as usize], r))
        .collect();
    groups.sort_by(|a, b| b.cmp(a));
    let (category, kickers): (u32, Vec<u8>) = match (straight_top, flush) {
        (Some(top), true) => (8, vec![top]),
        (Some(top), false) => (4, vec![top]),
        (None, true) => (5, groups.iter().map(|g| g.1).collect()),
        (None, false) => {
            let shape: Vec<u8> = groups.iter().map(|g| g.0).collect();
            let category = match shape.as_slice() {
                [4, 1] => 7,
                [3, 2] => 6,
                [3, 1, 1] => 3,
                [2, 2, 1] => 2,
                [2, 1, 1, 1] => 1,
                _ => 0,
            };
            (category, groups.iter().map(|g| g.1).collect())
        }
    };
    let mut value = category;
    for i in 0..5 {
        value = (value << 4) | u32::from(kickers.get(i).copied().unwrap_or(0));
    }
    Rank(value)
}

/// The top rank of a straight in `mask` (a bit per rank present), if any;
/// the wheel (A-2-3-4-5) tops at the five.
fn straight_top(mask: u16) -> Option<u8> {
    for top in (4..13u8).rev() {
        let run = 0b11111u16 << (top - 4);
        if mask & run == run {
            return Some(top);
        }
    }
    let wheel = 0b1_0000_0000_1111u16; // A, 5, 4, 3, 2
    (mask & wheel == wheel).then_some(3)
}

/// The best five-card rank among `cards` (5 to 7 of them), with the five
/// cards that make it.
pub fn best(cards: &[Card]) -> (Rank, [Card; 5]) {
    let n = cards.len();
    assert!((5..=7).contains(&n), "best() takes 5 to 7 cards");
    let mut top: Option<(Rank, [Card; 5])> = None;
    // Choose which (n - 5) cards to leave out.
    for skip_a in 0..n {
        for skip_b in skip_a..n {
            let leave = match n {
                5 => skip_a == 0 && skip_b == 0,
                6 => skip_a == skip_b,
                _ => skip_a < skip_b,
            };
            if !leave {
                continue;
            }
            let mut five = [cards[0]; 5];
            let mut k = 0;
            for (i, c) in cards.iter().enumerate() {
                let skipped = n > 5 && (i == skip_a || i == skip_b);
                if !skipped {
                    five[k] = *c;
                    k += 1;
                }
            }
            let r = rank5(&five);
            if top.is_none_or(|(t, _)| r > t) {
                top = Some((r, five));
            }
        }
    }
    top.expect("at least one subset")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cards::parse_cards;

    fn r(s: &str) -> Rank {
        best(&parse_cards(s).expect("cards")).0
    }

    #[test]
    fn the_wheel_is_the_lowest_straight() {
        assert_eq!(r("Ah 2c 3d 4s 5h").name(), "straight");
        assert!(r("Ah 2c 3d 4s 5h") < r("2c 3d 4s 5h 6c"));
        assert_eq!(r("Tc Jc Qc Kc Ac").name(), "straight flush");
        assert_eq!(r("Qc Kc Ac 2c 3c").name(), "flush", "no wrap-around");
    }

    #[test]
    fn seven_cards_choose_their_best_five() {
        let (rank, five) = best(&parse_cards("2c 2d 9h 9s Kc Kd 3h").expect("cards"));
        assert_eq!(rank.name(), "two pair");
        assert!(five.iter().any(|c| c.rank() == 11) && five.iter().any(|c| c.rank() == 7));
        assert!(r("2c 2d 9h 9s Kc Kd 3h") > r("2c 2d 9h 9s Qc Qd Ah"));
    }
}
