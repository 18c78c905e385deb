//! Tables on demand in a cluster (protocol §5f): the seat counts that
//! every node's `play` shares, kept in Redis and changed only by the
//! scripts `play_reserve.lua`, `play_release.lua` and `play_retire.lua`
//! (keys in `play_common.lua`), so that players asking at once on several
//! nodes are counted as one node's lock would count them.
//!
//! The reservation that makes a table registers it in the same script, in
//! the registry `registry.rs` describes (the same keys and id counter as
//! `table_create.lua`): there is no moment at which two nodes could both
//! find every table full and each make one.

use crate::conn::Link;
use crate::lua;
use crate::tables::TableStoreError;
use std::sync::Arc;
use std::time::Duration;

/// What a reservation asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A public table of the key, or a new one.
    Join,
    /// A new private table.
    Private,
    /// The private table of a code.
    Code,
}

/// What a reservation got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    /// A seat counted at `table`; `created` if this reservation made it.
    Seat {
        /// The table.
        table: u64,
        /// Whether it was made now (and registered).
        created: bool,
        /// A private table's code ("" for none).
        code: String,
    },
    /// No open private table has the code.
    UnknownCode,
    /// The private table is full.
    Full,
    /// The cap on tables made by play (this many are open).
    TablesCap(u64),
    /// The user's cap (this many created and open).
    UserCap(u64),
    /// The new private table's code is in use: choose another.
    CodeTaken,
}

/// A new table's parts of a reservation.
#[derive(Debug, Clone, Copy)]
pub struct NewTable<'a> {
    /// Its spec in the registry's form (JSON).
    pub spec: &'a [u8],
    /// Seats.
    pub seats: u32,
    /// The configured tables (ids 1..=N are theirs).
    pub configured: u64,
    /// A private table's code.
    pub code: &'a str,
}

/// The cluster's play counts, for one node.
#[derive(Debug, Clone)]
pub struct PlayStore {
    link: Arc<Link>,
    prefix: String,
}

impl PlayStore {
    /// The store on `link` (whose connections load [`lua::setup`]).
    pub fn new(link: Arc<Link>, prefix: impl Into<String>) -> Self {
        PlayStore {
            link,
            prefix: prefix.into(),
        }
    }

    /// `P:play:count`, the key `play_release.lua` and `play_retire.lua`
    /// declare (they build their other keys from the prefix): in a Redis
    /// Cluster it routes them to the slot of every play key (decision 0021).
    fn count_key(&self) -> String {
        format!("{}:play:count", self.prefix)
    }

    /// Reserves a seat (see `play_reserve.lua`): `key` is the matching key,
    /// or the code for [`Mode::Code`].
    #[allow(clippy::too_many_arguments)]
    pub async fn reserve(
        &self,
        mode: Mode,
        key: &str,
        user: &str,
        table: NewTable<'_>,
        max_tables: u32,
        max_per_user: u32,
    ) -> Result<Reservation, TableStoreError> {
        let p = &self.prefix;
        let (hash, next, version, deleted) = (
            format!("{p}:tables"),
            format!("{p}:tables:next"),
            format!("{p}:tables:version"),
            format!("{p}:tables:deleted"),
        );
        let mode = match mode {
            Mode::Join => "join",
            Mode::Private => "private",
            Mode::Code => "code",
        };
        let (seats, n, max, mine) = (
            table.seats.to_string(),
            table.configured.to_string(),
            max_tables.to_string(),
            max_per_user.to_string(),
        );
        let reply = self
            .link
            .call(&[
                "EVALSHA".as_bytes(),
                lua::PLAY_RESERVE.sha().as_bytes(),
                b"4",
                hash.as_bytes(),
                next.as_bytes(),
                version.as_bytes(),
                deleted.as_bytes(),
                p.as_bytes(),
                mode.as_bytes(),
                key.as_bytes(),
                seats.as_bytes(),
                user.as_bytes(),
                table.spec,
                n.as_bytes(),
                max.as_bytes(),
                mine.as_bytes(),
                table.code.as_bytes(),
            ])
            .await?;
        let items = reply.items();
        let int = |i: usize| items.get(i).and_then(|v| v.int());
        let protocol = || TableStoreError::Protocol {
            table: 0,
            reply: format!("{reply:?}"),
        };
        let (first, second) = (int(0).ok_or_else(protocol)?, int(1).ok_or_else(protocol)?);
        if first > 0 {
            let code = items
                .get(2)
                .and_then(|v| v.bytes())
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            return Ok(Reservation::Seat {
                table: first as u64,
                created: second == 1,
                code,
            });
        }
        let n = int(2).and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
        Ok(match second {
            121 => Reservation::UnknownCode,
            116 => Reservation::Full,
            1071 => Reservation::TablesCap(n),
            1072 => Reservation::UserCap(n),
            1073 => Reservation::CodeTaken,
            _ => return Err(protocol()),
        })
    }

    /// A counted seat of `table` is free again, `seated` players remain
    /// (see `play_release.lua`).
    pub async fn release(
        &self,
        table: u64,
        seated: u32,
        settle: Duration,
    ) -> Result<(), TableStoreError> {
        let (t, s, ms) = (
            table.to_string(),
            seated.to_string(),
            settle.as_millis().to_string(),
        );
        let count_key = self.count_key();
        self.link
            .call(&[
                "EVALSHA",
                lua::PLAY_RELEASE.sha(),
                "1",
                &count_key,
                &self.prefix,
                &t,
                &s,
                &ms,
            ])
            .await?;
        Ok(())
    }

    /// Whether the empty `table` may close (see `play_retire.lua`); if so
    /// it leaves every count.
    pub async fn retire(&self, table: u64, settle: Duration) -> Result<bool, TableStoreError> {
        let (t, ms) = (table.to_string(), settle.as_millis().to_string());
        let count_key = self.count_key();
        let reply = self
            .link
            .call(&[
                "EVALSHA",
                lua::PLAY_RETIRE.sha(),
                "1",
                &count_key,
                &self.prefix,
                &t,
                &ms,
            ])
            .await?;
        Ok(reply.int() == Some(1))
    }
}
