//! What the dashboard did, counted by action for `/metrics`
//! (`herald_admin_actions_total{action}`). A leaf: `crate::metrics` reads it
//! without importing the handlers.

use std::sync::atomic::{AtomicU64, Ordering};

/// An action taken on the dashboard (or refused at its door).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A login accepted.
    Login = 0,
    /// A login refused: wrong name or password.
    LoginRefused = 1,
    /// A login refused by the attempt limit (429).
    LoginLimited = 2,
    /// A logout.
    Logout = 3,
    /// A publication from the publish form.
    Publish = 4,
    /// A connection disconnected.
    Disconnect = 5,
    /// A game table closed.
    CloseTable = 6,
    /// An action refused for a missing or wrong CSRF token or Origin.
    CsrfRefused = 7,
}

impl Action {
    /// Every action, in label order.
    pub const ALL: [Action; 8] = [
        Action::Login,
        Action::LoginRefused,
        Action::LoginLimited,
        Action::Logout,
        Action::Publish,
        Action::Disconnect,
        Action::CloseTable,
        Action::CsrfRefused,
    ];

    /// Its label value (and its name in the log line).
    pub const fn label(self) -> &'static str {
        match self {
            Action::Login => "login",
            Action::LoginRefused => "login_refused",
            Action::LoginLimited => "login_limited",
            Action::Logout => "logout",
            Action::Publish => "publish",
            Action::Disconnect => "disconnect",
            Action::CloseTable => "close_table",
            Action::CsrfRefused => "csrf_refused",
        }
    }
}

/// One counter per [`Action`].
#[derive(Debug, Default)]
pub struct Actions([AtomicU64; 8]);

impl Actions {
    /// Counts one `action`.
    pub fn count(&self, action: Action) {
        self.0[action as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// How many times `action` happened.
    pub fn get(&self, action: Action) -> u64 {
        self.0[action as usize].load(Ordering::Relaxed)
    }
}
