//! Starting the enabled servers of `mcp.toml` when a session starts: what started, and one
//! sentence per problem for the UI; the session goes on with what runs.

use super::*;

/// How long a connect waits for the enabled servers to start and list their tools before
/// greeting the assistant (as `outpost connect --mcp-wait`, shorter: a person is waiting).
/// A server not ready by then is offered when it is (ToolsChanged, or the next hello).
pub const START_WAIT: Duration = Duration::from_secs(20);

/// What starting the servers gave: the host (none when `mcp.toml` is broken) and one
/// sentence per problem, for the UI.
#[derive(Debug)]
pub struct Started {
    /// The running host, handed to the session.
    pub host: Option<McpHost>,
    /// A bad `mcp.toml`, or a server that did not start within [`START_WAIT`].
    pub problems: Vec<String>,
}

/// Loads `mcp.toml` and starts its enabled servers, waiting up to `wait` for each. Never
/// fails the connect: a problem is reported and the session goes on with what runs.
pub async fn start(
    paths: &Paths,
    roots: Vec<Root>,
    sandbox: outpost_mcp::SandboxOptions,
    requests: Arc<dyn ServerRequests>,
    wait: Duration,
) -> Started {
    let file = config_file(paths);
    let cfg = match McpConfig::load(&file) {
        Ok(c) => c,
        Err(e) => {
            return Started {
                host: None,
                problems: vec![format!(
                    "The tool servers were not started: {} ({e}).",
                    file.display()
                )],
            };
        }
    };
    let enabled = cfg.enabled();
    // A host even with no server enabled: one the user enables or adds in the settings
    // pane during the session starts at once and its tools join the catalogue.
    let connect = ConnectOptions {
        log_dir: Some(config::log_dir(&paths.data_dir)),
        requests,
        // The app shows a URL request in full and opens it only on the user's say.
        elicitation_url: true,
        sandbox,
        ..ConnectOptions::default()
    };
    let host = McpHost::new(
        HostOptions::new(connect, outpost_mcp::secrets::from_env()),
        roots,
    );
    // Only the servers the user confirmed start (outpost_mcp::trust).
    let held = match outpost_mcp::trust::start_confirmed(&host, &cfg, &file, &paths.data_dir) {
        Ok(held) => held,
        Err(e) => {
            return Started {
                host: None,
                problems: vec![format!("The tool servers were not started: {e}")],
            };
        }
    };
    // The servers start at once; one deadline bounds the wait for all of them.
    let deadline = tokio::time::Instant::now() + wait;
    let mut problems: Vec<String> = held
        .iter()
        .map(|name| {
            format!(
                "Tool server '{name}' was added or changed outside Outpost and is not \
                 started: check it in Settings → Tool servers and confirm it there."
            )
        })
        .collect();
    for name in enabled.iter().filter(|n| !held.contains(n)) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if let Err(e) = host.wait_running(name, left).await {
            tracing::warn!(server = %name, error = %e, "MCP server not ready at connect");
            problems.push(format!(
                "Tool server '{name}' is not offering tools yet: {e}"
            ));
        }
    }
    Started {
        host: Some(host),
        problems,
    }
}
