//! Wildcard subscription routing: which patterns match a concrete channel.
//!
//! # Syntax (NATS style)
//! A channel name is split into *tokens* on `.`: `news.sport.uk` has the tokens
//! `news`, `sport`, `uk`. In a subscription pattern:
//! - `*` as a whole token matches exactly one token, whatever it holds:
//!   `news.*` matches `news.sport` but neither `news` nor `news.sport.uk`;
//! - `>` as the last token matches one or more remaining tokens: `news.>`
//!   matches `news.sport` and `news.sport.uk` but not `news`; `>` alone matches
//!   every channel;
//! - any other token matches only itself.
//!
//! Patterns are checked by [`crate::channel::validate_pattern`] (`*`/`>` only as
//! whole tokens, `>` only last, no empty token). Concrete names never contain
//! `*` or `>`, so [`is_pattern`] tells the two apart. Concrete names may contain
//! empty tokens (`a..b`); a `*` matches an empty token like any other.
//!
//! # Why a token trie
//! The hub must find every pattern matching a channel on each publication. A
//! list of patterns tested one by one costs O(subscriptions) per publish; this
//! trie (the design of nats-server's `sublist.go`) costs O(tokens × wildcard
//! branches): one hash lookup per token for the literal branch, plus the `*`
//! and `>` branches where they exist along the way. Subscriptions to unrelated
//! prefixes are never visited, so the cost per publish does not grow with their
//! number (see `benches/routing.rs`).
//!
//! Each node holds the values whose pattern ends there (`here`) and those whose
//! pattern is the node's prefix followed by `>` (`rest`), as insertion-ordered
//! hash sets: iteration is dense and removal is O(1) even when a popular
//! pattern has a hundred thousand subscribers. Removal prunes nodes left empty,
//! and shrinks tables that churn has left mostly empty, so memory follows the
//! live subscriptions rather than every pattern ever seen.
//!
//! Matching walks the subject with `str::split('.')` and clones of that
//! iterator: no token vector, no allocation per publish.
//!
//! The structure is not synchronised; the hub keeps one behind a lock and
//! removes duplicate deliveries (a client whose several subscriptions match).

use indexmap::IndexSet;
use std::collections::HashMap;
use std::hash::Hash;
use std::str::Split;

/// The token that matches exactly one token.
pub const ONE: &str = "*";
/// The token that, last in a pattern, matches one or more tokens.
pub const REST: &str = ">";

/// True if `name` contains a wildcard character, i.e. is meant as a pattern
/// rather than a concrete channel. Whether it is a *valid* pattern is for
/// [`crate::channel::validate_pattern`] to say.
pub fn is_pattern(name: &str) -> bool {
    name.bytes().any(|b| b == b'*' || b == b'>')
}

/// Tables larger than this are shrunk when churn leaves them three-quarters
/// empty; smaller ones are not worth the reallocation.
const SHRINK_ABOVE: usize = 64;

/// The values of one node.
#[derive(Debug)]
struct Values<T> {
    /// Values whose pattern ends at this node.
    here: IndexSet<T>,
    /// Values whose pattern is this node's prefix followed by `>`.
    rest: IndexSet<T>,
}

/// One trie node: the prefix of tokens leading to it is implicit.
#[derive(Debug)]
struct Node<T> {
    /// Children by literal token.
    literal: HashMap<Box<str>, Node<T>>,
    /// The child for `*`. Boxed: most nodes have none.
    star: Option<Box<Node<T>>>,
    /// Boxed and absent on the (many) intermediate nodes that hold no values,
    /// which keeps a node at 64 bytes.
    values: Option<Box<Values<T>>>,
}

impl<T> Default for Node<T> {
    fn default() -> Self {
        Node {
            literal: HashMap::new(),
            star: None,
            values: None,
        }
    }
}

impl<T: Hash + Eq> Node<T> {
    fn is_empty(&self) -> bool {
        self.literal.is_empty() && self.star.is_none() && self.values.is_none()
    }

    fn values_mut(&mut self) -> &mut Values<T> {
        self.values.get_or_insert_with(|| {
            Box::new(Values {
                here: IndexSet::new(),
                rest: IndexSet::new(),
            })
        })
    }

    /// Removes `value` from this node's `here` (`rest` if `rest`), dropping
    /// the value sets when both are empty.
    fn remove_value(&mut self, value: &T, rest: bool) -> bool {
        let Some(v) = self.values.as_mut() else {
            return false;
        };
        let set = if rest { &mut v.rest } else { &mut v.here };
        let removed = set.swap_remove(value);
        if removed && set.capacity() > SHRINK_ABOVE && set.len() * 4 < set.capacity() {
            set.shrink_to_fit();
        }
        if v.here.is_empty() && v.rest.is_empty() {
            self.values = None;
        }
        removed
    }

    fn remove(&mut self, mut tokens: Split<'_, char>, value: &T) -> bool {
        match tokens.next() {
            None => self.remove_value(value, false),
            Some(REST) => self.remove_value(value, true),
            Some(ONE) => {
                let Some(child) = self.star.as_mut() else {
                    return false;
                };
                let removed = child.remove(tokens, value);
                if child.is_empty() {
                    self.star = None;
                }
                removed
            }
            Some(token) => {
                let Some(child) = self.literal.get_mut(token) else {
                    return false;
                };
                let removed = child.remove(tokens, value);
                if child.is_empty() {
                    self.literal.remove(token);
                    if self.literal.capacity() > SHRINK_ABOVE
                        && self.literal.len() * 4 < self.literal.capacity()
                    {
                        self.literal.shrink_to_fit();
                    }
                }
                removed
            }
        }
    }

    fn for_each_match<'a, F: FnMut(&'a T)>(&'a self, mut tokens: Split<'_, char>, f: &mut F) {
        let Some(token) = tokens.next() else {
            // The subject ends here: patterns ending here match.
            if let Some(v) = &self.values {
                v.here.iter().for_each(&mut *f);
            }
            return;
        };
        // At least one token remains: `prefix.>` matches.
        if let Some(v) = &self.values {
            v.rest.iter().for_each(&mut *f);
        }
        if let Some(child) = self.literal.get(token) {
            child.for_each_match(tokens.clone(), f);
        }
        if let Some(child) = &self.star {
            child.for_each_match(tokens, f);
        }
    }

    #[cfg(test)]
    fn node_count(&self) -> usize {
        1 + self.literal.values().map(Node::node_count).sum::<usize>()
            + self.star.as_ref().map_or(0, |s| s.node_count())
    }
}

/// A set of `(pattern, value)` subscriptions, matched against concrete channel
/// names. A value may be registered under many patterns, and a pattern may hold
/// many values; each pair is held once.
#[derive(Debug)]
pub struct Sublist<T> {
    root: Node<T>,
    len: usize,
}

impl<T> Default for Sublist<T> {
    fn default() -> Self {
        Sublist {
            root: Node::default(),
            len: 0,
        }
    }
}

impl<T: Hash + Eq> Sublist<T> {
    /// An empty sublist.
    pub fn new() -> Sublist<T> {
        Sublist::default()
    }

    /// Registers `value` under `pattern`. Returns false (and drops `value`) if
    /// that pair was already there.
    ///
    /// `pattern` should pass [`crate::channel::validate_pattern`]. The trie
    /// itself only interprets structure: a `>` ends the pattern, and tokens
    /// after it are ignored (by [`Sublist::remove`] alike, so the two stay
    /// consistent).
    pub fn insert(&mut self, pattern: &str, value: T) -> bool {
        let mut node = &mut self.root;
        let mut rest = false;
        for token in pattern.split('.') {
            node = match token {
                REST => {
                    rest = true;
                    break;
                }
                ONE => node.star.get_or_insert_with(Box::default),
                token => node.literal.entry(Box::from(token)).or_default(),
            };
        }
        let values = node.values_mut();
        let added = if rest {
            values.rest.insert(value)
        } else {
            values.here.insert(value)
        };
        if added {
            self.len += 1;
        }
        added
    }

    /// Unregisters `value` from `pattern`, pruning the nodes this leaves empty.
    /// Returns false if the pair was not registered.
    pub fn remove(&mut self, pattern: &str, value: &T) -> bool {
        let removed = self.root.remove(pattern.split('.'), value);
        if removed {
            self.len -= 1;
        }
        removed
    }

    /// Whether `value` is registered under `pattern` (read as
    /// [`Sublist::insert`] reads it).
    pub fn contains(&self, pattern: &str, value: &T) -> bool {
        let mut node = &self.root;
        let mut rest = false;
        for token in pattern.split('.') {
            let next = match token {
                REST => {
                    rest = true;
                    break;
                }
                ONE => node.star.as_deref(),
                token => node.literal.get(token),
            };
            let Some(next) = next else { return false };
            node = next;
        }
        node.values.as_ref().is_some_and(|v| {
            if rest {
                v.rest.contains(value)
            } else {
                v.here.contains(value)
            }
        })
    }

    /// Calls `f` with the value of every subscription whose pattern matches the
    /// concrete channel `subject`. A value registered under several matching
    /// patterns is passed once per pattern; the order is unspecified.
    pub fn for_each_match<'a>(&'a self, subject: &str, mut f: impl FnMut(&'a T)) {
        self.root.for_each_match(subject.split('.'), &mut f);
    }

    /// Number of `(pattern, value)` subscriptions.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no subscriptions.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[cfg(test)]
    fn node_count(&self) -> usize {
        self.root.node_count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::validate_pattern;

    fn matches(pattern: &str, subject: &str) -> bool {
        let mut s = Sublist::new();
        s.insert(pattern, 1u32);
        let mut n = 0;
        s.for_each_match(subject, |_| n += 1);
        assert!(n <= 1);
        n == 1
    }

    #[test]
    fn matching_table() {
        #[rustfmt::skip]
        let table: &[(&str, &str, bool)] = &[
            // literal patterns
            ("news", "news", true),
            ("news", "news.sport", false),
            ("news.sport", "news.sport", true),
            ("news.sport", "news", false),
            ("news.sport", "news.sport.uk", false),
            ("news.sport", "news.sporty", false),
            // `*`: exactly one token
            ("news.*", "news.sport", true),
            ("news.*", "news", false),
            ("news.*", "news.sport.uk", false),
            ("news.*", "other.sport", false),
            ("*", "news", true),
            ("*", "news.sport", false),
            ("*.sport", "news.sport", true),
            ("*.sport", "news.tennis", false),
            ("news.*.uk", "news.sport.uk", true),
            ("news.*.uk", "news.sport.fr", false),
            ("news.*.uk", "news.uk", false),
            ("*.*", "a.b", true),
            ("*.*", "a", false),
            ("*.*", "a.b.c", false),
            // `>`: one or more tokens
            ("news.>", "news.sport", true),
            ("news.>", "news.sport.uk", true),
            ("news.>", "news", false),
            ("news.>", "newsroom.x", false),
            (">", "news", true),
            (">", "news.sport.uk", true),
            ("*.>", "news", false),
            ("*.>", "news.sport", true),
            ("*.sport.>", "news.sport.uk.london", true),
            ("*.sport.>", "news.sport", false),
            ("a.*.c.>", "a.b.c.d", true),
            ("a.*.c.>", "a.b.x.d", false),
            // empty tokens in concrete names are tokens like any other
            ("a.*.b", "a..b", true),
            ("a.>", "a.", true),
            ("*", "", true),
            // other separators are not token boundaries
            ("chat:*", "chat:room", false),
            ("chat:room.*", "chat:room.1", true),
        ];
        assert!(table.len() >= 25);
        for &(pattern, subject, expected) in table {
            assert_eq!(
                matches(pattern, subject),
                expected,
                "{pattern} vs {subject}"
            );
        }
    }

    /// Every pattern of the table is one `validate_pattern` accepts: the table
    /// tests the trie on inputs it will actually get.
    #[test]
    fn table_patterns_are_valid() {
        for p in ["news.*", "*.sport.>", ">", "a.*.c.>", "chat:room.*"] {
            assert!(validate_pattern(p).is_ok(), "{p}");
        }
    }

    fn collect(s: &Sublist<u32>, subject: &str) -> Vec<u32> {
        let mut v = Vec::new();
        s.for_each_match(subject, |x| v.push(*x));
        v.sort_unstable();
        v
    }

    #[test]
    fn contains_reads_patterns_as_insert_does() {
        let mut s = Sublist::new();
        s.insert("a.*.c", 1);
        s.insert("a.>", 2);
        assert!(s.contains("a.*.c", &1));
        assert!(!s.contains("a.*.c", &2));
        assert!(s.contains("a.>", &2));
        assert!(s.contains("a.>.ignored", &2), "tokens after > are ignored");
        assert!(!s.contains("a.*", &1));
        assert!(!s.contains("a.b.c", &1), "a literal is not the star");
        assert!(!s.contains("x.>", &2));
        s.remove("a.>", &2);
        assert!(!s.contains("a.>", &2));
    }

    #[test]
    fn insert_remove_prune() {
        let mut s = Sublist::new();
        assert!(s.is_empty());
        assert_eq!(s.node_count(), 1);
        assert!(s.insert("a.b.c", 1));
        assert!(!s.insert("a.b.c", 1), "duplicate pair");
        assert!(s.insert("a.*.c", 1));
        assert!(s.insert("a.>", 2));
        assert!(s.insert(">", 3));
        assert_eq!(s.len(), 4);
        assert_eq!(collect(&s, "a.b.c"), vec![1, 1, 2, 3]);
        assert_eq!(collect(&s, "a.x.c"), vec![1, 2, 3]);
        assert_eq!(collect(&s, "a"), vec![3]);

        assert!(!s.remove("a.b", &1), "not registered");
        assert!(!s.remove("a.b.c", &2), "other value");
        assert!(!s.remove("x.y", &1), "unknown path");
        assert!(s.remove("a.b.c", &1));
        assert!(!s.remove("a.b.c", &1));
        assert_eq!(collect(&s, "a.b.c"), vec![1, 2, 3]);
        assert!(s.remove("a.*.c", &1));
        assert!(s.remove("a.>", &2));
        assert!(s.remove(">", &3));
        assert!(s.is_empty());
        assert_eq!(s.node_count(), 1, "every node pruned");
        assert_eq!(collect(&s, "a.b.c"), Vec::<u32>::new());
    }

    #[test]
    fn pruning_keeps_shared_prefixes() {
        let mut s = Sublist::new();
        s.insert("a.b.c", 1);
        s.insert("a.b", 2);
        s.insert("a.*.d", 3);
        let before = s.node_count();
        s.insert("a.b.c.d.e", 4);
        assert_eq!(s.node_count(), before + 2);
        assert!(s.remove("a.b.c.d.e", &4));
        assert_eq!(s.node_count(), before);
        assert!(s.remove("a.b.c", &1));
        assert_eq!(collect(&s, "a.b"), vec![2]);
        assert_eq!(collect(&s, "a.x.d"), vec![3]);
    }

    #[test]
    fn churn_does_not_leak_nodes() {
        let mut s = Sublist::new();
        for round in 0..3u32 {
            for i in 0..2_000u32 {
                let p = format!("t{}.r{}.{}", i % 37, i, if i % 5 == 0 { "*" } else { "m" });
                assert!(s.insert(&p, i + round));
                assert!(s.insert(&format!("t{}.>", i % 11), i));
            }
            for i in 0..2_000u32 {
                let p = format!("t{}.r{}.{}", i % 37, i, if i % 5 == 0 { "*" } else { "m" });
                assert!(s.remove(&p, &(i + round)));
                assert!(s.remove(&format!("t{}.>", i % 11), &i));
            }
            assert!(s.is_empty());
            assert_eq!(s.node_count(), 1);
        }
    }

    #[test]
    fn many_values_per_node() {
        let mut s = Sublist::new();
        for i in 0..10_000u32 {
            assert!(s.insert("room.*", i));
            if i % 2 == 0 {
                assert!(s.insert("room.>", i));
            }
        }
        assert_eq!(s.len(), 15_000);
        let mut n = 0;
        s.for_each_match("room.1", |_| n += 1);
        assert_eq!(n, 15_000);
        for i in (0..10_000u32).rev() {
            assert!(s.remove("room.*", &i));
        }
        assert_eq!(collect(&s, "room.1").len(), 5_000);
        assert_eq!(collect(&s, "room.1.2").len(), 5_000);
        for i in (0..10_000u32).step_by(2) {
            assert!(s.remove("room.>", &i));
        }
        assert!(s.is_empty());
        assert_eq!(s.node_count(), 1);
    }

    #[test]
    fn is_pattern_detects_wildcard_characters() {
        assert!(is_pattern("news.*"));
        assert!(is_pattern("news.>"));
        assert!(
            is_pattern("news.*x"),
            "invalid, but still meant as a pattern"
        );
        assert!(!is_pattern("news.sport"));
        assert!(!is_pattern("a..b"));
    }
}
