//! Tables on demand: `play` (protocol §5f), as Colyseus's `joinOrCreate`
//! and Nakama's matchmaker give players a game without an operator.
//!
//! A `play` names a game, a seat count and attributes; the server seats the
//! player at a table `play` made for exactly those, or makes one. What must
//! hold however many ask at once: a seat is given once, and a table is made
//! only when every matching table is full (200 players for a 6-seat game
//! fill exactly 34 tables). So seats of tables made by `play` are *counted*
//! where the choice is made, before the player reaches the table:
//!
//! - a `play` *reserves* a seat (the count goes up) and the player's seat
//!   command goes to the chosen table;
//! - the table gives the count back when a seat it had counted is left, or
//!   when the reserved seat was not taken (the game refused it, the user
//!   already held a seat there);
//! - such tables are seated only through `play` (`sit` only takes back a
//!   seat its user holds), so nothing else changes the count.
//!
//! A reservation whose seat command never reached its table (a full
//! mailbox, a message lost between nodes) would stay counted: every report
//! from the table carries its real number of seated players, and once no
//! reservation was made for [`SETTLE`], the count is set to it.
//!
//! On one node the count is [`Pools`], in the engine's memory, changed
//! under one lock together with the table's creation. In a cluster it is
//! in Redis (herald-game-cluster implements [`Matchmaker`] with one script
//! per step), so that players on every node share it.

use crate::engine::TableSpec;
use bytes::Bytes;
use herald_proto::ErrorCode;
use serde_json::{Map, Value};
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::Instant;

/// The `params` key under which a table made by `play` carries its
/// [`Demand`] (in the registry of a cluster and in its saves); the game
/// never sees it.
pub const DEMAND_PARAM: &str = "_play";

/// After this long without a reservation, a table's report of its seated
/// players replaces the count (see the module's docs).
pub const SETTLE: Duration = Duration::from_secs(10);

/// Length of a private table's code.
pub const CODE_LEN: usize = 6;

/// The characters of a code: no `0`/`O`, `1`/`I`, so a code read aloud
/// or copied by hand is not mistaken.
const CODE_CHARS: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

/// `[play]`: caps and the empty-table timer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlayConfig {
    /// Whether `play` is accepted at all (default true).
    pub enabled: bool,
    /// Tables made by `play` open at once (on the server; in a cluster, in
    /// the cluster). Default 10,000.
    pub max_tables: u32,
    /// Tables made by `play` that one user created and that are still open.
    /// Default 5.
    pub max_tables_per_user: u32,
    /// How long a table made by `play` stays open with nobody seated.
    /// Default 60 s.
    pub empty_close: Duration,
}

impl Default for PlayConfig {
    fn default() -> Self {
        PlayConfig {
            enabled: true,
            max_tables: 10_000,
            max_tables_per_user: 5,
            empty_close: Duration::from_secs(60),
        }
    }
}

/// What a table made by `play` carries (under [`DEMAND_PARAM`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Demand {
    /// The matching key: game, seats and attributes ([`key`]).
    pub key: String,
    /// A private table's code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The user who created it (for the per-user cap).
    pub creator: String,
}

impl Demand {
    /// The demand in a table's parameters, if it was made by `play`.
    pub fn of(params: &Map<String, Value>) -> Option<Demand> {
        serde_json::from_value(params.get(DEMAND_PARAM)?.clone()).ok()
    }
}

/// A `play` command, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// Who asks (the seat's user).
    pub user: String,
    /// What is asked.
    pub kind: AskKind,
}

/// The three forms of `play`.
#[derive(Debug, Clone, PartialEq)]
pub enum AskKind {
    /// A public table of this key, made from `spec` if none has a seat.
    Join {
        /// The matching key.
        key: String,
        /// What a new table is made from (its params carry the demand).
        spec: TableSpec,
    },
    /// A new private table, made from `spec` with `code`.
    Private {
        /// The matching key (private tables are never matched by it).
        key: String,
        /// What the table is made from.
        spec: TableSpec,
    },
    /// The private table of this code.
    Code(String),
}

impl AskKind {
    /// The spec a new table is made from, for the forms that make one.
    pub fn spec(&self) -> Option<&TableSpec> {
        match self {
            AskKind::Join { spec, .. } | AskKind::Private { spec, .. } => Some(spec),
            AskKind::Code(_) => None,
        }
    }
}

/// A seat reserved by `play`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reserved {
    /// The table.
    pub table: u64,
    /// Whether this `play` made it.
    pub created: bool,
    /// A private table's code.
    pub code: Option<String>,
}

/// Why a `play` got no seat.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlayError {
    /// The command is not a valid `play` (103).
    #[error("{0}")]
    Bad(String),
    /// No such game (120).
    #[error("unknown game {0:?}")]
    UnknownGame(String),
    /// No open private table has this code (121).
    #[error("no open private table has code {0:?}")]
    UnknownCode(String),
    /// The private table is full (116).
    #[error("the private table is full")]
    Full,
    /// The server's (cluster's) cap on tables made by `play` (107).
    #[error("this server has {0} tables made by play open, its limit: try again later")]
    ServerCap(u32),
    /// The user's cap (107).
    #[error("you created {0} tables that are still open, the limit: play at one of them")]
    UserCap(u32),
    /// Redis could not be reached (114).
    #[error("cannot reach the cluster's store: {0}; retry")]
    Unavailable(String),
    /// `play` is off on this server (111).
    #[error("play is not enabled on this server")]
    Disabled,
}

impl PlayError {
    /// The protocol's code for it.
    pub fn code(&self) -> ErrorCode {
        match self {
            PlayError::Bad(_) => ErrorCode::BadRequest,
            PlayError::UnknownGame(_) => ErrorCode::UnknownGame,
            PlayError::UnknownCode(_) => ErrorCode::UnknownCode,
            PlayError::Full => ErrorCode::SeatUnavailable,
            PlayError::ServerCap(_) | PlayError::UserCap(_) => ErrorCode::LimitExceeded,
            PlayError::Unavailable(_) => ErrorCode::BrokerUnavailable,
            PlayError::Disabled => ErrorCode::NotAvailable,
        }
    }
}

/// A boxed future, for the object-safe [`Matchmaker`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where a cluster counts the seats of tables made by `play`, shared by
/// every node (herald-game-cluster's Redis scripts).
///
/// Contract:
/// - [`Matchmaker::reserve`] counts one seat, atomically with the choice:
///   for [`AskKind::Join`], at a public table of the key whose count is
///   below its seats, else at a table it makes (registered in the cluster,
///   so that a game node runs it) if the caps allow; for
///   [`AskKind::Private`], at a table it makes; for [`AskKind::Code`], at
///   the code's table if its count is below its seats. It returns once the
///   table runs somewhere in the cluster (a command for it reaches it).
/// - [`Matchmaker::release`] takes one counted seat back (not below 0),
///   or, when no reservation was made for [`SETTLE`], sets the count to
///   `seated`; a public table with room is matched again.
/// - [`Matchmaker::retire`] is asked by an empty table before it closes:
///   true (and the table is never matched or found by code again, and
///   leaves the caps' counts) only if its count is 0, or no reservation
///   was made for [`SETTLE`].
pub trait Matchmaker: Send + Sync + 'static {
    /// Reserves a seat (see the contract).
    fn reserve<'a>(&'a self, ask: &'a Ask) -> BoxFuture<'a, Result<Reserved, PlayError>>;
    /// A counted seat of `table` is free again; `seated` players remain.
    fn release(&self, table: u64, seated: u32);
    /// Whether the empty `table` may close (see the contract).
    fn retire(&self, table: u64) -> BoxFuture<'static, bool>;
}

/// Checks a `play` command and makes its [`Ask`]. `attrs` is JSON-object
/// text (the codec checked that much).
pub fn ask(
    user: &str,
    game: &str,
    seats: Option<u32>,
    attrs: &[u8],
    private: bool,
    code: Option<&str>,
) -> Result<Ask, PlayError> {
    let bad = |m: &str| Err(PlayError::Bad(m.to_string()));
    if let Some(code) = code {
        if !game.is_empty() || private || seats.is_some() {
            return bad("play with a code takes no game, seats or private");
        }
        if code.len() != CODE_LEN || !code.bytes().all(|b| CODE_CHARS.contains(&b)) {
            return Err(PlayError::UnknownCode(code.to_string()));
        }
        return Ok(Ask {
            user: user.to_string(),
            kind: AskKind::Code(code.to_string()),
        });
    }
    if game.is_empty() {
        return bad("play needs a game (or a private table's code)");
    }
    let Some(seats) = seats.filter(|s| (1..=64).contains(s)) else {
        return bad("play needs seats, 1 to 64");
    };
    let attrs: Map<String, Value> = serde_json::from_slice(attrs)
        .map_err(|e| PlayError::Bad(format!("attrs must be a JSON object: {e}")))?;
    if let Some((k, _)) = attrs
        .iter()
        .find(|(_, v)| matches!(v, Value::Array(_) | Value::Object(_) | Value::Null))
    {
        return bad(&format!(
            "attrs values must be strings, numbers or booleans; {k:?} is not"
        ));
    }
    if attrs.contains_key(DEMAND_PARAM) || attrs.contains_key("path") {
        return bad(&format!("attrs may not set {DEMAND_PARAM:?} or \"path\""));
    }
    let timing = match attrs.get("timing") {
        None => "normal".to_string(),
        Some(Value::String(t)) => t.clone(),
        Some(_) => return bad("attrs.timing must be a string"),
    };
    // serde_json's Map is ordered by key: the key is canonical.
    let key = format!("{game}/{seats}/{}", Value::Object(attrs.clone()));
    let mut params = attrs;
    params.remove("timing");
    let demand = Demand {
        key: key.clone(),
        code: private.then(new_code),
        creator: user.to_string(),
    };
    params.insert(
        DEMAND_PARAM.into(),
        serde_json::to_value(&demand).unwrap_or(Value::Null),
    );
    let spec = TableSpec {
        game: game.to_string(),
        seats,
        timing,
        path: None,
        params,
    };
    Ok(Ask {
        user: user.to_string(),
        kind: if private {
            AskKind::Private { key, spec }
        } else {
            AskKind::Join { key, spec }
        },
    })
}

/// A fresh private code (from the OS's random source: codes are the only
/// thing that keeps a private table private, so they must not be guessed).
pub fn new_code() -> String {
    let mut raw = [0u8; CODE_LEN];
    if getrandom::fill(&mut raw).is_err() {
        // No OS randomness: fall back to the clock and address bits; still
        // unique enough for a code, though not secret.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        raw = seed.to_le_bytes()[..CODE_LEN]
            .try_into()
            .unwrap_or([0; CODE_LEN]);
    }
    raw.iter()
        .map(|b| CODE_CHARS[(*b as usize) % CODE_CHARS.len()] as char)
        .collect()
}

/// Gives `spec`'s private table a new code (the one it had is in use).
pub fn recode(spec: &mut TableSpec) {
    if let Some(mut d) = Demand::of(&spec.params) {
        d.code = Some(new_code());
        spec.params.insert(
            DEMAND_PARAM.into(),
            serde_json::to_value(&d).unwrap_or(Value::Null),
        );
    }
}

/// The code of `spec`'s demand (a private table's).
pub fn code_of(spec: &TableSpec) -> Option<String> {
    Demand::of(&spec.params).and_then(|d| d.code)
}

/// One counted table.
#[derive(Debug)]
struct Counted {
    key: String,
    seats: u32,
    n: u32,
    code: Option<String>,
    creator: String,
    last: Instant,
}

/// The seat counts of one node's tables made by `play` (no cluster).
#[derive(Debug, Default)]
pub(crate) struct Pools {
    /// Public tables with room, by key, lowest id first.
    open: HashMap<String, BTreeSet<u64>>,
    tables: HashMap<u64, Counted>,
    codes: HashMap<String, u64>,
    users: HashMap<String, u32>,
}

impl Pools {
    /// A seat at an existing table for `ask`, if one has room (counted).
    /// `Ok(None)`: a table must be made.
    pub(crate) fn pick(&mut self, ask: &Ask, now: Instant) -> Result<Option<Reserved>, PlayError> {
        let table = match &ask.kind {
            AskKind::Private { .. } => return Ok(None),
            AskKind::Code(code) => {
                let t = *self
                    .codes
                    .get(code)
                    .ok_or_else(|| PlayError::UnknownCode(code.clone()))?;
                let c = self.tables.get(&t).ok_or(PlayError::Full)?;
                if c.n >= c.seats {
                    return Err(PlayError::Full);
                }
                t
            }
            AskKind::Join { key, .. } => {
                match self.open.get(key).and_then(|s| s.first().copied()) {
                    Some(t) => t,
                    None => return Ok(None),
                }
            }
        };
        let Some(c) = self.tables.get_mut(&table) else {
            return Ok(None);
        };
        c.n += 1;
        c.last = now;
        let code = c.code.clone();
        if c.n >= c.seats {
            self.close_seats(table);
        }
        Ok(Some(Reserved {
            table,
            created: false,
            code,
        }))
    }

    /// Whether `user` may make one more table.
    pub(crate) fn may_create(&self, user: &str, config: &PlayConfig) -> Result<(), PlayError> {
        if self.tables.len() >= config.max_tables as usize {
            return Err(PlayError::ServerCap(config.max_tables));
        }
        let mine = self.users.get(user).copied().unwrap_or(0);
        if mine >= config.max_tables_per_user {
            return Err(PlayError::UserCap(mine));
        }
        Ok(())
    }

    /// Whether a private code is in use.
    pub(crate) fn code_taken(&self, code: &str) -> bool {
        self.codes.contains_key(code)
    }

    /// `table`, just made for `ask`, with its first seat counted.
    pub(crate) fn add(&mut self, table: u64, spec: &TableSpec, now: Instant) {
        let Some(d) = Demand::of(&spec.params) else {
            return;
        };
        if let Some(code) = &d.code {
            self.codes.insert(code.clone(), table);
        } else if spec.seats > 1 {
            self.open.entry(d.key.clone()).or_default().insert(table);
        }
        *self.users.entry(d.creator.clone()).or_default() += 1;
        self.tables.insert(
            table,
            Counted {
                key: d.key,
                seats: spec.seats,
                n: 1,
                code: d.code,
                creator: d.creator,
                last: now,
            },
        );
    }

    /// A counted seat of `table` is free again (see [`Matchmaker::release`]).
    pub(crate) fn release(&mut self, table: u64, seated: u32, now: Instant) {
        let Some(c) = self.tables.get_mut(&table) else {
            return;
        };
        c.n = if now.duration_since(c.last) >= SETTLE {
            seated
        } else {
            c.n.saturating_sub(1)
        };
        if c.n < c.seats && c.code.is_none() {
            self.open.entry(c.key.clone()).or_default().insert(table);
        }
    }

    /// Whether the empty `table` may close; if so it is forgotten.
    pub(crate) fn retire(&mut self, table: u64, now: Instant) -> bool {
        let Some(c) = self.tables.get(&table) else {
            return true;
        };
        if c.n > 0 && now.duration_since(c.last) < SETTLE {
            return false;
        }
        self.forget(table);
        true
    }

    /// `table` is gone (closed, failed): it leaves every count.
    pub(crate) fn forget(&mut self, table: u64) {
        let Some(c) = self.tables.remove(&table) else {
            return;
        };
        self.close_seats_of(&c.key, table);
        if let Some(code) = &c.code {
            self.codes.remove(code);
        }
        if let Some(n) = self.users.get_mut(&c.creator) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.users.remove(&c.creator);
            }
        }
    }

    fn close_seats(&mut self, table: u64) {
        if let Some(key) = self.tables.get(&table).map(|c| c.key.clone()) {
            self.close_seats_of(&key, table);
        }
    }

    fn close_seats_of(&mut self, key: &str, table: u64) {
        if let Some(set) = self.open.get_mut(key) {
            set.remove(&table);
            if set.is_empty() {
                self.open.remove(key);
            }
        }
    }

    /// Tables counted (for tests and metrics).
    pub(crate) fn len(&self) -> usize {
        self.tables.len()
    }
}

/// The data a `play` carries to its table with the seat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaySeat {
    /// The private table's code, for the reply.
    pub code: Option<String>,
    /// Whether the `play` made the table, for the reply.
    pub created: bool,
}

/// `data` of a `play` (for the game, as in `sit`).
pub type PlayData = Bytes;

#[cfg(test)]
mod tests {
    use super::*;

    fn join(user: &str, attrs: &str) -> Ask {
        ask(user, "holdem", Some(3), attrs.as_bytes(), false, None).unwrap()
    }

    #[test]
    fn keys_are_canonical_and_attrs_checked() {
        let a = join("u", r#"{"b":1,"a":"x"}"#);
        let b = join("v", r#"{ "a" : "x", "b" : 1 }"#);
        let (AskKind::Join { key: ka, spec }, AskKind::Join { key: kb, .. }) = (&a.kind, &b.kind)
        else {
            panic!("not joins");
        };
        assert_eq!(ka, kb);
        assert_eq!(spec.timing, "normal");
        assert!(Demand::of(&spec.params).is_some());
        for bad in [
            r#"{"a":[1]}"#,
            r#"{"a":{}}"#,
            r#"{"a":null}"#,
            r#"{"timing":1}"#,
        ] {
            let e = ask("u", "holdem", Some(3), bad.as_bytes(), false, None).unwrap_err();
            assert_eq!(e.code(), ErrorCode::BadRequest, "{bad}");
        }
        let e = ask("u", "", Some(3), b"{}", false, None).unwrap_err();
        assert_eq!(e.code(), ErrorCode::BadRequest);
        let e = ask("u", "holdem", None, b"{}", false, None).unwrap_err();
        assert_eq!(e.code(), ErrorCode::BadRequest);
        let e = ask("u", "holdem", Some(65), b"{}", false, None).unwrap_err();
        assert_eq!(e.code(), ErrorCode::BadRequest);
        let e = ask("u", "", None, b"{}", false, Some("nope")).unwrap_err();
        assert_eq!(e.code(), ErrorCode::UnknownCode);
        let e = ask("u", "holdem", None, b"{}", false, Some("ABCDEF")).unwrap_err();
        assert_eq!(e.code(), ErrorCode::BadRequest);
    }

    #[test]
    fn codes_use_the_alphabet() {
        let c = new_code();
        assert_eq!(c.len(), CODE_LEN);
        assert!(c.bytes().all(|b| CODE_CHARS.contains(&b)), "{c}");
        assert_ne!(new_code(), new_code());
    }

    #[test]
    fn pools_count_seats_fill_tables_and_retire() {
        let now = Instant::now();
        let config = PlayConfig::default();
        let mut p = Pools::default();
        let a = join("u", "{}");
        assert_eq!(p.pick(&a, now).unwrap(), None);
        p.may_create("u", &config).unwrap();
        p.add(1, a.kind.spec().unwrap(), now);
        // Two more seats at table 1, then it is full.
        for _ in 0..2 {
            assert_eq!(p.pick(&a, now).unwrap().unwrap().table, 1);
        }
        assert_eq!(p.pick(&a, now).unwrap(), None);
        // Another key never matches table 1.
        assert_eq!(p.pick(&join("u", r#"{"x":1}"#), now).unwrap(), None);
        // A seat left: table 1 has room again.
        p.release(1, 2, now);
        assert_eq!(p.pick(&a, now).unwrap().unwrap().table, 1);
        assert!(!p.retire(1, now), "seats counted: not retired");
        // Once settled, the table's own count wins.
        let later = now + SETTLE;
        p.release(1, 0, later);
        assert!(p.retire(1, later));
        assert_eq!(p.len(), 0);
        assert_eq!(p.pick(&a, later).unwrap(), None);
    }

    #[test]
    fn caps_and_private_codes() {
        let now = Instant::now();
        let config = PlayConfig {
            max_tables: 2,
            max_tables_per_user: 1,
            ..PlayConfig::default()
        };
        let mut p = Pools::default();
        let private = ask("u", "holdem", Some(2), b"{}", true, None).unwrap();
        let spec = private.kind.spec().unwrap().clone();
        let code = code_of(&spec).unwrap();
        p.add(7, &spec, now);
        assert_eq!(p.may_create("u", &config), Err(PlayError::UserCap(1)));
        p.may_create("v", &config).unwrap();
        // Private tables are not matched by key.
        assert_eq!(p.pick(&join("v", "{}"), now).unwrap(), None);
        let by_code = ask("v", "", None, b"{}", false, Some(&code)).unwrap();
        let r = p.pick(&by_code, now).unwrap().unwrap();
        assert_eq!((r.table, r.code.as_deref()), (7, Some(code.as_str())));
        assert_eq!(p.pick(&by_code, now), Err(PlayError::Full));
        p.add(8, join("v", "{}").kind.spec().unwrap(), now);
        assert_eq!(p.may_create("w", &config), Err(PlayError::ServerCap(2)));
        p.forget(7);
        assert_eq!(
            p.pick(&by_code, now),
            Err(PlayError::UnknownCode(code.clone()))
        );
        p.may_create("u", &config).unwrap();
    }
}
