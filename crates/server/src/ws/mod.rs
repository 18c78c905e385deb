//! WebSocket transport: Herald's protocol on `/ws`, the shootout protocol on
//! `/shootout`, both over the same lean connection driver.

pub mod driver;
pub mod shootout;

use crate::ws::driver::Handler;
use herald_core::{Client, Node, Session};
use std::sync::Arc;

/// Herald's protocol over WebSocket: frames go straight to the shared session.
impl Handler for Session {
    fn on_message(&mut self, payload: &[u8], binary: bool) {
        Session::on_message(self, payload, binary);
    }

    fn client(&self) -> &Arc<Client> {
        Session::client(self)
    }

    fn node(&self) -> &Arc<Node> {
        Session::node(self)
    }
}
