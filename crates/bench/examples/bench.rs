//! `herald bench` without the rest of Herald: the same scenarios, built from
//! this crate alone (`cargo run --release -p herald-bench --example bench --
//! broadcast ws://127.0.0.1:3000/ ...`). Useful on a load-generator machine
//! and while the server does not build.

use clap::Parser;

/// Herald's load generator.
#[derive(Debug, Parser)]
#[command(name = "herald-bench", version, about)]
struct Cli {
    #[command(flatten)]
    args: herald_bench::BenchArgs,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = herald_bench::run(cli.args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
