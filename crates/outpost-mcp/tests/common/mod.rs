//! Shared helpers: where the pinned reference servers are (scripts/setup.sh installs them)
//! and hosts/configs for them.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use outpost_mcp::{
    ConnectOptions, Connection, HostOptions, McpHost, MemorySecrets, Root, ServerConfig,
    ServerRequests,
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

/// Kills a server process when the test ends.
pub struct Child(pub std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// server-everything over Streamable HTTP on 127.0.0.1, once it listens; its URL.
pub async fn everything_http() -> (Child, String) {
    let port = free_port();
    let child = std::process::Command::new("node")
        .arg(everything_js())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let child = Child(child);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the HTTP server did not listen on {port}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

/// The filesystem server on `dir`, which its sandbox lets it write (as `write = [dir]`
/// in mcp.toml would; the policy's allowed folders are the other way).
pub fn filesystem(dir: &Path) -> ServerConfig {
    let mut c = ServerConfig::stdio(
        "node",
        vec![
            node_server("server-filesystem").display().to_string(),
            dir.display().to_string(),
        ],
    );
    sandbox_of(&mut c).write = vec![dir.to_path_buf()];
    c
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
    // It writes its file through a temporary one beside it.
    if let Some(dir) = file.parent() {
        sandbox_of(&mut c).write = vec![dir.to_path_buf()];
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

/// Options whose sandbox takes a server's `read`/`write` folders as they are (no policy).
/// A connection to `config` under `name` with `opts` and no stored secrets; panics when it
/// does not open.
pub async fn open(name: &str, config: &ServerConfig, opts: &ConnectOptions) -> Connection {
    Connection::open(name, config, &MemorySecrets::shared(), opts)
        .await
        .unwrap()
}

pub fn connect_options(log_dir: &Path) -> ConnectOptions {
    ConnectOptions {
        log_dir: Some(log_dir.to_owned()),
        start_timeout: Duration::from_secs(30),
        sandbox: outpost_mcp::SandboxOptions {
            gate: Arc::new(AllowAll),
            ..outpost_mcp::SandboxOptions::default()
        },
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

/// A gate that lets every folder through as given (the policy's splitting is
/// outpost-policy's, tested there and end to end in outpost-core).
#[derive(Debug)]
pub struct AllowAll;

impl outpost_mcp::FolderGate for AllowAll {
    fn split(&self, folders: &[PathBuf]) -> (Vec<PathBuf>, Vec<String>) {
        (folders.to_vec(), Vec::new())
    }

    fn whole(&self, _folder: &Path) -> Option<String> {
        None
    }
}

/// A host whose sandboxed servers may reach `folders` (no roots offered, so a server that
/// honours roots keeps its own folders: only the sandbox holds it).
pub fn sandboxed_host(log_dir: &Path, folders: Vec<PathBuf>) -> McpHost {
    let mut connect = connect_options(log_dir);
    connect.sandbox.folders = folders;
    let mut opts = HostOptions::new(connect, Arc::new(MemorySecrets::default()));
    opts.backoff_initial = Duration::from_millis(200);
    McpHost::new(opts, Vec::new())
}

/// Sets a plain environment variable of a stdio server.
pub fn set_env(config: &mut ServerConfig, key: &str, value: &str) {
    if let outpost_mcp::Transport::Stdio { env, .. } = &mut config.transport {
        env.insert(
            key.into(),
            outpost_mcp::ConfigValue::Plain(value.to_owned()),
        );
    }
}

/// A stdio server's sandbox settings.
pub fn sandbox_of(config: &mut ServerConfig) -> &mut outpost_mcp::Sandbox {
    match &mut config.transport {
        outpost_mcp::Transport::Stdio { sandbox, .. } => sandbox,
        outpost_mcp::Transport::Http { .. } => panic!("not a stdio server"),
    }
}

/// The Python server `tests/mcp/<script>` (test venv) with these arguments.
pub fn python_server(script: &str, args: &[&str]) -> ServerConfig {
    let mut argv = vec![repo().join("tests/mcp").join(script).display().to_string()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    ServerConfig::stdio(python().display().to_string(), argv)
}

/// `tests/mcp/hostile_server.py` with these arguments.
pub fn hostile(args: &[&str]) -> ServerConfig {
    python_server("hostile_server.py", args)
}

pub fn args(v: serde_json::Value) -> Option<serde_json::Map<String, serde_json::Value>> {
    v.as_object().cloned()
}

pub const START: Duration = Duration::from_secs(30);
pub const CALL: Duration = Duration::from_secs(20);
