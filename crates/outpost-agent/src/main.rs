//! `outpost-agent`: see the library documentation (`outpost_agent`) and `--help`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser as _;

use outpost_agent::config::Cli;
use outpost_agent::link::Link;
use outpost_agent::session::{Shared, serve};
use outpost_agent::tools::ServerTools;
use outpost_livekit::{Room, RoomOptions};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "outpost_agent=info,warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let brain = cli.build_brain()?;
    let name = brain.assistant_name();
    let token = cli.token(&name)?;

    // The room server may be starting at the same time (the one-command demo).
    let deadline = Instant::now() + Duration::from_secs(cli.join_timeout_secs);
    let (room, events) = loop {
        match Room::connect(&cli.url, &token, RoomOptions::default()).await {
            Ok(r) => break r,
            Err(e @ outpost_livekit::Error::Unauthorized { .. }) => {
                return Err(e).context("the room server refused the agent's token");
            }
            Err(e) if Instant::now() < deadline => {
                tracing::info!(error = %e, "cannot join yet; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e).with_context(|| format!("joining {}", cli.url)),
        }
    };
    let me = room
        .local_participant()
        .map(|p| p.identity)
        .unwrap_or_default();
    #[allow(clippy::print_stdout)]
    {
        println!("outpost-agent: joined {} as {me} ({name})", cli.url);
    }
    let shared = Arc::new(Shared::new(
        Link::new(room.clone()),
        brain,
        ServerTools::new(),
        cli.agent_config(),
    ));
    tokio::select! {
        r = serve(shared, events) => r.context("serving the room")?,
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted; leaving"),
    }
    let _ = room.leave().await;
    Ok(())
}
