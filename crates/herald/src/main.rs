//! The `herald` binary: argument parsing and wiring only.
//!
//! `herald serve` runs the server; `herald bench` runs the load generator;
//! `herald token` mints a development token.

use anyhow::Context;
use clap::{Parser, Subcommand};
use herald_server::{ServeArgs, ServerConfig};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Herald: a real-time messaging server and the load generator that proves it.
#[derive(Debug, Parser)]
#[command(name = "herald", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server (in-memory broker, or a cluster node with `--broker
    /// redis://HOST:PORT`; every option also as HERALD_* env or TOML key).
    Serve(Box<ServeArgs>),
    /// Run a load-generation scenario against Herald or a peer server.
    Bench(herald_bench::BenchArgs),
    /// Mint a token (HS256 with the server's secret, or RS256/ES256 with a
    /// private key): `herald token --user U --channel C --ttl 1h`.
    Token(herald_server::auth::mint::TokenArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(*args),
        Command::Bench(args) => herald_bench::run(args).context("bench failed"),
        Command::Token(args) => {
            let token = herald_server::auth::mint::mint(&args, unix_now())?;
            println!("{token}");
            Ok(())
        }
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn init_logs(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// The games `herald serve` can run tables of (`[[tables]]`,
/// `POST /api/tables`): Hold'em. A new game is one more factory here.
fn games() -> Vec<Arc<dyn herald_game::GameFactory>> {
    vec![herald_holdem::factory()]
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let config = ServerConfig::load(args)?;
    init_logs(&config.log_format);
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if config.workers > 0 {
        rt.worker_threads(config.workers);
    }
    let rt = rt
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let addr = listener.local_addr()?;
        let tcp = match config.tcp_listen {
            Some(a) => {
                let l = tokio::net::TcpListener::bind(a)
                    .await
                    .with_context(|| format!("cannot listen on {a}"))?;
                tracing::info!(addr = %l.local_addr()?, "raw TCP transport listening (binary, 4-byte length prefix)");
                Some(l)
            }
            None => None,
        };
        tracing::info!(
            %addr,
            broker = if config.redis.is_some() { "redis" } else { "memory" },
            "herald listening: ws://{addr}/ws (herald.json, herald.binary), ws://{addr}/shootout; metrics at http://{addr}/metrics"
        );
        tracing::info!(auth = %config.auth_summary, "auth: {}", config.auth_summary);
        if config.auth_summary.contains("ALLOWED") || config.auth_summary.contains("OPEN") {
            let exposed = !config.listen.ip().is_loopback()
                || config.tcp_listen.is_some_and(|a| !a.ip().is_loopback());
            if exposed {
                tracing::warn!("listening beyond loopback with anonymous clients or an open API (--insecure or explicit config)");
            }
        }
        let shutdown = CancellationToken::new();
        tokio::spawn(signals(shutdown.clone()));
        herald_server::run(herald_server::Listeners { http: listener, tcp }, config, games(), shutdown).await?;
        tracing::info!("stopped");
        Ok(())
    })
}

/// Cancels `shutdown` on SIGINT or SIGTERM.
async fn signals(shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::warn!("cannot install signal handlers");
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("signal received: shutting down");
    shutdown.cancel();
}
