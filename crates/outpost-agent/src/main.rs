//! `outpost-agent`: see the library documentation (`outpost_agent`) and `--help`.

use anyhow::Context as _;
use clap::Parser as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "outpost_agent=info,warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = outpost_agent::config::Cli::parse();
    let url = cli.url.clone();
    outpost_agent::run::run(cli, |line| {
        #[allow(clippy::print_stdout)]
        {
            println!("{line}");
        }
    })
    .await
    .with_context(|| format!("outpost-agent at {url}"))
}
