//! The Lua scripts Herald runs in Redis, each atomic there. They are loaded
//! (`SCRIPT LOAD`) on every new connection and called by SHA-1 (`EVALSHA`),
//! so a restarted Redis gets them again before any call.

use sha1::{Digest, Sha1};
use std::sync::OnceLock;

/// One script: its text and, computed once, its SHA-1.
#[derive(Debug)]
pub struct Script {
    /// The Lua source.
    pub text: &'static str,
    sha: OnceLock<String>,
}

impl Script {
    const fn new(text: &'static str) -> Script {
        Script {
            text,
            sha: OnceLock::new(),
        }
    }

    /// Hex SHA-1 of the text, as `EVALSHA` wants it.
    pub fn sha(&self) -> &str {
        self.sha.get_or_init(|| {
            Sha1::digest(self.text.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        })
    }
}

/// Publish: offset, stream, live message.
pub static PUBLISH: Script = Script::new(concat!(
    include_str!("lua/epoch_common.lua"),
    include_str!("lua/publish.lua")
));
/// Position and history (and the epoch of a channel first subscribed to).
pub(crate) static READ: Script = Script::new(concat!(
    include_str!("lua/epoch_common.lua"),
    include_str!("lua/read.lua")
));
/// A presence member joins or leaves.
pub(crate) static MEMBER: Script = Script::new(include_str!("lua/member.lua"));
/// A node's heartbeat.
pub(crate) static HEARTBEAT: Script = Script::new(include_str!("lua/heartbeat.lua"));
/// Forgetting a dead node.
pub(crate) static FORGET: Script = Script::new(include_str!("lua/forget.lua"));
/// Forgetting a node's members of one channel (Redis Cluster).
pub(crate) static FORGET_CHANNEL: Script = Script::new(include_str!("lua/forget_channel.lua"));

/// A game table's lease claimed, with a fencing token (decision 0009).
pub(crate) static TABLE_CLAIM: Script = Script::new(include_str!("lua/table_claim.lua"));
/// A node's table leases renewed.
pub(crate) static TABLE_RENEW: Script = Script::new(include_str!("lua/table_renew.lua"));
/// A table's state saved, fenced by its token.
pub(crate) static TABLE_SAVE: Script = Script::new(include_str!("lua/table_save.lua"));
/// Several tables' saves, each fenced on its own (group commit).
pub(crate) static TABLE_SAVE_ALL: Script = Script::new(include_str!("lua/table_save_all.lua"));
/// A table's lease given up.
pub(crate) static TABLE_RELEASE: Script = Script::new(include_str!("lua/table_release.lua"));

/// A table's lobby entry published, fenced, with a cluster sequence number.
pub(crate) static TABLE_LOBBY: Script = Script::new(include_str!("lua/table_lobby.lua"));

/// Tables created over HTTP in a cluster: ids and registry entries.
pub(crate) static TABLE_CREATE: Script = Script::new(include_str!("lua/table_create.lua"));
/// A table deleted in a cluster.
pub(crate) static TABLE_DELETE: Script = Script::new(include_str!("lua/table_delete.lua"));
/// A deleted table's owner gives its lease up for good.
pub(crate) static TABLE_RETIRE: Script = Script::new(include_str!("lua/table_retire.lua"));

/// A seat for a play, counted, with the table's creation if needed.
pub(crate) static PLAY_RESERVE: Script = Script::new(concat!(
    include_str!("lua/play_common.lua"),
    include_str!("lua/play_reserve.lua")
));
/// A seat of a table made by play given back.
pub(crate) static PLAY_RELEASE: Script = Script::new(concat!(
    include_str!("lua/play_common.lua"),
    include_str!("lua/play_release.lua")
));
/// An empty table made by play asks to close.
pub(crate) static PLAY_RETIRE: Script = Script::new(concat!(
    include_str!("lua/play_common.lua"),
    include_str!("lua/play_retire.lua")
));

/// Every script.
pub(crate) fn all() -> [&'static Script; 18] {
    [
        &PUBLISH,
        &READ,
        &MEMBER,
        &HEARTBEAT,
        &FORGET,
        &FORGET_CHANNEL,
        &TABLE_CLAIM,
        &TABLE_RENEW,
        &TABLE_SAVE,
        &TABLE_SAVE_ALL,
        &TABLE_RELEASE,
        &TABLE_LOBBY,
        &TABLE_CREATE,
        &TABLE_DELETE,
        &TABLE_RETIRE,
        &PLAY_RESERVE,
        &PLAY_RELEASE,
        &PLAY_RETIRE,
    ]
}

/// The `SCRIPT LOAD` commands run on each new connection.
pub fn setup() -> Vec<Vec<Vec<u8>>> {
    all()
        .iter()
        .map(|s| {
            vec![
                b"SCRIPT".to_vec(),
                b"LOAD".to_vec(),
                s.text.as_bytes().to_vec(),
            ]
        })
        .collect()
}
