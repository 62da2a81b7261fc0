//! The local demo, in-process: an `outpost-room` server on loopback and the reference
//! assistant (`outpost-agent`, the scripted brain unless `OUTPOST_BRAIN` and friends say
//! otherwise) in this process's runtime. Nothing leaves the machine.

use std::net::SocketAddr;

use outpost_room::{Config, Server};

use crate::error::{DesktopError, Result};

/// The demo's room.
pub const DEMO_ROOM: &str = "outpost-demo";
/// The app's identity in the demo room.
pub const DEMO_IDENTITY: &str = "outpost-app";

/// A running demo. [`Demo::stop`] ends it; dropping it aborts the agent and leaves the
/// server to end with the runtime.
#[derive(Debug)]
pub struct Demo {
    server: Option<Server>,
    agent: tokio::task::JoinHandle<()>,
    /// `ws://127.0.0.1:PORT`.
    pub url: String,
    /// The app's token for [`DEMO_ROOM`].
    pub token: String,
}

impl Demo {
    /// Starts the room server on a free loopback port and the agent in it.
    pub async fn start() -> Result<Self> {
        let addr: SocketAddr = ([127, 0, 0, 1], 0).into();
        let server = Server::bind(addr, Config::default()).await.map_err(|e| {
            DesktopError::Internal(format!("The demo room server did not start: {e}"))
        })?;
        let url = server.url();
        let token = server
            .token(DEMO_ROOM, DEMO_IDENTITY)
            .map_err(|e| DesktopError::Internal(format!("The demo token was refused: {e}")))?;
        let cli = agent_cli(&url)?;
        let agent = tokio::spawn(async move {
            if let Err(e) = outpost_agent::run::run(cli, |_| {}).await {
                tracing::warn!(error = %e, "the demo assistant stopped");
            }
        });
        Ok(Self {
            server: Some(server),
            agent,
            url,
            token,
        })
    }

    /// Stops the agent and the server.
    pub async fn stop(mut self) {
        self.agent.abort();
        if let Some(s) = self.server.take() {
            s.shutdown().await;
        }
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        self.agent.abort();
    }
}

/// The agent's settings for the demo: our server and room, everything else from its
/// defaults and environment (`OUTPOST_BRAIN`, `OUTPOST_MODEL`, ...).
fn agent_cli(url: &str) -> Result<outpost_agent::config::Cli> {
    use clap::Parser as _;
    outpost_agent::config::Cli::try_parse_from(["outpost-agent", "--url", url, "--room", DEMO_ROOM])
        .map_err(|e| DesktopError::Internal(format!("The demo assistant's settings: {e}")))
}
