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
mod reclaim;

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
    /// Game modules: `herald game test MODULE` plays one headless with its
    /// bots (docs/games.md).
    #[command(subcommand)]
    Game(GameCommand),
}

#[derive(Debug, Subcommand)]
enum GameCommand {
    /// Play a module's tables with its `bot` in every seat on the engine's
    /// fake-clock harness: no socket, no wall clock; saves and restores
    /// each table halfway. Exits non-zero on any fault.
    Test(GameTestArgs),
}

#[derive(Debug, clap::Args)]
struct GameTestArgs {
    /// The module (one ES module file exporting `game` and `bot`).
    module: std::path::PathBuf,
    /// Tables to play.
    #[arg(long, default_value_t = 10)]
    tables: u32,
    /// Seats per table, each with a bot.
    #[arg(long, default_value_t = 2)]
    seats: u32,
    /// Actions per table at most.
    #[arg(long, default_value_t = 2000)]
    actions: u64,
    /// The first table's random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Table parameters, a JSON object (what `created` gets as `params`).
    #[arg(long, default_value = "{}")]
    params: String,
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
        Command::Game(GameCommand::Test(args)) => game_test(&args),
    }
}

fn game_test(a: &GameTestArgs) -> anyhow::Result<()> {
    use herald_script::{bots::Bots, selfplay, Limits, ScriptFactory};
    let params: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&a.params).context("--params must be a JSON object")?;
    let name = a
        .module
        .file_stem()
        .map_or("game".into(), |s| s.to_string_lossy().into_owned());
    let factory = ScriptFactory::load(&name, &a.module, Limits::default(), 1)?;
    let bots = Bots::load(&a.module, Limits::default())?;
    let opts = selfplay::Options {
        tables: a.tables,
        seats: a.seats,
        actions: a.actions,
        seed: a.seed,
        params,
    };
    let reports = selfplay::run(&factory.current(), &bots, &opts);
    let mut failed = 0;
    for (i, r) in reports.iter().enumerate() {
        println!(
            "table {}: {} actions ({} refused), {} timers, {} hands, {} messages, {} unseated, restored: {}{}",
            i + 1,
            r.actions,
            r.refused,
            r.timers,
            r.hands,
            r.messages,
            r.unseated,
            r.restored,
            r.fault.as_ref().map_or(String::new(), |f| format!(", FAULT: {f}")),
        );
        failed += usize::from(r.fault.is_some() || (!r.restored && r.actions >= 2));
    }
    anyhow::ensure!(failed == 0, "{failed} of {} tables failed", reports.len());
    Ok(())
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
    #[allow(unused_mut)]
    let mut config = ServerConfig::load(args)?;
    init_logs(&config.log_format);
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if config.workers > 0 {
        rt.worker_threads(config.workers);
    }
    // Memory freed by a burst of traffic goes back to the OS once the node
    // is quiet (src/reclaim.rs).
    #[cfg(not(target_env = "msvc"))]
    {
        rt.on_thread_park(reclaim::on_park);
        config.reclaim = Some(herald_server::reclaim::Reclaim(Arc::new(reclaim::request)));
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
