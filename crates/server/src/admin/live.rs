//! `GET /admin/api/live`: the dashboard's live feed, a Server-Sent Events
//! stream (decision 0019) with one `nodes` event a second, each the
//! snapshot of [`super::views::nodes`], followed by the open detail view's
//! fresh data when the page named one when opening the stream ([`View`]:
//! `?channel=`, `?table=`, `?user=` or `?client=`; the page reopens the
//! stream when the open view changes). The stream belongs to its session:
//! it ends when the session does (logout, expiry), when shutdown starts,
//! and after [`MAX_LIFE`] in any case (the browser's `EventSource` opens a
//! new one, checking the cookie again).

use super::session::Sessions;
use super::stats::StatsSource;
use crate::tables::TablesApi;
use bytes::Bytes;
use http_body::Frame;
use serde_json::json;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Longest a stream lasts before the browser is made to reopen it.
pub const MAX_LIFE: Duration = Duration::from_secs(600);

/// The detail view a page has open, sent with every tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    /// A channel's subscribers, presence and history (`channel` events).
    Channel(String),
    /// A game table's public state (`table` events).
    Table(u64),
    /// The connections of a user or a client id (`connections` events).
    Connections {
        /// By user.
        user: Option<String>,
        /// By client id.
        client: Option<u64>,
    },
}

/// One tick's events being gathered (presence, history and a table's
/// state may need a round trip). In a `Mutex` only so that the body is
/// `Sync`; it is reached through `get_mut`, never locked.
type Pending = Mutex<Pin<Box<dyn Future<Output = Bytes> + Send>>>;

/// One tick's events: `nodes`, then the view's.
async fn events(
    source: Arc<StatsSource>,
    cluster: Option<Arc<herald_redis::RedisBroker>>,
    tables: TablesApi,
    view: Option<View>,
) -> Bytes {
    let snapshot = super::views::nodes(&source, cluster.as_deref());
    let mut out = format!("event: nodes\ndata: {snapshot}\n\n");
    let node = &source.node;
    let (name, data) = match view {
        None => return Bytes::from(out),
        Some(View::Channel(name)) => ("channel", super::views::channel(node, &name).await),
        Some(View::Table(id)) => (
            "table",
            match crate::tables::state(id, &tables).await {
                Some(state) => json!({"table": id, "state": state}),
                None => json!({"table": id, "error": "no such table on this node"}),
            },
        ),
        Some(View::Connections { user, client }) => (
            "connections",
            super::views::connections(node, user.as_deref(), client),
        ),
    };
    out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    Bytes::from(out)
}

/// The stream's body.
pub struct Live {
    /// The snapshot each event carries.
    pub source: Arc<StatsSource>,
    /// The cluster's node list (heartbeats), when clustered.
    pub cluster: Option<Arc<herald_redis::RedisBroker>>,
    /// Where the session is checked on each tick.
    pub sessions: Arc<Sessions>,
    /// The session's cookie token.
    pub token: String,
    /// Shutdown.
    pub stopping: CancellationToken,
    /// One tick a second.
    pub tick: tokio::time::Interval,
    /// When the stream ends regardless.
    pub until: tokio::time::Instant,
    /// The first bytes (the `retry` advice) are out.
    pub started: bool,
    /// The stream has ended.
    pub done: bool,
    /// Game tables (the table view).
    pub tables: TablesApi,
    /// The open detail view, if any.
    pub view: Option<View>,
    /// This tick's events, while they are gathered.
    pub pending: Option<Pending>,
}

impl Live {
    /// A stream for the session of `token`, with `view`'s data each tick.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        source: Arc<StatsSource>,
        cluster: Option<Arc<herald_redis::RedisBroker>>,
        sessions: Arc<Sessions>,
        token: String,
        stopping: CancellationToken,
        tables: TablesApi,
        view: Option<View>,
    ) -> Live {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Live {
            source,
            cluster,
            sessions,
            token,
            stopping,
            tick,
            until: tokio::time::Instant::now() + MAX_LIFE,
            started: false,
            done: false,
            tables,
            view,
            pending: None,
        }
    }
}

impl http_body::Body for Live {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if !this.started {
            this.started = true;
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
                b"retry: 2000\n\n",
            )))));
        }
        if this.pending.is_none() {
            if this.tick.poll_tick(cx).is_pending() {
                return Poll::Pending;
            }
            if this.stopping.is_cancelled()
                || tokio::time::Instant::now() >= this.until
                || this.sessions.get(&this.token).is_none()
            {
                this.done = true;
                return Poll::Ready(None);
            }
            let gather = events(
                this.source.clone(),
                this.cluster.clone(),
                this.tables.clone(),
                this.view.clone(),
            );
            this.pending = Some(Mutex::new(Box::pin(gather)));
        }
        let Some(pending) = this.pending.as_mut() else {
            return Poll::Pending;
        };
        let future = pending
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if this.stopping.is_cancelled() {
            this.done = true;
            return Poll::Ready(None);
        }
        match future.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(bytes) => {
                this.pending = None;
                Poll::Ready(Some(Ok(Frame::data(bytes))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}
