//! Test support: a whole server on its own runtime thread, on an ephemeral
//! 127.0.0.1 port, that a test can stop gracefully or kill abruptly. Killing
//! drops the runtime: every socket closes at once and nothing says goodbye
//! (not to clients, not to Redis), which is what a crashed node looks like to
//! the rest of a cluster. Used by the cluster tests of this crate and of
//! `herald-bench`. Test servers run Hold'em ([`games`]); a real server runs
//! what the binary chooses.

use crate::{Listeners, ServeArgs, ServerConfig};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The games test servers run tables of: Hold'em, as `herald serve` does.
pub fn games() -> Vec<Arc<dyn herald_game::GameFactory>> {
    vec![herald_holdem::factory()]
}

/// A running server. Dropping it shuts it down gracefully (then, after a few
/// seconds, regardless).
#[derive(Debug)]
pub struct NodeHandle {
    /// HTTP and WebSocket address.
    pub addr: SocketAddr,
    /// Raw TCP transport address.
    pub tcp_addr: SocketAddr,
    shutdown: CancellationToken,
    kill: Option<std::sync::mpsc::Sender<()>>,
}

impl NodeHandle {
    /// Starts a server with `args` (panics if they are invalid or the ports
    /// cannot be bound: this is for tests).
    #[allow(clippy::expect_used)]
    pub fn start(args: ServeArgs) -> NodeHandle {
        let config = ServerConfig::resolve(args).expect("valid test config");
        // `workers` from the arguments, else one: tests run many servers.
        let workers = config.workers.max(1);
        let bind = || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
            l.set_nonblocking(true).expect("nonblocking");
            l
        };
        let (http, tcp) = (bind(), bind());
        let addr = http.local_addr().expect("addr");
        let tcp_addr = tcp.local_addr().expect("addr");
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let (kill, killed) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()
                .expect("runtime");
            let done = spawn_server(rt.handle(), http, tcp, config, token);
            // Until killed, or the server returns after a graceful stop.
            let _ = killed.recv();
            drop(done);
            rt.shutdown_background();
        });
        NodeHandle {
            addr,
            tcp_addr,
            shutdown,
            kill: Some(kill),
        }
    }

    /// `ws://ADDR/ws`.
    pub fn ws_url(&self) -> String {
        format!("ws://{}/ws", self.addr)
    }

    /// Stops the node abruptly, like a crash.
    pub fn kill(&mut self) {
        if let Some(k) = self.kill.take() {
            let _ = k.send(());
        }
    }
}

#[allow(clippy::expect_used)]
fn spawn_server(
    rt: &tokio::runtime::Handle,
    http: std::net::TcpListener,
    tcp: std::net::TcpListener,
    config: ServerConfig,
    token: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    rt.spawn(async move {
        let listeners = Listeners {
            http: tokio::net::TcpListener::from_std(http).expect("listener"),
            tcp: Some(tokio::net::TcpListener::from_std(tcp).expect("listener")),
        };
        if let Err(e) = crate::run(listeners, config, games(), token).await {
            tracing::error!(error = %e, "test server failed");
        }
    })
}

impl Drop for NodeHandle {
    fn drop(&mut self) {
        self.shutdown.cancel();
        let kill = self.kill.take();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(3));
            if let Some(k) = kill {
                let _ = k.send(());
            }
        });
    }
}
