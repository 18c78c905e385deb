//! `GET /admin/api/live`: the Nodes page's live feed, a Server-Sent Events
//! stream (decision 0019) with one `nodes` event a second, each the
//! snapshot of [`super::views::nodes`]. The stream belongs to its session:
//! it ends when the session does (logout, expiry), when shutdown starts,
//! and after [`MAX_LIFE`] in any case (the browser's `EventSource` opens a
//! new one, checking the cookie again).

use super::session::Sessions;
use super::stats::StatsSource;
use bytes::Bytes;
use http_body::Frame;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Longest a stream lasts before the browser is made to reopen it.
pub const MAX_LIFE: Duration = Duration::from_secs(600);

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
}

impl Live {
    /// A stream for the session of `token`.
    pub fn new(
        source: Arc<StatsSource>,
        cluster: Option<Arc<herald_redis::RedisBroker>>,
        sessions: Arc<Sessions>,
        token: String,
        stopping: CancellationToken,
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
        let snapshot = super::views::nodes(&this.source, this.cluster.as_deref());
        let event = format!("event: nodes\ndata: {snapshot}\n\n");
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(event)))))
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}
