//! The whole program behind the `outpost-agent` binary, in the library so the workspace
//! tests can build the very same agent (cargo builds only a package's own binaries for
//! its tests).

use std::sync::Arc;
use std::time::{Duration, Instant};

use outpost_livekit::{Room, RoomOptions};

use crate::config::Cli;
use crate::error::Result;
use crate::link::Link;
use crate::session::{Shared, serve};
use crate::tools::ServerTools;

/// Joins the room (retrying for `--join-timeout-secs` while the server starts), calls
/// `joined` with a one-line description, and serves until the room closes or Ctrl-C.
pub async fn run(cli: Cli, joined: impl FnOnce(&str)) -> Result<()> {
    let brain = cli.build_brain()?;
    let name = brain.assistant_name();
    let token = cli.token(&name)?;
    let deadline = Instant::now() + Duration::from_secs(cli.join_timeout_secs);
    let (room, events) = loop {
        match Room::connect(&cli.url, &token, RoomOptions::default()).await {
            Ok(r) => break r,
            Err(e @ outpost_livekit::Error::Unauthorized { .. }) => return Err(e.into()),
            Err(e) if Instant::now() < deadline => {
                tracing::info!(error = %e, "cannot join yet; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    let me = room
        .local_participant()
        .map(|p| p.identity)
        .unwrap_or_default();
    joined(&format!(
        "outpost-agent: joined {} as {me} ({name})",
        cli.url
    ));
    let shared = Arc::new(Shared::new(
        Link::new(room.clone()),
        brain,
        ServerTools::new(),
        cli.agent_config(),
    ));
    let result = tokio::select! {
        r = serve(shared, events) => r,
        _ = tokio::signal::ctrl_c() => {
            tracing::info!("interrupted; leaving");
            Ok(())
        }
        () = outpost_sync::stdin_closed(), if cli.exit_on_stdin_close => {
            tracing::info!("standard input closed; leaving");
            Ok(())
        }
    };
    let _ = room.leave().await;
    result
}
