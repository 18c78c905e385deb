//! The `Presence` contract: who is subscribed to a channel, on this node or
//! on every node of a cluster.
//!
//! # Contract
//! - **Members.** A member is one client's exact subscription to a concrete
//!   channel (pattern subscriptions are not members). The session calls
//!   [`Presence::joined`] once when a subscription is attached to the hub and
//!   [`Presence::left`] once when it is released, in that order for any one
//!   (client, channel).
//! - **Answers.** [`Presence::list`] and [`Presence::stats`] describe every
//!   member the implementation knows: this node's ([`LocalPresence`]) or the
//!   cluster's (the Redis broker's). `stats` must stay cheap at any channel
//!   size: it is the O(1) question, `list` the O(members) one.
//! - **Join/leave pushes** for this node's members are queued by the hub
//!   itself; a cluster implementation also hands other nodes' joins and leaves
//!   to [`crate::Hub::announce`] so listeners see the whole cluster.
//! - `joined` and `left` never block and never fail visibly: a cluster
//!   implementation sends them in the background and repairs what a lost
//!   link or a dead node left behind.

use crate::broker::{BrokerError, Completion};
use crate::client::Client;
use crate::hub::Hub;
use herald_proto::ClientInfo;
use std::sync::Arc;

/// Who is subscribed where. See the module docs for the contract.
pub trait Presence: Send + Sync + 'static {
    /// `client` became a member of `channel`.
    fn joined(&self, channel: &str, client: &Client);

    /// `client` stopped being a member of `channel`.
    fn left(&self, channel: &str, client: &Client);

    /// Every member of `channel`.
    fn list(&self, channel: &str) -> Completion<Result<Vec<ClientInfo>, BrokerError>>;

    /// How many members `channel` has, and how many distinct non-empty user
    /// ids among them.
    fn stats(&self, channel: &str) -> Completion<Result<(u64, u64), BrokerError>>;

    /// The channels of `namespace` (`ns:...`) that have at least one member:
    /// the occupied ones.
    fn occupied(&self, namespace: &str) -> Completion<Result<Vec<String>, BrokerError>>;
}

/// Presence of one node: the hub already knows its members.
#[derive(Debug)]
pub struct LocalPresence {
    hub: Arc<Hub>,
}

impl LocalPresence {
    /// Presence answered from `hub`.
    pub fn new(hub: Arc<Hub>) -> LocalPresence {
        LocalPresence { hub }
    }
}

impl Presence for LocalPresence {
    fn joined(&self, _channel: &str, _client: &Client) {}

    fn left(&self, _channel: &str, _client: &Client) {}

    fn list(&self, channel: &str) -> Completion<Result<Vec<ClientInfo>, BrokerError>> {
        Completion::Ready(Ok(self.hub.presence(channel)))
    }

    fn stats(&self, channel: &str) -> Completion<Result<(u64, u64), BrokerError>> {
        Completion::Ready(Ok(self.hub.presence_stats(channel)))
    }

    fn occupied(&self, namespace: &str) -> Completion<Result<Vec<String>, BrokerError>> {
        let prefix = format!("{namespace}:");
        Completion::Ready(Ok(self
            .hub
            .channels()
            .iter()
            .filter(|c| c.starts_with(&prefix))
            .map(|c| c.to_string())
            .collect()))
    }
}
