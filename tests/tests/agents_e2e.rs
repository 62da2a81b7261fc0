//! End to end: Outpost as the frontend of a real LiveKit Agents agent (PyPI
//! `livekit-agents`, `tests/py/lk_agent.py` with a scripted LLM) through each server
//! (`outpost-room` and livekit-server).
//!
//! The agent uses the example's `outpost_tools` module (examples/livekit-agents/) to list
//! Outpost's tools with `outpost.list_tools` and forward its LLM's calls by RPC. Outpost is
//! the real session engine (`outpost_core::Core`), run inside the client namespace of an
//! [`lkclient::Env`] (libwebrtc ignores loopback); the server, the agent and a stranger
//! peer run in the server namespace. Needs root, iproute2 and `.venv-agents` (see
//! `outpost_tests::python::agents_python`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use outpost_core::store::{ConversationId, Outcome, Role, TimelineItem, ToolCallState};
use outpost_core::{
    AssistantMode, ConnectOptions, Core, Credentials, Decision, PolicySource, SessionEvents,
    ToolsConfig, UiEvent,
};
use outpost_tests::lkclient::Env;
use outpost_tests::proc::Proc;
use outpost_tests::python;
use outpost_tests::server::ServerKind;
use serde_json::Value;

const ROOM_BIN: &str = env!("CARGO_BIN_EXE_room_server");
const ROOM: &str = "agents-e2e";
const OUTPOST: &str = "app";
/// Generous: two Python processes with libwebrtc and the Rust client share 2 busy cores.
const WAIT: Duration = Duration::from_secs(90);
const HELLO: &str = "Hello from the scripted agent.";
const BIG_LAST_LINE: &str = "the end of the big file";

fn token(identity: &str, kind: &str) -> String {
    outpost_tests::lkclient::dev_token(ROOM, identity, kind).unwrap()
}

/// The agent, or with `--stranger` the plain participant, in the server namespace.
fn agent_command(env: &Env, identity: &str, kind: &str, extra: &[&str]) -> std::process::Command {
    let py = python::agents_python().unwrap();
    let mut cmd = env.pair.server_command(&py);
    cmd.arg(python::scripts_dir().join("lk_agent.py"))
        .args(extra)
        .current_dir(python::scripts_dir())
        .env("LK_URL", &env.server.url)
        .env("LK_TOKEN", token(identity, kind))
        .env("OUTPOST_IDENTITY", OUTPOST)
        .env("LK_TIMEOUT", "300")
        .env("PYTHONWARNINGS", "ignore");
    cmd
}

/// Outpost's UI events, with everything seen kept for failure messages.
struct Ui {
    events: SessionEvents,
    seen: Vec<UiEvent>,
}

impl Ui {
    async fn wait<T>(
        &mut self,
        what: &str,
        mut pick: impl FnMut(&UiEvent) -> Option<T>,
    ) -> anyhow::Result<T> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let ev = match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(ev)) => ev,
                Ok(None) => bail!("the session ended before {what}; events:\n{:#?}", self.seen),
                Err(_) => bail!("no {what} within {WAIT:?}; events:\n{:#?}", self.seen),
            };
            if let UiEvent::ConsentRequested(p) = &ev {
                // A consent question is only expected where the test waits for one.
                if !what.contains("consent") {
                    bail!("unexpected consent question while waiting for {what}: {p:?}");
                }
            }
            self.seen.push(ev.clone());
            if let Some(t) = pick(&ev) {
                return Ok(t);
            }
        }
    }

    /// The text of the first assistant segment whose text contains `needle`.
    async fn reply(&mut self, needle: &str) -> anyhow::Result<(String, String)> {
        self.wait(
            &format!("an agent reply containing {needle:?}"),
            |e| match e {
                UiEvent::AssistantMessage { id, text, .. } if text.contains(needle) => {
                    Some((id.clone(), text.clone()))
                }
                _ => None,
            },
        )
        .await
    }
}

struct Files {
    dir: tempfile::TempDir,
    allowed: PathBuf,
    outside: PathBuf,
}

impl Files {
    fn new() -> Files {
        let dir = tempfile::tempdir().unwrap();
        let allowed = dir.path().join("allowed");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&allowed).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("pelican.txt"), "the pelican flies at dawn\n").unwrap();
        // Over LiveKit's 15 KiB RPC payload limit: Outpost cuts the answer.
        let mut big = String::new();
        let mut i = 0;
        while big.len() < 24 * 1024 {
            big.push_str(&format!(
                "line {i:05} of a file larger than one RPC answer\n"
            ));
            i += 1;
        }
        big.push_str(BIG_LAST_LINE);
        big.push('\n');
        std::fs::write(allowed.join("big.txt"), big).unwrap();
        let policy = format!(
            "consent_timeout_secs = 60\n[tools]\n\n[[folders]]\npath = \"{}\"\naccess = \"allow\"\n",
            allowed.display()
        );
        std::fs::write(dir.path().join("policy.toml"), policy).unwrap();
        Files {
            dir,
            allowed,
            outside,
        }
    }
}

outpost_tests::both_servers!(outpost_is_the_frontend_of_a_livekit_agents_agent);

fn outpost_is_the_frontend_of_a_livekit_agents_agent(kind: ServerKind) {
    let env = Env::on(kind, Path::new(ROOM_BIN)).unwrap();
    let files = Files::new();
    let mut agent = Proc::spawn("lk_agent", agent_command(&env, "agent", "agent", &[])).unwrap();
    let url = env.server.url.clone();
    let stranger = agent_command(&env, "stranger", "", &["--stranger"]);
    let data_dir = files.dir.path().join("data");
    let tools = ToolsConfig {
        policy: PolicySource::File(files.dir.path().join("policy.toml")),
        home: files.dir.path().to_path_buf(),
        protected: Vec::new(),
    };
    let pelican = files.outside.join("pelican.txt").display().to_string();
    let big = files.allowed.join("big.txt").display().to_string();

    // The agent prints "ready" once its AgentSession listens; Outpost must be in the room
    // for that (the agent waits for it), so wait for the line on a helper thread.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let r = agent.wait_for_line("\"ready\"", Duration::from_secs(180));
        let _ = ready_tx.send(r.map(|_| ()).map_err(|e| e.to_string()));
        agent
    });

    let result = outpost_tests::lkclient::in_netns(
        &env.pair.client_ns.clone(),
        move || async move {
            let core = Core::open(Some(data_dir.clone()), tools)?;
            // The user's MCP server (the pinned server-everything), running before the
            // session starts so the agent's first outpost.list_tools lists its tools.
            let host = outpost_mcp::McpHost::new(
                outpost_mcp::HostOptions::new(
                    outpost_mcp::ConnectOptions {
                        log_dir: Some(data_dir.join("mcp-logs")),
                        ..outpost_mcp::ConnectOptions::default()
                    },
                    std::sync::Arc::new(outpost_mcp::MemorySecrets::default()),
                ),
                Vec::new(),
            );
            let everything = python::workspace_root().join(
                "tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
            );
            host.start(
                "everything",
                outpost_mcp::ServerConfig::stdio(
                    "node",
                    vec![everything.display().to_string(), "stdio".into()],
                ),
            )?;
            host.wait_running("everything", Duration::from_secs(60))
                .await?;
            let mut opts = ConnectOptions::new(Credentials::Token {
                url,
                token: token(OUTPOST, ""),
            });
            opts.consent_ui = true;
            opts.mcp = Some(host);
            opts.room_name = Some(ROOM.into());
            let (session, events) = core.connect(opts).await?;
            let mut ui = Ui {
                events,
                seen: Vec::new(),
            };

            // 1. The mode: found out from what the agent does (it lists the tools first,
            //    or sets lk.agent.state), not from the silence fallback.
            let why = ui
                .wait("LiveKit Agents mode", |e| match e {
                    UiEvent::AssistantMode {
                        mode: AssistantMode::LivekitAgents,
                        detail,
                    } => Some(detail.clone()),
                    _ => None,
                })
                .await?;
            assert!(
                why.contains("RPC") || why.contains("lk.agent.state"),
                "detected by {why:?}"
            );
            let conversation = ui
                .wait("session start", |e| match e {
                    UiEvent::SessionStarted {
                        mode,
                        conversation_id,
                        assistant_name,
                        ..
                    } => Some((*mode, conversation_id.clone(), assistant_name.clone())),
                    _ => None,
                })
                .await?;
            assert_eq!(conversation.0, AssistantMode::LivekitAgents);
            assert_eq!(
                conversation.2, "agent",
                "the agent-kind participant is the assistant"
            );
            let conversation = conversation.1;
            tokio::task::spawn_blocking(move || ready_rx.recv())
                .await?
                .context("the agent's waiter thread")?
                .map_err(|e| anyhow::anyhow!("the agent never got ready: {e}"))?;

            // 2. Chat: "hello" comes back streamed, assembled in order.
            session.send_message("hello")?;
            let (seg, text) = ui.reply(HELLO).await?;
            assert_eq!(text, HELLO);
            let pieces: Vec<(u32, &String)> = ui
                .seen
                .iter()
                .filter_map(|e| match e {
                    UiEvent::AssistantDelta {
                        message_id,
                        seq,
                        delta,
                    } if *message_id == seg => Some((*seq, delta)),
                    _ => None,
                })
                .collect();
            // Streamed: the scripted LLM sends six chunks 50 ms apart; each arrives once,
            // as a delta, in order, and together they are the reply.
            assert!(pieces.len() >= 2, "not streamed: {pieces:?}");
            assert!(
                pieces.windows(2).all(|w| w[1].0 > w[0].0),
                "out of order: {pieces:?}"
            );
            let joined: String = pieces.iter().map(|(_, d)| d.as_str()).collect();
            assert_eq!(joined, HELLO, "the deltas make the reply: {pieces:?}");

            // 3. Discovery: the agent's LLM was given Outpost's tools (outpost.list_tools).
            session.send_message("tools")?;
            let (_, listed) = ui.reply("My tools:").await?;
            for t in [
                "calculator",
                "read_local_file",
                "outpost_read_result",
                "mcp__everything__echo",
            ] {
                assert!(listed.contains(t), "{t} missing from {listed}");
            }

            // 4. A policy-allowed call forwarded by RPC: runs without a question.
            session.send_message("calculate 6*7")?;
            let finished = ui
                .wait("the calculator's result", |e| match e {
                    UiEvent::ToolCallFinished {
                        tool_name, success, ..
                    } if tool_name == "calculator" => Some(*success),
                    _ => None,
                })
                .await?;
            assert!(finished, "calculator failed: {:#?}", ui.seen);
            ui.reply("The answer is 42").await?;

            // 4b. A tool of the user's MCP server, by RPC. MCP tools ask by default: the
            //     question names the server and carries its description and claims;
            //     Allow once, and the result reaches the agent.
            session.send_message("mcp echo hi from the agent")?;
            let prompt = ui
                .wait("a consent question for the MCP tool", |e| match e {
                    UiEvent::ConsentRequested(p) if p.tool == "mcp__everything__echo" => {
                        Some(p.clone())
                    }
                    _ => None,
                })
                .await?;
            assert_eq!(prompt.server.as_deref(), Some("everything"), "{prompt:?}");
            assert!(!prompt.description.is_empty(), "{prompt:?}");
            assert!(prompt.claims.is_some(), "{prompt:?}");
            assert_eq!(
                prompt.parameters.get("message"),
                Some(&Value::String("hi from the agent".into()))
            );
            core.answer_consent(&prompt.consent_id, Decision::AllowOnce)?;
            let (_, said) = ui.reply("Echo: hi from the agent").await?;
            assert!(said.contains("mcp__everything__echo"), "{said}");
            let card = ui
                .seen
                .iter()
                .find_map(|e| match e {
                    UiEvent::ToolCallRequested {
                        tool_name,
                        server_name,
                        ..
                    } if tool_name == "mcp__everything__echo" => Some(server_name.clone()),
                    _ => None,
                })
                .context("a card for the MCP call")?;
            assert_eq!(card.as_deref(), Some("everything"));
            // Deny: the agent hears permission_denied.
            session.send_message("mcp echo not this time")?;
            let prompt = ui
                .wait("a second consent question for the MCP tool", |e| match e {
                    UiEvent::ConsentRequested(p)
                        if p.tool == "mcp__everything__echo"
                            && p.parameters.get("message")
                                == Some(&Value::String("not this time".into())) =>
                    {
                        Some(p.clone())
                    }
                    _ => None,
                })
                .await?;
            core.answer_consent(&prompt.consent_id, Decision::DenyOnce)?;
            ui.reply("I could not use mcp__everything__echo: error code permission_denied")
                .await?;

            // 5. A file outside the allowed folder: the consent prompt shows the full
            //    arguments; Allow once; the agent's next words quote the file.
            session.send_message(format!("read {pelican}"))?;
            let prompt = ui
                .wait("a consent question", |e| match e {
                    UiEvent::ConsentRequested(p) => Some(p.clone()),
                    _ => None,
                })
                .await?;
            assert_eq!(prompt.tool, "read_local_file");
            // The full arguments, exactly as the agent's LLM gave them.
            let mut args = serde_json::Map::new();
            args.insert("filePath".into(), Value::String(pelican.clone()));
            assert_eq!(prompt.parameters, args, "{prompt:?}");
            core.answer_consent(&prompt.consent_id, Decision::AllowOnce)?;
            ui.reply("the pelican flies at dawn").await?;

            // 6. Deny: the agent gets the RpcError with data.code permission_denied.
            session.send_message(format!("read {pelican}"))?;
            let prompt = ui
                .wait("a second consent question", |e| match e {
                    UiEvent::ConsentRequested(p) => Some(p.clone()),
                    _ => None,
                })
                .await?;
            core.answer_consent(&prompt.consent_id, Decision::DenyOnce)?;
            ui.reply("error code permission_denied").await?;

            // 7. A participant that is not the assistant calls a tool: refused.
            let out = tokio::task::spawn_blocking(move || {
                let proc = Proc::spawn("lk_agent --stranger", stranger)?;
                proc.finish(Duration::from_secs(120))
            })
            .await??;
            let line: Value = out
                .1
                .lines()
                .find_map(|l| serde_json::from_str(l).ok())
                .with_context(|| format!("the stranger printed no result: {}\n{}", out.1, out.2))?;
            assert_eq!(line["ok"], Value::Bool(false), "{line}");
            assert_eq!(line["code"], 1500, "{line}");
            let data: Value = serde_json::from_str(line["data"].as_str().unwrap_or("null"))?;
            assert_eq!(data["code"], "permission_denied", "{line}");

            // 8. A result over 15 KiB: cut with a note, read on with outpost.read_result.
            session.send_message(format!("read {big}"))?;
            let (_, text) = ui.reply(BIG_LAST_LINE).await?;
            assert!(text.contains("outpost.read_result"), "{text}");

            // The agent's state reached the status line.
            let states: Vec<&str> = ui
                .seen
                .iter()
                .filter_map(|e| match e {
                    UiEvent::Status { state, .. } => Some(state.as_str()),
                    _ => None,
                })
                .collect();
            for s in ["listening", "thinking", "speaking"] {
                assert!(states.contains(&s), "{s} missing from {states:?}");
            }

            // The history holds the conversation, the stranger's refusal included.
            core.store().flush().await?;
            let timeline = core
                .store()
                .timeline(ConversationId(conversation.clone()))
                .await?;
            let said = |role: Role, text: &str| {
                timeline.items.iter().any(
                    |i| matches!(i, TimelineItem::Message(m) if m.role == role && m.text == text),
                )
            };
            assert!(said(Role::User, "hello"), "{timeline:#?}");
            assert!(said(Role::Assistant, HELLO), "{timeline:#?}");
            assert!(
                timeline.items.iter().any(
                    |i| matches!(i, TimelineItem::ProtocolError(p) if p.logged.code == "rpc_refused")
                ),
                "{timeline:#?}"
            );
            // The RPC calls went through the audit like any tool call: the calculator ran
            // by policy, the two consent answers were recorded (allowed, then denied).
            let call_state = |tool: &str, state: ToolCallState| {
                timeline.items.iter().any(|i| {
                    matches!(i, TimelineItem::ToolCall(c) if c.tool_name == tool && c.state == state)
                })
            };
            assert!(
                call_state("calculator", ToolCallState::Completed),
                "{timeline:#?}"
            );
            assert!(
                call_state("read_local_file", ToolCallState::Completed),
                "{timeline:#?}"
            );
            assert!(
                call_state("read_local_file", ToolCallState::Error),
                "{timeline:#?}"
            );
            let consents: Vec<Outcome> = timeline
                .items
                .iter()
                .filter_map(|i| match i {
                    TimelineItem::Consent(c) if c.decided.tool_name == "read_local_file" => {
                        Some(c.decided.outcome)
                    }
                    _ => None,
                })
                .collect();
            assert!(
                consents.contains(&Outcome::Allowed) && consents.contains(&Outcome::Denied),
                "{consents:?}"
            );
            session.leave().await?;
            Ok(())
        },
    );
    let agent = waiter.join().unwrap();
    if let Err(e) = result {
        panic!(
            "{e:#}\n--- agent stderr ---\n{}\n--- server ---\n{}",
            agent.stderr(),
            env.server.proc.stderr()
        );
    }
}
