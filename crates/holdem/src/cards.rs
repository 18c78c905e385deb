//! Cards and the deck. A card is one byte: `rank * 4 + suit`, rank 0 (`2`)
//! to 12 (`A`), suit 0..4 (`c d h s`), so evaluation is arithmetic and a
//! deck is 52 bytes.

use std::fmt;

/// Rank characters, lowest first.
const RANKS: &[u8; 13] = b"23456789TJQKA";
/// Suit characters.
const SUITS: &[u8; 4] = b"cdhs";

/// One playing card.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Card(u8);

impl Card {
    /// The card of `rank` (0 = two … 12 = ace) and `suit` (0..4); `None`
    /// when out of range.
    pub fn new(rank: u8, suit: u8) -> Option<Card> {
        (rank < 13 && suit < 4).then_some(Card(rank * 4 + suit))
    }

    /// 0 (two) to 12 (ace).
    pub fn rank(self) -> u8 {
        self.0 / 4
    }

    /// 0 to 3 (clubs, diamonds, hearts, spades).
    pub fn suit(self) -> u8 {
        self.0 % 4
    }

    /// Parses `"Ah"`, `"Tc"`, `"2d"`.
    pub fn parse(s: &str) -> Option<Card> {
        let b = s.as_bytes();
        if b.len() != 2 {
            return None;
        }
        let rank = RANKS.iter().position(|&c| c == b[0].to_ascii_uppercase())?;
        let suit = SUITS.iter().position(|&c| c == b[1].to_ascii_lowercase())?;
        Card::new(rank as u8, suit as u8)
    }

    /// The whole deck, in order.
    pub fn deck() -> Vec<Card> {
        (0..52).map(Card).collect()
    }
}

impl fmt::Display for Card {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}",
            RANKS[self.rank() as usize] as char,
            SUITS[self.suit() as usize] as char
        )
    }
}

impl fmt::Debug for Card {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A card is saved (in a table's durable state) as its two characters.
impl serde::Serialize for Card {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let b = [RANKS[self.rank() as usize], SUITS[self.suit() as usize]];
        s.serialize_str(std::str::from_utf8(&b).map_err(serde::ser::Error::custom)?)
    }
}

impl<'de> serde::Deserialize<'de> for Card {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Card, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Card::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("not a card: {s:?}")))
    }
}

/// Parses a space-separated list of cards (`"Ah Kd 2c"`), for tests.
pub fn parse_cards(s: &str) -> Option<Vec<Card>> {
    s.split_whitespace().map(Card::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_card_prints_and_parses_back() {
        let deck = Card::deck();
        assert_eq!(deck.len(), 52);
        for c in deck {
            assert_eq!(Card::parse(&c.to_string()), Some(c));
        }
        assert_eq!(
            Card::parse("Ah").map(|c| (c.rank(), c.suit())),
            Some((12, 2))
        );
        assert_eq!(
            Card::parse("2c").map(|c| (c.rank(), c.suit())),
            Some((0, 0))
        );
        for bad in ["", "A", "Ahh", "1h", "Ax", "ZZ"] {
            assert_eq!(Card::parse(bad), None, "{bad}");
        }
        let all = serde_json::to_string(&Card::deck()).expect("cards");
        assert!(all.starts_with(r#"["2c","2d","2h","2s","3c""#), "{all}");
        let back: Vec<Card> = serde_json::from_str(&all).expect("cards back");
        assert_eq!(back, Card::deck());
        assert!(serde_json::from_str::<Card>(r#""1x""#).is_err());
        assert!(serde_json::from_str::<Card>("7").is_err());
    }
}
