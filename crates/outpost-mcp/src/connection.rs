//! One running session with one MCP server: spawn (stdio) or connect (Streamable HTTP),
//! the `initialize` handshake, tool listing with pagination, and tool calls with progress,
//! a timeout and cancellation. No restarts here: [`crate::McpHost`] supervises.

pub use crate::progress::{MAX_PROGRESS_MESSAGE, PROGRESS_INTERVAL, Progress};
use crate::text::cut;
use crate::tls::ensure_crypto_provider;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::CancelledNotificationParam;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientConfig, ClientRequest, InputRequiredResult,
    ListToolsRequest, PaginatedRequestParams, ProgressToken, ProtocolVersion, RequestId,
    ServerResult,
};
use rmcp::service::{
    ClientLifecycleMode, Peer, PeerRequestOptions, QuitReason, RoleClient, ServiceError,
    serve_client_with_lifecycle_and_ct,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::config::{Resolved, ServerConfig};
use crate::error::{McpError, Result};
use crate::handler::{Handler, Shared};
use crate::input::{self, Retry};
use crate::listen;
use crate::naming;
use crate::process::{self, LogFile, ServerProcess, SpawnSpec};
use crate::requests::{
    DefaultRequests, ElicitationAnswer, ElicitationRequest, Root, ServerRequests,
};
use crate::result::map_call_result;
use crate::sandbox::{self, Reach, ReachState, SandboxOptions};
use crate::secrets::SecretStore;

/// The MCP versions this host speaks (newest first). The host offers the first with
/// `server/discover`; a server that does not know it gets `initialize` with the second,
/// and may answer with an older one from this list.
pub const PROTOCOL_VERSIONS: &[&str] = &[
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];

/// Most `tools/list` pages read from one server (a guard against a server whose cursor
/// never ends).
const MAX_PAGES: usize = 100;

/// Most tools kept from one server's list; the rest are left out (and no more pages read).
pub const MAX_TOOLS: usize = 256;
/// Longest tool name (the server's own) kept; a tool with a longer one is left out.
pub const MAX_NAME_BYTES: usize = 1024;
/// Longest title or description kept, in bytes; a longer one is cut (ending in `…`).
pub const MAX_DESCRIPTION_BYTES: usize = 4 * 1024;
/// Largest input and output schema of one tool, encoded; a tool with larger ones is left
/// out.
pub const MAX_SCHEMA_BYTES: usize = 32 * 1024;
/// Most bytes of names, descriptions and schemas kept from one server's list; the tools
/// past it are left out. With [`MAX_TOOLS`], what one server's list can cost Outpost.
pub const MAX_LIST_BYTES: usize = 1024 * 1024;

/// How a connection is made.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Folder for the stderr logs (`NAME.log`); none: stderr is only kept in memory.
    pub log_dir: Option<PathBuf>,
    /// Largest log file before it is rotated to `NAME.log.1`.
    pub log_limit: u64,
    /// How long spawning/connecting plus `initialize` and the first `tools/list` may take.
    pub start_timeout: Duration,
    /// The roots offered to the server (`roots/list`); a change is announced with
    /// `notifications/roots/list_changed`.
    pub roots: watch::Receiver<Vec<Root>>,
    /// Who answers elicitation and sampling.
    pub requests: Arc<dyn ServerRequests>,
    /// Declare the elicitation capability (form mode). On by default: the handler decides.
    pub elicitation: bool,
    /// Declare URL-mode elicitation too (the server may ask the user to open a URL, for a
    /// sign-in or a payment that must not pass through the client). Off by default: only
    /// a caller that shows the URL to the user and opens it on their say sets it.
    pub elicitation_url: bool,
    /// Declare the sampling capability. Off by default, so servers do not ask; the handler
    /// still answers (refuses, by default) any server that asks anyway.
    pub sampling: bool,
    /// Longest message read from a stdio server (one line of its stdout); a longer one ends
    /// the session with an error. The default, 64 MiB, is the Outpost protocol's largest
    /// message: no tool result could carry more.
    pub max_message_bytes: usize,
    /// The sandbox of stdio servers: the folders the policy lets them reach, the gate that
    /// judges the rest, what the kernel can enforce ([`crate::sandbox`]).
    pub sandbox: SandboxOptions,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            log_dir: None,
            log_limit: 1024 * 1024,
            start_timeout: Duration::from_secs(30),
            roots: watch::channel(Vec::new()).1,
            requests: Arc::new(DefaultRequests),
            elicitation: true,
            elicitation_url: false,
            sampling: false,
            max_message_bytes: 64 * 1024 * 1024,
            sandbox: SandboxOptions::default(),
        }
    }
}

impl ConnectOptions {
    /// Offers this fixed list of roots.
    pub fn with_roots(mut self, roots: Vec<Root>) -> Self {
        self.roots = watch::channel(roots).1;
        self
    }
}

/// What a server claims about a tool (MCP annotations). Claims, never permissions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolHints {
    /// `readOnlyHint`.
    pub read_only: Option<bool>,
    /// `destructiveHint`.
    pub destructive: Option<bool>,
    /// `idempotentHint`.
    pub idempotent: Option<bool>,
    /// `openWorldHint`.
    pub open_world: Option<bool>,
}

/// A tool one server offers.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// The server's name in `mcp.toml`.
    pub server: String,
    /// The tool's name on that server (what `tools/call` takes).
    pub name: String,
    /// Its name in Outpost's catalogue ([`naming::tool_name`]).
    pub outpost_name: String,
    /// Display title, if the server gives one.
    pub title: Option<String>,
    /// Description (empty when the server gives none).
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub input_schema: Value,
    /// JSON Schema of `structuredContent`, if declared.
    pub output_schema: Option<Value>,
    /// The server's claims about the tool.
    pub hints: ToolHints,
}

impl McpTool {
    fn from_wire(server: &str, t: &Value) -> Option<Self> {
        let name = t.get("name")?.as_str()?.to_owned();
        let text = |k: &str| t.get(k).and_then(Value::as_str).map(str::to_owned);
        let hint = |k: &str| {
            t.get("annotations")
                .and_then(|a| a.get(k))
                .and_then(Value::as_bool)
        };
        Some(Self {
            server: server.to_owned(),
            outpost_name: naming::tool_name(server, &name),
            title: text("title").or_else(|| {
                t.get("annotations")
                    .and_then(|a| a.get("title"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }),
            description: text("description").unwrap_or_default(),
            input_schema: t
                .get("inputSchema")
                .cloned()
                .unwrap_or_else(|| json!({"type": "object"})),
            output_schema: t.get("outputSchema").cloned(),
            hints: ToolHints {
                read_only: hint("readOnlyHint"),
                destructive: hint("destructiveHint"),
                idempotent: hint("idempotentHint"),
                open_world: hint("openWorldHint"),
            },
            name,
        })
    }
}

/// `tool` with its title and description cut to size, and what it costs (names,
/// descriptions, schemas); `None` when its name or schemas are too large to keep.
fn bounded(mut tool: McpTool) -> Option<(McpTool, usize)> {
    if tool.name.len() > MAX_NAME_BYTES {
        return None;
    }
    cut(&mut tool.description, MAX_DESCRIPTION_BYTES);
    if let Some(t) = tool.title.as_mut() {
        cut(t, MAX_DESCRIPTION_BYTES);
    }
    let schemas = tool.input_schema.to_string().len()
        + tool
            .output_schema
            .as_ref()
            .map_or(0, |s| s.to_string().len());
    if schemas > MAX_SCHEMA_BYTES {
        return None;
    }
    let size = tool.name.len()
        + tool.outpost_name.len()
        + tool.description.len()
        + tool.title.as_ref().map_or(0, String::len)
        + schemas;
    Some((tool, size))
}

/// How one call runs.
#[derive(Debug, Clone)]
pub struct CallOptions {
    /// Time allowed; then the server is sent `notifications/cancelled` and the call fails
    /// with [`McpError::Timeout`].
    pub timeout: Duration,
    /// Fires to cancel the call (`notifications/cancelled`, then [`McpError::Cancelled`]).
    /// Dropping the call's future cancels it too.
    pub cancel: CancellationToken,
    /// Where progress notifications go: at most one per [`PROGRESS_INTERVAL`], messages
    /// cut to [`MAX_PROGRESS_MESSAGE`] bytes.
    pub progress: Option<mpsc::UnboundedSender<Progress>>,
}

impl CallOptions {
    /// A call with this timeout, no progress sink, cancelled only by dropping it.
    pub fn with_timeout(timeout: Duration) -> Self {
        Self {
            timeout,
            cancel: CancellationToken::new(),
            progress: None,
        }
    }
}

/// A finished call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// The server's `isError`: the tool ran and reports a failure.
    pub is_error: bool,
    /// The result in Outpost's shape ([`crate::result`]).
    pub result: Map<String, Value>,
}

/// A live session with one server. Dropping it stops the server (stdio) or ends the
/// session (HTTP).
#[derive(Debug)]
pub struct Connection {
    server: String,
    peer: Peer<RoleClient>,
    shared: Arc<Shared>,
    closed: watch::Receiver<Option<String>>,
    stop: CancellationToken,
    pid: Option<u32>,
    protocol_version: String,
    server_info: Value,
    process: Mutex<Option<ServerProcessSlot>>,
    /// What answers the server's needs: a `-32042` error's links, the `input_required`
    /// rounds of 2026-07-28 (the same handler rmcp gives the server requests of older
    /// revisions).
    handler: Handler,
    /// What a stdio server may touch (none for an HTTP server).
    reach: Option<Arc<Reach>>,
    /// An HTTP server reached with a stored OAuth sign-in.
    signed_in: bool,
}

/// The JSON-RPC error code of "URL elicitation required" (MCP 2025-11-25).
pub const URL_ELICITATION_REQUIRED: i32 = -32042;

/// One link of a `-32042` error: a URL-mode elicitation the user must complete first.
#[derive(Debug, Clone, PartialEq)]
struct UrlAsk {
    message: String,
    url: String,
    elicitation_id: String,
}

/// A `-32042` error's `data.elicitations` (URL mode only; other entries are ignored).
fn url_asks(data: Option<&Value>) -> Vec<UrlAsk> {
    data.and_then(|d| d.get("elicitations"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(8)
        .filter(|e| e.get("mode").is_none_or(|m| m == "url"))
        .filter_map(|e| {
            let text = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_owned);
            Some(UrlAsk {
                url: text("url")?,
                message: text("message").unwrap_or_default(),
                elicitation_id: text("elicitationId").unwrap_or_default(),
            })
        })
        .collect()
}

/// One `tools/call` round: its outcome, the server's "URL elicitation required", or what
/// it needs before it can answer (2026-07-28).
enum Attempt {
    Done(CallOutcome),
    NeedsUrls { message: String, asks: Vec<UrlAsk> },
    NeedsInput(Box<InputRequiredResult>),
}

/// Holds the child so dropping the connection stops it.
struct ServerProcessSlot(ServerProcess);

impl std::fmt::Debug for ServerProcessSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServerProcess(pid {:?})", self.0.pid)
    }
}

/// How the session starts: the newest revision first, falling back to `initialize` (rmcp
/// waits 10 s for an answer to `server/discover` before it does), unless `mcp.toml` pins a
/// revision.
fn lifecycle(pinned: Option<&str>) -> ClientLifecycleMode {
    let newest = ProtocolVersion::V_2026_07_28;
    match pinned {
        None => ClientLifecycleMode::Auto {
            preferred_versions: vec![newest],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        },
        Some(v) if v == newest.as_str() => ClientLifecycleMode::Discover {
            preferred_versions: vec![newest],
        },
        Some(_) => ClientLifecycleMode::Initialize,
    }
}

fn client_info(opts: &ConnectOptions, version: &str) -> Result<ClientConfig> {
    let mut caps = Map::new();
    caps.insert("roots".into(), json!({"listChanged": true}));
    if opts.elicitation {
        let modes = if opts.elicitation_url {
            json!({"form": {}, "url": {}})
        } else {
            json!({"form": {}})
        };
        caps.insert("elicitation".into(), modes);
    }
    if opts.sampling {
        caps.insert("sampling".into(), json!({}));
    }
    serde_json::from_value(json!({
        "protocolVersion": version,
        "capabilities": caps,
        "clientInfo": {"name": "Outpost", "version": env!("CARGO_PKG_VERSION")},
    }))
    .map_err(|e| McpError::invalid("client info", e.to_string()))
}

fn http_headers(
    server: &str,
    headers: &[(String, String)],
) -> Result<HashMap<http::HeaderName, http::HeaderValue>> {
    headers
        .iter()
        .map(|(k, v)| {
            let name = http::HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
                McpError::invalid(
                    "header",
                    format!("server '{server}': '{k}' is not a header name"),
                )
            })?;
            // The value may be a secret: never quote it.
            let value = http::HeaderValue::from_str(v).map_err(|_| {
                McpError::invalid(
                    "header",
                    format!("server '{server}': the value of '{k}' is not a valid header value"),
                )
            })?;
            Ok((name, value))
        })
        .collect()
}

/// What the server may touch ([`sandbox::plan`], on the blocking pool: it looks at files
/// and the gate may walk folders).
async fn plan_sandbox(
    server: &str,
    command: &str,
    args: &[String],
    env: &[(String, String)],
    cwd: Option<&std::path::Path>,
    settings: &sandbox::Sandbox,
    opts: &ConnectOptions,
) -> Reach {
    let (server, command, args, env) = (
        server.to_owned(),
        command.to_owned(),
        args.to_vec(),
        env.to_vec(),
    );
    let (cwd, settings, sb) = (
        cwd.map(std::path::Path::to_path_buf),
        settings.clone(),
        opts.sandbox.clone(),
    );
    let planned = tokio::task::spawn_blocking(move || {
        let entry = sandbox::Entry {
            server: &server,
            command: &command,
            args: &args,
            env: &env,
            cwd: cwd.as_deref(),
            sandbox: &settings,
        };
        sandbox::plan(&entry, &sb)
    })
    .await;
    planned.unwrap_or_else(|e| Reach {
        state: ReachState::Refused {
            why: format!("planning its sandbox failed: {e}"),
        },
        grants: Vec::new(),
        network: false,
        network_why: String::new(),
        left_out: Vec::new(),
        limits: Vec::new(),
        env: Vec::new(),
    })
}

/// The Landlock ruleset and seccomp filter for a sandboxed server (none when it runs
/// unsandboxed), built on the blocking pool.
#[cfg(target_os = "linux")]
async fn confine(
    server: &str,
    reach: &Arc<Reach>,
    opts: &ConnectOptions,
) -> Result<Option<process::Confinement>> {
    if !reach.sandboxed() {
        return Ok(None);
    }
    let (name, planned, seccomp) = (
        server.to_owned(),
        Arc::clone(reach),
        opts.sandbox.support.seccomp,
    );
    let prepared =
        tokio::task::spawn_blocking(move || sandbox::enforce::prepare(&name, &planned, seccomp))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r);
    match prepared {
        Ok(p) => {
            for path in &p.missing {
                tracing::debug!(server, path = %path.display(), "not in the sandbox: it does not exist");
            }
            Ok(Some(p))
        }
        Err(message) => Err(McpError::Start {
            server: server.to_owned(),
            message: format!("its sandbox could not be set up: {message}"),
        }),
    }
}

#[cfg(not(target_os = "linux"))]
async fn confine(
    _server: &str,
    _reach: &Arc<Reach>,
    _opts: &ConnectOptions,
) -> Result<Option<process::Confinement>> {
    Ok(None)
}

async fn wait_closed(
    closed: &mut watch::Receiver<Option<String>>,
    within: Duration,
) -> Option<String> {
    let _ = tokio::time::timeout(within, closed.wait_for(Option::is_some)).await;
    closed.borrow().clone()
}

/// How an HTTP server's handshake failed.
enum Handshake {
    /// It wants an OAuth sign-in (401), or the stored one no longer works.
    SignIn,
    Failed(String),
}

impl From<rmcp::service::ClientInitializeError> for Handshake {
    fn from(e: rmcp::service::ClientInitializeError) -> Self {
        if e.is_authorization_required() {
            Self::SignIn
        } else {
            Self::Failed(e.to_string())
        }
    }
}

impl Connection {
    /// Starts `config` (named `server`) and completes the handshake.
    pub async fn open(
        server: &str,
        config: &ServerConfig,
        secrets: &Arc<dyn SecretStore>,
        opts: &ConnectOptions,
    ) -> Result<Self> {
        let resolved = config.resolve(server, secrets.as_ref())?;
        let shared = Shared::new();
        let pinned = config.protocol.as_deref();
        let lifecycle = lifecycle(pinned);
        let handler = Handler {
            server: server.to_owned(),
            info: client_info(opts, pinned.unwrap_or(PROTOCOL_VERSIONS[0]))?,
            roots: opts.roots.clone(),
            requests: opts.requests.clone(),
            shared: shared.clone(),
        };
        // The handshake and the first listen acknowledgement share one budget.
        let deadline = tokio::time::Instant::now() + opts.start_timeout;
        let stop = CancellationToken::new();
        // Until the connection exists, giving up (an error, or this future dropped at any
        // await) ends the session it started: a live rmcp service is never left behind.
        let unfinished = stop.clone().drop_guard();
        let start_err = |message: String| McpError::Start {
            server: server.to_owned(),
            message,
        };
        let timeout_ms = opts.start_timeout.as_millis();

        let mut reach = None;
        let mut signed_in = false;
        let (service, process, exit) = match resolved {
            Resolved::Stdio {
                command,
                args,
                env,
                cwd,
                sandbox,
            } => {
                let planned = Arc::new(
                    plan_sandbox(
                        server,
                        &command,
                        &args,
                        &env,
                        cwd.as_deref(),
                        &sandbox,
                        opts,
                    )
                    .await,
                );
                if let ReachState::Refused { why } = &planned.state {
                    return Err(McpError::NoSandbox {
                        server: server.to_owned(),
                        message: why.clone(),
                    });
                }
                let confinement = confine(server, &planned, opts).await?;
                let mut log = match &opts.log_dir {
                    Some(dir) => Some(LogFile::open(dir, server, opts.log_limit)?),
                    None => None,
                };
                if let Some(l) = log.as_mut() {
                    l.write_line(&format!("--- {}", planned.summary()));
                }
                // A sandboxed launcher's cache of its own (sandbox::needs).
                let mut env = env;
                if planned.sandboxed() {
                    env.extend(planned.env.iter().cloned());
                }
                reach = Some(planned);
                let (process, stdout, stdin) = process::spawn(SpawnSpec {
                    server,
                    command: &command,
                    args: &args,
                    env: &env,
                    cwd: cwd.as_deref(),
                    log,
                    max_message: opts.max_message_bytes,
                    sandbox: confinement,
                })?;
                let evidence = process.evidence.clone();
                let said = move || -> String { outpost_sync::lock(&evidence).describe() };
                let mut exit = process.exit.clone();
                let mut exit_seen = process.exit.clone();
                let serve = serve_client_with_lifecycle_and_ct(
                    handler.clone(),
                    (stdout, stdin),
                    lifecycle,
                    stop.clone(),
                );
                let service = tokio::select! {
                    r = tokio::time::timeout_at(deadline, serve) => match r {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            let how = wait_closed(&mut exit, Duration::from_millis(500)).await;
                            let how = how.map(|h| format!(" ({h})")).unwrap_or_default();
                            return Err(start_err(format!("the MCP handshake failed: {e}{how}{}", said())));
                        }
                        Err(_) => {
                            return Err(start_err(format!(
                                "no answer to `server/discover` or `initialize` within {timeout_ms} ms{}",
                                said()
                            )));
                        }
                    },
                    how = async { exit_seen.wait_for(Option::is_some).await.map(|v| v.clone()) } => {
                        let how = how.ok().flatten().unwrap_or_default();
                        // Let the stderr reader catch up with the last lines.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        return Err(start_err(format!("{how} before completing the handshake{}", said())));
                    }
                };
                (service, Some(process), Some(exit))
            }
            Resolved::Http { url, headers } => {
                ensure_crypto_provider();
                let config = StreamableHttpClientTransportConfig::with_uri(url.clone())
                    .custom_headers(http_headers(server, &headers)?);
                // A stored OAuth sign-in (crate::oauth): rmcp adds the bearer token and
                // refreshes it, saving the new one in the keyring.
                let stored = crate::oauth::stored_manager(server, &url, secrets).await?;
                signed_in = stored.is_some();
                let stop_serve = stop.clone();
                let handler = handler.clone();
                let serve = async move {
                    match stored {
                        Some(manager) => {
                            let client = reqwest::Client::builder()
                                .redirect(reqwest::redirect::Policy::none())
                                .build()
                                .map_err(|e| Handshake::Failed(e.to_string()))?;
                            let transport = StreamableHttpClientTransport::with_client(
                                rmcp::transport::auth::AuthClient::new(client, manager),
                                config,
                            );
                            serve_client_with_lifecycle_and_ct(
                                handler, transport, lifecycle, stop_serve,
                            )
                            .await
                            .map_err(Handshake::from)
                        }
                        None => {
                            let transport = StreamableHttpClientTransport::from_config(config);
                            serve_client_with_lifecycle_and_ct(
                                handler, transport, lifecycle, stop_serve,
                            )
                            .await
                            .map_err(Handshake::from)
                        }
                    }
                };
                let service = match tokio::time::timeout_at(deadline, serve).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(Handshake::SignIn)) => {
                        return Err(crate::oauth::sign_in_error(
                            server,
                            signed_in,
                            if signed_in {
                                "the stored sign-in no longer works (expired or revoked)"
                            } else {
                                "it answers 401 and uses OAuth"
                            },
                        ));
                    }
                    Ok(Err(Handshake::Failed(e))) => {
                        return Err(start_err(format!(
                            "the MCP handshake with {url} failed: {e}"
                        )));
                    }
                    Err(_) => {
                        return Err(start_err(format!(
                            "{url} did not answer `server/discover` or `initialize` within {timeout_ms} ms"
                        )));
                    }
                };
                (service, None, None)
            }
        };

        let peer = service.peer().clone();
        let info = peer.peer_info();
        let version = info
            .as_ref()
            .map(|i| i.protocol_version.to_string())
            .unwrap_or_default();
        if !PROTOCOL_VERSIONS.contains(&version.as_str()) {
            stop.cancel();
            return Err(start_err(format!(
                "it speaks MCP version '{version}'; Outpost speaks {}",
                PROTOCOL_VERSIONS.join(", ")
            )));
        }
        let server_info = info
            .as_ref()
            .and_then(|i| i.server_info.as_ref())
            .and_then(|s| serde_json::to_value(s).ok())
            .unwrap_or(Value::Null);
        // 2026-07-28 has no session: no `initialize`, no notifications from the host, and
        // a changed tool list only on a stream the host opens for it (crate::listen).
        let sessionless = info
            .as_ref()
            .is_some_and(|i| !i.protocol_version.has_initialize());
        let announces_tools = info.as_ref().is_some_and(|i| {
            i.capabilities
                .tools
                .as_ref()
                .and_then(|t| t.list_changed)
                .unwrap_or(false)
        });

        // One task notices the end of the session and says why.
        let (closed_tx, closed_rx) = watch::channel(None);
        let evidence = process.as_ref().map(|p| p.evidence.clone());
        tokio::spawn(async move {
            let quit = service.waiting().await;
            let mut reason = match quit {
                Ok(QuitReason::Cancelled) => "stopped by Outpost".to_owned(),
                Ok(QuitReason::Closed) => "the connection closed".to_owned(),
                Ok(_) => "the session ended".to_owned(),
                Err(e) => format!("the session task failed: {e}"),
            };
            if let Some(mut exit) = exit {
                if let Some(how) = wait_closed(&mut exit, Duration::from_secs(2)).await {
                    reason = how;
                }
                if let Some(ev) = evidence {
                    reason.push_str(&outpost_sync::lock(&ev).describe());
                }
            }
            let _ = closed_tx.send(Some(reason));
        });

        if sessionless && announces_tools {
            // Opened before the host's first `tools/list`, so no change falls between.
            let opened = tokio::time::timeout_at(deadline, listen::open(&peer)).await;
            match opened {
                Ok(Ok(first)) => listen::follow(
                    server.to_owned(),
                    peer.clone(),
                    first,
                    shared.clone(),
                    stop.clone(),
                    closed_rx.clone(),
                ),
                Ok(Err(e)) => tracing::warn!(
                    server,
                    "subscriptions/listen refused, so changes of its tool list are not seen: {e}"
                ),
                Err(_) => tracing::warn!(
                    server,
                    "no answer to subscriptions/listen, so changes of its tool list are not seen"
                ),
            }
        }

        // Roots changes reach the server as notifications/roots/list_changed. A server on
        // 2026-07-28 asks for the roots within each call instead (crate::input).
        let mut roots = opts.roots.clone();
        let notify_peer = peer.clone();
        let until = stop.clone();
        tokio::spawn(async move {
            if sessionless {
                return;
            }
            loop {
                tokio::select! {
                    _ = until.cancelled() => break,
                    changed = roots.changed() => {
                        if changed.is_err() || notify_peer.notify_roots_list_changed().await.is_err() {
                            break;
                        }
                    }
                }
            }
        });

        unfinished.disarm();
        Ok(Self {
            server: server.to_owned(),
            pid: process.as_ref().and_then(|p| p.pid),
            process: Mutex::new(process.map(ServerProcessSlot)),
            peer,
            shared,
            closed: closed_rx,
            stop,
            protocol_version: version,
            server_info,
            handler,
            reach,
            signed_in,
        })
    }

    /// What a stdio server may touch (as planned at its start); `None` for HTTP.
    pub fn reach(&self) -> Option<Arc<Reach>> {
        self.reach.clone()
    }

    /// Whether an HTTP server was reached with a stored OAuth sign-in.
    pub fn signed_in(&self) -> bool {
        self.signed_in
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The process id of a stdio server.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The negotiated MCP version.
    pub fn protocol_version(&self) -> &str {
        &self.protocol_version
    }

    /// The server's `serverInfo` (name, version, ...) as sent.
    pub fn server_info(&self) -> &Value {
        &self.server_info
    }

    /// Becomes `Some(reason)` when the session has ended.
    pub fn closed(&self) -> watch::Receiver<Option<String>> {
        self.closed.clone()
    }

    /// Counts `notifications/tools/list_changed` received.
    pub fn tools_changed(&self) -> watch::Receiver<u64> {
        self.shared.tools_changed.subscribe()
    }

    /// Ends the session and stops a stdio server's process group.
    pub fn close(&self) {
        self.stop.cancel();
        if let Some(mut p) = outpost_sync::lock(&self.process).take() {
            p.0.stop();
        }
    }

    fn gone(&self, method: &str, e: ServiceError) -> McpError {
        match e {
            // The token was refused and could not be refreshed (rmcp tried). The session
            // of a Streamable HTTP server outlives such a request, but every request would
            // fail the same way: end it, so the host's restart reports the sign-in.
            other if other.is_authorization_required() => {
                self.close();
                crate::oauth::sign_in_error(
                    &self.server,
                    true,
                    "the stored sign-in no longer works (expired or revoked)",
                )
            }
            ServiceError::McpError(data) => McpError::Protocol {
                server: self.server.clone(),
                method: method.to_owned(),
                message: data.message.into_owned(),
            },
            ServiceError::UnexpectedResponse => McpError::Protocol {
                server: self.server.clone(),
                method: method.to_owned(),
                message: "the answer is not the expected MCP result".into(),
            },
            other => McpError::NotRunning {
                server: self.server.clone(),
                message: self
                    .closed
                    .borrow()
                    .clone()
                    .unwrap_or_else(|| other.to_string()),
            },
        }
    }

    /// Every tool, following `nextCursor` through all pages, within bounds: at most
    /// [`MAX_TOOLS`] tools and [`MAX_LIST_BYTES`] of them, each description cut to
    /// [`MAX_DESCRIPTION_BYTES`], and no tool whose name or schemas are larger than
    /// [`MAX_NAME_BYTES`] / [`MAX_SCHEMA_BYTES`] (what is left out is logged).
    pub async fn list_tools(&self, timeout: Duration) -> Result<Vec<McpTool>> {
        let work = async {
            let mut tools = Vec::new();
            let mut bytes = 0usize;
            let mut left_out = 0usize;
            let mut cursor: Option<String> = None;
            for _ in 0..MAX_PAGES {
                let params = cursor.take().map(|c| {
                    let mut p = PaginatedRequestParams::default();
                    p.cursor = Some(c);
                    p
                });
                let request = ListToolsRequest {
                    method: Default::default(),
                    params,
                    extensions: Default::default(),
                };
                let answer = self
                    .peer
                    .send_request(ClientRequest::ListToolsRequest(request))
                    .await
                    .map_err(|e| self.gone("tools/list", e))?;
                let ServerResult::ListToolsResult(page) = answer else {
                    return Err(self.gone("tools/list", ServiceError::UnexpectedResponse));
                };
                let next = page.next_cursor.clone().filter(|c| !c.is_empty());
                let wire = serde_json::to_value(&page).unwrap_or(Value::Null);
                drop(page);
                for t in wire
                    .get("tools")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    match McpTool::from_wire(&self.server, t) {
                        // The first of two tools with one Outpost name (a hash collision)
                        // is kept: a name always means one tool.
                        Some(tool)
                            if tools.len() < MAX_TOOLS
                                && !tools
                                    .iter()
                                    .any(|t: &McpTool| t.outpost_name == tool.outpost_name) =>
                        {
                            match bounded(tool) {
                                Some((tool, size)) if bytes + size <= MAX_LIST_BYTES => {
                                    bytes += size;
                                    tools.push(tool);
                                }
                                _ => left_out += 1,
                            }
                        }
                        _ => left_out += 1,
                    }
                }
                match next {
                    Some(c) if tools.len() < MAX_TOOLS => cursor = Some(c),
                    _ => {
                        if left_out > 0 {
                            tracing::warn!(
                                server = %self.server,
                                "{left_out} tool(s) left out: past {MAX_TOOLS} tools or \
                                 {MAX_LIST_BYTES} bytes, or a name or schema too large"
                            );
                        }
                        return Ok(tools);
                    }
                }
            }
            Err(McpError::Protocol {
                server: self.server.clone(),
                method: "tools/list".into(),
                message: format!("more than {MAX_PAGES} pages"),
            })
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| McpError::Timeout {
                server: self.server.clone(),
                tool: "tools/list".into(),
                timeout,
            })?
    }

    /// Calls `tool` with `arguments`. Progress goes to `opts.progress`; on timeout, on
    /// `opts.cancel`, or when the returned future is dropped, the server is sent
    /// `notifications/cancelled` for this request.
    ///
    /// A `-32042` "URL elicitation required" answer shows each link to the user through
    /// the elicitation handler (URL mode: nothing opens without the user); when all are
    /// accepted, the call waits for the server's `notifications/elicitation/complete` for
    /// each and is sent once more. Otherwise, or when the server asks again, it fails with
    /// [`McpError::UrlElicitationRequired`]. All of it within `opts.timeout`.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        opts: CallOptions,
    ) -> Result<CallOutcome> {
        let deadline = tokio::time::Instant::now() + opts.timeout;
        let mut retry = Retry::default();
        let mut links_opened = false;
        let mut state_only_rounds = 0;
        for _ in 0..input::MAX_ROUNDS {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self
                .call_once(tool, arguments.clone(), retry, &opts, left)
                .await?
            {
                Attempt::Done(outcome) => return Ok(outcome),
                Attempt::NeedsUrls { message, .. } if links_opened => {
                    return Err(self.url_error(
                        tool,
                        format!("it asked again after the link was opened ({message})"),
                    ));
                }
                Attempt::NeedsUrls { message, asks } => {
                    self.complete_urls(tool, &message, &asks, deadline, &opts)
                        .await?;
                    links_opened = true;
                    retry = Retry::default();
                }
                Attempt::NeedsInput(needs) => {
                    let answered = tokio::select! {
                        a = input::answer(&self.handler, *needs, &mut state_only_rounds) => a,
                        () = tokio::time::sleep_until(deadline) => {
                            return Err(McpError::Timeout {
                                server: self.server.clone(),
                                tool: tool.to_owned(),
                                timeout: opts.timeout,
                            });
                        }
                        () = opts.cancel.cancelled() => {
                            return Err(McpError::Cancelled {
                                server: self.server.clone(),
                                tool: tool.to_owned(),
                            });
                        }
                    };
                    retry = answered.map_err(|message| McpError::Protocol {
                        server: self.server.clone(),
                        method: format!("tools/call {tool}"),
                        message,
                    })?;
                }
            }
        }
        Err(McpError::Protocol {
            server: self.server.clone(),
            method: format!("tools/call {tool}"),
            message: format!(
                "it still asked for input after {} rounds",
                input::MAX_ROUNDS
            ),
        })
    }

    fn url_error(&self, tool: &str, message: String) -> McpError {
        McpError::UrlElicitationRequired {
            server: self.server.clone(),
            tool: tool.to_owned(),
            message,
        }
    }

    /// Shows a `-32042` error's links to the user, then waits for the server to say each
    /// flow finished.
    async fn complete_urls(
        &self,
        tool: &str,
        message: &str,
        asks: &[UrlAsk],
        deadline: tokio::time::Instant,
        opts: &CallOptions,
    ) -> Result<()> {
        let timeout = || McpError::Timeout {
            server: self.server.clone(),
            tool: tool.to_owned(),
            timeout: opts.timeout,
        };
        let cancelled = || McpError::Cancelled {
            server: self.server.clone(),
            tool: tool.to_owned(),
        };
        if asks.is_empty() {
            return Err(self.url_error(tool, format!("{message} (the error names no link)")));
        }
        let mut done = self.shared.elicitations_done.subscribe();
        for ask in asks {
            let request = ElicitationRequest::Url {
                message: ask.message.clone(),
                url: ask.url.clone(),
                elicitation_id: ask.elicitation_id.clone(),
            };
            let answer = tokio::select! {
                a = self.handler.requests.elicit(&self.server, request) => a,
                () = tokio::time::sleep_until(deadline) => return Err(timeout()),
                () = opts.cancel.cancelled() => return Err(cancelled()),
            };
            match answer {
                ElicitationAnswer::Accept(_) => {}
                ElicitationAnswer::Decline => {
                    return Err(self.url_error(tool, "the link was declined".into()));
                }
                ElicitationAnswer::Cancel => {
                    return Err(self.url_error(tool, "the link was dismissed".into()));
                }
            }
        }
        let ids: Vec<&str> = asks
            .iter()
            .map(|a| a.elicitation_id.as_str())
            .filter(|id| !id.is_empty())
            .collect();
        let all_done =
            |d: &std::collections::VecDeque<String>| ids.iter().all(|id| d.iter().any(|x| x == id));
        tokio::select! {
            r = done.wait_for(|d| all_done(d)) => {
                r.map(|_| ()).map_err(|_| McpError::ServerGone {
                    server: self.server.clone(),
                    tool: tool.to_owned(),
                    message: "the connection closed".into(),
                })
            }
            () = tokio::time::sleep_until(deadline) => Err(timeout()),
            () = opts.cancel.cancelled() => Err(cancelled()),
        }
    }

    async fn call_once(
        &self,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        retry: Retry,
        opts: &CallOptions,
        timeout: Duration,
    ) -> Result<Attempt> {
        let method = format!("tools/call {tool}");
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        params.input_responses = retry.input_responses;
        params.request_state = retry.request_state;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let mut handle = self
            .peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| self.gone(&method, e))?;
        let mut guard = InFlight {
            peer: self.peer.clone(),
            shared: self.shared.clone(),
            id: Some(handle.id.clone()),
            token: handle.progress_token.clone(),
        };
        if let Some(sink) = opts.progress.clone() {
            self.shared.route(handle.progress_token.clone(), sink);
        }
        let mut closed = self.closed.clone();
        tokio::select! {
            answer = &mut handle.rx => {
                guard.finished();
                match answer {
                    Ok(Ok(ServerResult::CallToolResult(r))) => {
                        let wire = serde_json::to_value(&r).unwrap_or(Value::Null);
                        let result = map_call_result(&wire);
                        Ok(Attempt::Done(CallOutcome { is_error: r.is_error.unwrap_or(false), result }))
                    }
                    Ok(Ok(ServerResult::InputRequiredResult(needs))) => {
                        Ok(Attempt::NeedsInput(Box::new(needs)))
                    }
                    Ok(Ok(_)) => Err(self.gone(&method, ServiceError::UnexpectedResponse)),
                    Ok(Err(ServiceError::McpError(data))) if data.code.0 == URL_ELICITATION_REQUIRED => {
                        Ok(Attempt::NeedsUrls {
                            asks: url_asks(data.data.as_ref()),
                            message: data.message.into_owned(),
                        })
                    }
                    Ok(Err(ServiceError::McpError(data))) => Err(McpError::Protocol {
                        server: self.server.clone(),
                        method,
                        message: data.message.into_owned(),
                    }),
                    Ok(Err(e)) if e.is_authorization_required() => Err(self.gone(&method, e)),
                    Ok(Err(_)) | Err(_) => {
                        let message = wait_closed(&mut closed, Duration::from_secs(3))
                            .await
                            .unwrap_or_else(|| "the connection closed".into());
                        Err(McpError::ServerGone { server: self.server.clone(), tool: tool.to_owned(), message })
                    }
                }
            }
            _ = tokio::time::sleep(timeout) => {
                guard.cancel("timeout").await;
                Err(McpError::Timeout { server: self.server.clone(), tool: tool.to_owned(), timeout: opts.timeout })
            }
            _ = opts.cancel.cancelled() => {
                guard.cancel("cancelled by the user").await;
                Err(McpError::Cancelled { server: self.server.clone(), tool: tool.to_owned() })
            }
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
}

/// A request in flight: cancels it on the server unless it finished.
struct InFlight {
    peer: Peer<RoleClient>,
    shared: Arc<Shared>,
    id: Option<RequestId>,
    token: ProgressToken,
}

fn cancelled(id: RequestId, reason: &str) -> CancelledNotificationParam {
    CancelledNotificationParam::new(Some(id), Some(reason.to_owned()))
}

impl InFlight {
    fn finished(&mut self) {
        self.id = None;
        self.shared.unroute(&self.token);
    }

    async fn cancel(&mut self, reason: &str) {
        self.shared.unroute(&self.token);
        if let Some(id) = self.id.take() {
            // The session may already be gone; then there is nobody to tell.
            let _ = self.peer.notify_cancelled(cancelled(id, reason)).await;
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.shared.unroute(&self.token);
        if let Some(id) = self.id.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let peer = self.peer.clone();
            rt.spawn(async move {
                let _ = peer
                    .notify_cancelled(cancelled(id, "the caller abandoned the call"))
                    .await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::MemorySecrets;

    #[tokio::test]
    async fn an_https_server_that_is_not_there_is_a_start_error_not_a_panic() {
        // reqwest panics when it builds a TLS client without a crypto provider; the host
        // installs ring first.
        let config = ServerConfig::http("https://127.0.0.1:1/mcp");
        let opts = ConnectOptions {
            start_timeout: Duration::from_secs(10),
            ..ConnectOptions::default()
        };
        let err = Connection::open("tls", &config, &MemorySecrets::shared(), &opts).await;
        assert!(matches!(err, Err(McpError::Start { .. })), "{err:?}");
    }

    #[test]
    fn url_elicitation_data_takes_only_url_entries_and_ignores_junk() {
        assert!(url_asks(None).is_empty());
        for junk in [
            json!(null),
            json!("x"),
            json!({"elicitations": 3}),
            json!({"elicitations": [1, "a", {"mode": "form", "url": "http://h/"}, {"mode": "url"}]}),
        ] {
            assert!(url_asks(Some(&junk)).is_empty(), "{junk}");
        }
        let many: Vec<Value> = (0..20)
            .map(|i| json!({"mode": "url", "url": format!("http://h/{i}"), "elicitationId": i.to_string()}))
            .collect();
        let got = url_asks(Some(&json!({ "elicitations": many })));
        assert_eq!(got.len(), 8, "bounded");
        assert_eq!(
            got[0],
            UrlAsk {
                message: String::new(),
                url: "http://h/0".into(),
                elicitation_id: "0".into()
            }
        );
    }

    #[test]
    fn header_values_are_never_quoted_in_errors() {
        let bad = [("Authorization".to_owned(), "Bearer s3cret\n".to_owned())];
        let err = http_headers("s", &bad)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("Authorization") && !err.contains("s3cret"),
            "{err}"
        );
    }
}
