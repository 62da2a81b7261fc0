//! Shared helpers: where the pinned reference servers are (scripts/setup.sh installs them)
//! and hosts/configs for them.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use outpost_mcp::{
    ConnectOptions, HostOptions, McpHost, MemorySecrets, Root, ServerConfig, ServerRequests,
};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn node_server(package: &str) -> PathBuf {
    let p = repo()
        .join("tests/mcp/node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup.sh (it runs `npm ci` in tests/mcp)",
        p.display()
    );
    p
}

/// `node .../server-everything/dist/index.js stdio`.
pub fn everything() -> ServerConfig {
    ServerConfig::stdio(
        "node",
        vec![
            node_server("server-everything").display().to_string(),
            "stdio".into(),
        ],
    )
}

pub fn everything_js() -> PathBuf {
    node_server("server-everything")
}

pub fn filesystem(dir: &Path) -> ServerConfig {
    ServerConfig::stdio(
        "node",
        vec![
            node_server("server-filesystem").display().to_string(),
            dir.display().to_string(),
        ],
    )
}

pub fn memory(file: &Path) -> ServerConfig {
    let mut c = ServerConfig::stdio(
        "node",
        vec![node_server("server-memory").display().to_string()],
    );
    if let outpost_mcp::Transport::Stdio { env, .. } = &mut c.transport {
        env.insert(
            "MEMORY_FILE_PATH".into(),
            outpost_mcp::ConfigValue::Plain(file.display().to_string()),
        );
    }
    c
}

/// The test venv's Python (`$OUTPOST_PYTHON`, else the repo's `.venv`).
pub fn python() -> PathBuf {
    let p = std::env::var_os("OUTPOST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv/bin/python"));
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup.sh",
        p.display()
    );
    p
}

pub fn time_server() -> ServerConfig {
    ServerConfig::stdio(
        python().display().to_string(),
        vec![
            "-m".into(),
            "mcp_server_time".into(),
            "--local-timezone".into(),
            "UTC".into(),
        ],
    )
}

pub fn connect_options(log_dir: &Path) -> ConnectOptions {
    ConnectOptions {
        log_dir: Some(log_dir.to_owned()),
        start_timeout: Duration::from_secs(30),
        ..ConnectOptions::default()
    }
}

pub fn host(
    log_dir: &Path,
    roots: Vec<Root>,
    requests: Option<Arc<dyn ServerRequests>>,
) -> McpHost {
    let mut connect = connect_options(log_dir);
    if let Some(r) = requests {
        connect.requests = r;
    }
    let mut opts = HostOptions::new(connect, Arc::new(MemorySecrets::default()));
    opts.backoff_initial = Duration::from_millis(200);
    McpHost::new(opts, roots)
}

pub fn args(v: serde_json::Value) -> Option<serde_json::Map<String, serde_json::Value>> {
    v.as_object().cloned()
}

pub const START: Duration = Duration::from_secs(30);
pub const CALL: Duration = Duration::from_secs(20);
