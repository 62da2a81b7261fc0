//! `outpost connect`: the headless client.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use outpost_core::{
    AssistantMode, ConnectOptions, Core, CoreError, Credentials, ErrorDirection, LinkState,
    PolicySource, Side, ToolsConfig, UiEvent,
};
use outpost_livekit::{TokenEndpoint, TokenRequest};

use crate::Failure;

/// What `outpost connect`'s exit statuses mean (its `--help` and the README say the same).
const EXIT_STATUSES: &str = "Exit status:\n  \
    0  left the room as asked: end of input, and the answers came or --linger ran out, or a \
    SIGTERM or SIGINT (which leaves at once; a second one stops waiting, with 1)\n  \
    1  could not join (server unreachable, token refused), or the session ended otherwise \
    (link lost for good, the assistant ended it)\n  \
    2  invalid input: arguments, a malformed URL, a missing or invalid policy file";

#[derive(Debug, Args)]
#[command(after_help = EXIT_STATUSES)]
pub(crate) struct ConnectArgs {
    /// LiveKit server URL (ws://, wss://, http(s)://). Required with --token; with
    /// --token-endpoint the endpoint supplies it.
    #[arg(long, required_unless_present = "token_endpoint")]
    url: Option<String>,
    /// Access token for the room.
    #[arg(
        long,
        conflicts_with_all = ["token_endpoint", "api_key"],
        required_unless_present_any = ["token_endpoint", "api_key"]
    )]
    token: Option<String>,
    /// For local development against your own livekit-server: mint the token here from
    /// this API key and its secret ($LIVEKIT_API_SECRET, or --api-secret), for --room and
    /// --identity (with --url). In production the secret stays on a server, behind a token
    /// endpoint.
    #[arg(
        long,
        conflicts_with = "token_endpoint",
        requires_all = ["url", "room", "identity"]
    )]
    api_key: Option<String>,
    /// The API key's secret (see --api-key).
    #[arg(long, env = "LIVEKIT_API_SECRET", hide_env_values = true)]
    api_secret: Option<String>,
    /// The LiveKit Agents agent to dispatch to the room by name (LiveKit's explicit
    /// dispatch): asked of the token endpoint as `room_config.agents`, or put into the
    /// token minted with --api-key. Without it, agents set up for automatic dispatch join.
    #[arg(long, value_name = "NAME")]
    agent_name: Option<String>,
    /// Token endpoint (LiveKit's token-server convention: POST JSON, answers serverUrl and
    /// participantToken).
    #[arg(long)]
    token_endpoint: Option<String>,
    /// Identity to ask the token endpoint for.
    #[arg(long)]
    identity: Option<String>,
    /// Room to ask the token endpoint for (also recorded in the history).
    #[arg(long)]
    room: Option<String>,
    /// The assistant's identity (default: the first agent participant).
    #[arg(long)]
    assistant_identity: Option<String>,
    /// Continue this conversation instead of starting a new one.
    #[arg(long)]
    conversation: Option<String>,
    /// The policy file (TOML) deciding which tools may run. Without it the built-in
    /// defaults apply. Nobody can answer consent questions here, so a call the policy would
    /// ask about is denied.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Where the history lives (default: $OUTPOST_DATA_DIR, else the platform's data dir).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Print one UI event per line as JSON instead of readable text (stdout then holds only
    /// events; notes such as the linger running out go to stderr).
    #[arg(long)]
    json: bool,
    /// After stdin ends, wait up to this many seconds for the assistant to answer the
    /// messages already sent (or still queued), then leave.
    #[arg(long, default_value_t = 30, value_name = "SECS")]
    linger: u64,
    /// Do not start the MCP servers of mcp.toml (config directory, $OUTPOST_CONFIG_DIR):
    /// offer only the built-in tools.
    #[arg(long)]
    no_mcp: bool,
    /// How long to wait, before greeting the assistant, for the enabled MCP servers to
    /// start and list their tools. A server that is not ready by then is offered once it
    /// is (an assistant speaking the Outpost protocol learns it at its next hello).
    #[arg(long, default_value_t = 30, value_name = "SECS")]
    mcp_wait: u64,
}

/// Starts the enabled servers of `mcp.toml` (none: `None`) and waits up to `wait` for each
/// to run or fail; a failure is a note on stderr, never fatal.
async fn start_mcp(
    data_dir: Option<&std::path::Path>,
    roots: outpost_core::McpRoots,
    gate: std::sync::Arc<dyn outpost_mcp::FolderGate>,
    wait: Duration,
) -> Result<Option<outpost_mcp::McpHost>, Failure> {
    use outpost_mcp::config::{self, McpConfig};
    let dir = config::config_dir_from_env().map_err(|e| Failure::Invalid(e.to_string()))?;
    let path = config::config_path(&dir);
    let cfg = McpConfig::load(&path).map_err(|e| Failure::Invalid(e.to_string()))?;
    let enabled = cfg.enabled();
    if enabled.is_empty() {
        return Ok(None);
    }
    let data_dir = outpost_store::data_dir(data_dir)
        .map_err(|e| Failure::Invalid(format!("data directory: {e}")))?;
    // Stdio servers run sandboxed: the allowed folders (as the roots), their own
    // `read`/`write` folders judged by the policy.
    let connect = outpost_mcp::ConnectOptions {
        log_dir: Some(config::log_dir(&data_dir)),
        sandbox: outpost_mcp::SandboxOptions {
            folders: roots.folders,
            gate,
            ..outpost_mcp::SandboxOptions::default()
        },
        ..outpost_mcp::ConnectOptions::default()
    };
    let host = outpost_mcp::McpHost::new(
        outpost_mcp::HostOptions::new(connect, outpost_mcp::secrets::from_env()),
        roots.roots,
    );
    // Only the servers the user confirmed start; one added or changed in mcp.toml
    // outside Outpost waits for `outpost mcp trust`.
    let held = outpost_mcp::trust::start_confirmed(&host, &cfg, &path, &data_dir)
        .map_err(|e| Failure::Invalid(e.to_string()))?;
    for name in &held {
        let _ = writeln!(
            std::io::stderr(),
            "* MCP server '{name}' is not started: {}",
            outpost_mcp::trust::unconfirmed_message(name)
        );
    }
    let enabled: Vec<String> = enabled.into_iter().filter(|n| !held.contains(n)).collect();
    let waits = enabled.iter().map(|n| host.wait_running(n, wait));
    for (name, r) in enabled.iter().zip(futures::future::join_all(waits).await) {
        if let Err(e) = r {
            let _ = writeln!(
                std::io::stderr(),
                "* MCP server '{name}' is not offering tools yet: {}",
                crate::terminal::text(&e.to_string())
            );
        }
    }
    Ok(Some(host))
}

pub(crate) fn run(args: ConnectArgs) -> Result<(), Failure> {
    let mut tools = ToolsConfig::defaults();
    if let Some(p) = &args.policy {
        if !p.is_file() {
            return Err(Failure::Invalid(format!(
                "policy file {} does not exist (write one, or leave out --policy for the \
                 built-in defaults)",
                p.display()
            )));
        }
        tools.policy = PolicySource::File(p.clone());
    }
    let request = TokenRequest {
        room_name: args.room.clone(),
        participant_identity: args.identity.clone(),
        ..Default::default()
    }
    .dispatch_agent(args.agent_name.as_deref().unwrap_or_default());
    let credentials = match (&args.token, &args.token_endpoint, &args.api_key) {
        (Some(token), None, None) => {
            if args.agent_name.is_some() {
                return Err(Failure::Invalid(
                    "--agent-name goes into a token Outpost asks for (--token-endpoint) or mints (--api-key); a --token carries its own dispatch"
                        .into(),
                ));
            }
            Credentials::Token {
                url: args.url.clone().unwrap_or_default(),
                token: token.clone(),
            }
        }
        (None, Some(endpoint), None) => Credentials::Endpoint {
            endpoint: Box::new(TokenEndpoint::new(endpoint.clone())),
            request: Box::new(request),
        },
        (None, None, Some(key)) => {
            let secret = args.api_secret.clone().ok_or_else(|| {
                Failure::Invalid(
                    "--api-key needs its secret: --api-secret or $LIVEKIT_API_SECRET".into(),
                )
            })?;
            let token = outpost_livekit::mint_dev_token(
                key,
                &secret,
                &request,
                Duration::from_secs(6 * 3600),
            )
            .map_err(|e| Failure::Invalid(e.to_string()))?;
            Credentials::Token {
                url: args.url.clone().unwrap_or_default(),
                token,
            }
        }
        _ => {
            return Err(Failure::Invalid(
                "give one of --token (with --url), --token-endpoint, or --api-key (with --url, \
                 --room and --identity)"
                    .into(),
            ));
        }
    };
    let rt = crate::runtime()?;
    rt.block_on(async move {
        let core = Core::open(args.data_dir.clone(), tools).map_err(|e| match e {
            CoreError::Policy { .. } => Failure::Invalid(e.to_string()),
            other => Failure::Other(anyhow::Error::new(other).context("opening Outpost")),
        })?;
        // A policy change made outside Outpost that allows more waits for the user; say
        // so now and whenever it happens during the session.
        let policy_notes = {
            let mut status = core.permissions().policy().status();
            tokio::spawn(async move {
                let mut told: Option<String> = None;
                loop {
                    let now = status.borrow_and_update().unconfirmed.clone();
                    if now.is_some() && now != told {
                        let _ = writeln!(
                            std::io::stderr(),
                            "* {}",
                            now.as_deref().unwrap_or_default()
                        );
                    }
                    told = now;
                    if status.changed().await.is_err() {
                        break;
                    }
                }
            })
        };
        let mut opts = ConnectOptions::new(credentials);
        opts.assistant_identity = args.assistant_identity.clone();
        opts.conversation_id = args.conversation.clone();
        opts.room_name = args.room.clone();
        opts.client_name = "Outpost CLI".into();
        // A policy file is followed as the app follows it: an edit takes effect at the
        // next call, and a change of the allowed folders reaches the MCP servers as roots.
        let _policy_watch = if args.policy.is_some() {
            match core.permissions().policy().watch() {
                Ok(w) => Some(w),
                Err(e) => {
                    let _ = writeln!(
                        std::io::stderr(),
                        "* the policy file is not watched ({e}); edits take effect at the \
                         next connect"
                    );
                    None
                }
            }
        } else {
            None
        };
        let mut follow_roots = None;
        if !args.no_mcp {
            // The policy's allowed folders, split around what it denies, are the servers'
            // roots; what was left out is said.
            let roots = core.mcp_roots().await;
            for why in &roots.left_out {
                let _ = writeln!(
                    std::io::stderr(),
                    "* not offered to MCP servers as a root: {why}"
                );
            }
            opts.mcp = start_mcp(
                args.data_dir.as_deref(),
                roots,
                core.mcp_gate(),
                Duration::from_secs(args.mcp_wait),
            )
            .await?;
            if let Some(host) = opts.mcp.clone() {
                follow_roots = Some(core.follow_mcp_roots(host));
            }
        }
        // Kept to stop the servers when leaving: whatever ends the session, none outlives
        // this process.
        let mcp_host = opts.mcp.clone();
        let (session, mut events) = core.connect(opts).await.map_err(|e| match e {
            // The URL given on the command line cannot work: the user must fix it.
            CoreError::Connect(outpost_livekit::Error::BadUrl { .. }) => {
                Failure::Invalid(format!("connecting: {e}"))
            }
            other => Failure::Other(anyhow::Error::new(other).context("connecting")),
        })?;
        // Caught from here on; before, a signal ends the process and the servers go with
        // it (crates/outpost-mcp/src/process.rs: parent-death signal and watchdog).
        let mut stop_signals = StopSignals::new();
        let session = Arc::new(session);
        // Stdin is read on a plain thread: tokio's stdin needs a feature the workspace
        // does not enable, and a blocking read there is what tokio would do anyway.
        let (line_tx, mut line_rx) = tokio::sync::mpsc::unbounded_channel::<Option<String>>();
        // On EOF the reader hands over the ids of every message it sent.
        let (eof_tx, mut eof_rx) = tokio::sync::watch::channel::<Option<Vec<String>>>(None);
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            let mut buf = String::new();
            loop {
                buf.clear();
                match std::io::BufRead::read_line(&mut stdin.lock(), &mut buf) {
                    Ok(0) | Err(_) => {
                        let _ = line_tx.send(None);
                        break;
                    }
                    Ok(_) => {
                        if line_tx
                            .send(Some(buf.trim_end_matches(['\n', '\r']).to_owned()))
                            .is_err()
                        {
                            break;
                        }
                    }
                }
            }
        });
        let reader = {
            let session = Arc::clone(&session);
            tokio::spawn(async move {
                let mut sent = Vec::new();
                while let Some(line) = line_rx.recv().await {
                    match line {
                        Some(text) if text.trim().is_empty() => {}
                        Some(text) => match session.send_message(text) {
                            Ok(id) => sent.push(id),
                            Err(_) => break,
                        },
                        // EOF (or an unreadable stdin): leave once the answers are in.
                        None => {
                            let _ = eof_tx.send(Some(std::mem::take(&mut sent)));
                            break;
                        }
                    }
                }
            })
        };
        let mut clean = false;
        let mut out = std::io::stdout().lock();
        // After EOF: messages sent (or queued) that no AssistantMessage has answered yet
        // (`inReplyTo`); `answered` remembers answers that came before EOF.
        let mut unanswered = std::collections::HashSet::new();
        let mut answered = std::collections::HashSet::new();
        let mut leave_by: Option<tokio::time::Instant> = None;
        // With --agent-name, a notice once if no agent has joined by then: the server had
        // no worker for that name, or none that would take the job.
        let mut agent_due = args
            .agent_name
            .as_ref()
            .map(|_| tokio::time::Instant::now() + AGENT_WAIT);
        let mut leaving = false;
        let mut forced = false;
        let leave = |session: &Arc<outpost_core::Session>| {
            let session = Arc::clone(session);
            tokio::spawn(async move {
                let _ = session.leave().await;
            });
        };
        loop {
            let far = tokio::time::Instant::now() + Duration::from_secs(86_400);
            let ev = tokio::select! {
                biased;
                name = stop_signals.next() => {
                    // The first SIGTERM or SIGINT leaves the room now (answers are not
                    // waited for); a second one stops waiting for the leave.
                    let _ = writeln!(std::io::stderr(), "* {name}: leaving");
                    if leaving {
                        forced = true;
                        break;
                    }
                    leaving = true;
                    leave(&session);
                    continue;
                }
                ev = events.recv() => match ev {
                    Some(ev) => ev,
                    None => break,
                },
                _ = eof_rx.changed(), if leave_by.is_none() => {
                    let sent = eof_rx.borrow_and_update().clone().unwrap_or_default();
                    unanswered.extend(sent.into_iter().filter(|id| !answered.contains(id)));
                    leave_by = Some(tokio::time::Instant::now() + Duration::from_secs(args.linger));
                    if unanswered.is_empty() {
                        leaving = true;
                        leave(&session);
                    }
                    continue;
                }
                _ = tokio::time::sleep_until(agent_due.unwrap_or(far)), if agent_due.is_some() => {
                    agent_due = None;
                    let _ = writeln!(
                        std::io::stderr(),
                        "* no assistant has joined after {} s: is a LiveKit Agents worker registered under the agent name {:?}, and not too loaded to take the job? (the server's log says \"no servers available\" then)",
                        AGENT_WAIT.as_secs(),
                        crate::terminal::lines(args.agent_name.as_deref().unwrap_or_default())
                    );
                    continue;
                }
                _ = tokio::time::sleep_until(leave_by.unwrap_or(far)), if leave_by.is_some() && !leaving => {
                    let note = format!(
                        "* leaving: {} message(s) still unanswered after {} s",
                        unanswered.len(),
                        args.linger
                    );
                    // With --json, stdout holds only events (one JSON object a line).
                    if args.json {
                        let _ = writeln!(std::io::stderr(), "{note}");
                    } else {
                        let _ = writeln!(out, "{note}");
                    }
                    leaving = true;
                    leave(&session);
                    continue;
                }
            };
            match &ev {
                UiEvent::AssistantMessage {
                    in_reply_to: Some(r),
                    ..
                } => {
                    unanswered.remove(r);
                    answered.insert(r.clone());
                }
                UiEvent::Ended { asked, .. } => clean = *asked,
                UiEvent::AssistantPresence { present: true, .. } => agent_due = None,
                _ => {}
            }
            if leave_by.is_some() && !leaving && unanswered.is_empty() {
                leaving = true;
                leave(&session);
            }
            // Nothing the assistant or a server wrote reaches the terminal raw.
            let line = if args.json {
                crate::terminal::json(&serde_json::to_string(&ev).unwrap_or_default()).into_owned()
            } else {
                match human(&ev) {
                    Some(l) => crate::terminal::lines(&l).into_owned(),
                    None => continue,
                }
            };
            // A closed stdout (e.g. `| head`) must not stop the session from ending cleanly.
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
        reader.abort();
        policy_notes.abort();
        if let Some(task) = follow_roots {
            task.abort();
        }
        if let Some(host) = &mcp_host {
            host.shutdown();
        }
        if forced {
            return Err(Failure::Other(anyhow::anyhow!(
                "stopped by a second signal before the room was left"
            )));
        }
        session.closed().await;
        if clean {
            Ok(())
        } else {
            Err(Failure::Other(anyhow::anyhow!(
                "the session ended without a clean leave"
            )))
        }
    })
}

/// How long `--agent-name` waits for the agent before saying none came.
const AGENT_WAIT: Duration = Duration::from_secs(20);

/// SIGTERM and SIGINT, as requests to leave (none where they cannot be caught).
struct StopSignals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Self {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// The next signal's name; never, when none can be caught.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            async fn one(s: &mut Option<tokio::signal::unix::Signal>) {
                let received = match s {
                    Some(s) => s.recv().await.is_some(),
                    None => false,
                };
                if !received {
                    std::future::pending::<()>().await;
                }
            }
            tokio::select! {
                () = one(&mut self.term) => "SIGTERM",
                () = one(&mut self.int) => "SIGINT",
            }
        }
        #[cfg(not(unix))]
        std::future::pending().await
    }
}

fn side(s: Side) -> &'static str {
    match s {
        Side::Client => "this computer",
        Side::Server => "the assistant",
    }
}

/// A readable line for an event, or None for events the text view skips (deltas: the
/// final message follows).
fn human(ev: &UiEvent) -> Option<String> {
    Some(match ev {
        UiEvent::Connection { state, detail } => {
            let s = match state {
                LinkState::Connected => "connected",
                LinkState::Reconnecting => "reconnecting",
                LinkState::Reconnected => "reconnected",
                LinkState::Disconnected => "disconnected",
            };
            match detail {
                Some(d) => format!("* {s} ({d})"),
                None => format!("* {s}"),
            }
        }
        UiEvent::NetworkPath { path, .. } => format!("* network path: {path}"),
        UiEvent::AssistantPresence { present, identity } => {
            format!(
                "* assistant {identity} {}",
                if *present { "is here" } else { "left" }
            )
        }
        UiEvent::SessionStarted {
            conversation_id,
            assistant_name,
            protocol_version,
            mode,
            ..
        } => match mode {
            AssistantMode::Outpost => format!(
                "* talking to {assistant_name} in conversation {conversation_id} (Outpost \
                 protocol {protocol_version})"
            ),
            AssistantMode::LivekitAgents => format!(
                "* talking to {assistant_name} in conversation {conversation_id} (LiveKit Agents \
                 mode: chat on lk.chat, tools over RPC)"
            ),
        },
        UiEvent::AssistantMode { mode, detail } => {
            format!("* the assistant speaks {} ({detail})", mode.label())
        }
        UiEvent::UserMessage { text, queued, .. } => {
            format!("you: {text}{}", if *queued { " (queued)" } else { "" })
        }
        UiEvent::AssistantDelta { .. } => return None,
        UiEvent::AssistantMessage { text, .. } => format!("assistant: {text}"),
        UiEvent::Status {
            state,
            tool_use_id,
            detail,
        } => {
            let mut s = format!("* assistant is {state}");
            if let Some(t) = tool_use_id {
                s.push_str(&format!(" (tool call {t})"));
            }
            if let Some(d) = detail {
                s.push_str(&format!(": {d}"));
            }
            s
        }
        UiEvent::ToolCallRequested {
            id,
            tool_name,
            server_name,
            execution,
            parameters,
            ..
        } => format!(
            "[tool {id}] {tool_name}{} requested (runs on: {execution}) {}",
            server_name
                .as_ref()
                .map(|s| format!(" (MCP server {s})"))
                .unwrap_or_default(),
            serde_json::Value::Object(parameters.clone())
        ),
        UiEvent::ToolCallProgress {
            id,
            state,
            detail,
            by,
            ..
        } => format!(
            "[tool {id}] {state} on {}{}",
            side(*by),
            detail
                .as_ref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ),
        UiEvent::ToolCallHandedToServer { id, tool_name } => {
            format!("[tool {id}] {tool_name} declined here; the assistant runs it")
        }
        UiEvent::ToolCallFinished {
            id,
            tool_name,
            success,
            result,
            error_code,
            error_message,
            executed_by,
            ..
        } => {
            if *success {
                let size = result
                    .as_ref()
                    .map(|r| serde_json::Value::Object(r.clone()).to_string().len())
                    .unwrap_or(0);
                format!(
                    "[tool {id}] {tool_name} succeeded on {} ({size} bytes of result)",
                    side(*executed_by)
                )
            } else {
                format!(
                    "[tool {id}] {tool_name} failed on {}: {}: {}",
                    side(*executed_by),
                    error_code.as_ref().map_or("error", |c| c.as_str()),
                    error_message.as_deref().unwrap_or("")
                )
            }
        }
        UiEvent::ToolCallCancelRequested {
            id,
            reason,
            effective,
        } => format!(
            "[tool {id}] cancel requested{}{}",
            reason
                .as_ref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default(),
            if *effective {
                ""
            } else {
                " (ignored: not running)"
            }
        ),
        UiEvent::ConsentRequested(p) => format!("? {} asks: {}", p.tool, p.summary),
        UiEvent::ConsentWithdrawn { consent_id, reason } => {
            let why = match reason {
                outpost_core::WithdrawReason::Answered => "answered",
                outpost_core::WithdrawReason::Cancelled => "cancelled",
                outpost_core::WithdrawReason::TimedOut => "timed_out",
            };
            format!("? question {consent_id} withdrawn ({why})")
        }
        UiEvent::ProtocolError {
            direction,
            code,
            message,
            ..
        } => format!(
            "! protocol error {}: {code}: {message}",
            match direction {
                ErrorDirection::Received => "from the assistant",
                ErrorDirection::Sent => "sent to the assistant",
            }
        ),
        UiEvent::Error { message } => format!("! {message}"),
        UiEvent::Ended { reason, .. } => format!("* ended: {reason}"),
        _ => format!("* {}", serde_json::to_string(ev).unwrap_or_default()),
    })
}
