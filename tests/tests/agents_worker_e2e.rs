//! End to end: LiveKit Agents as its developers run it. A real worker
//! (`tests/py/lk_worker.py`: `AgentServer` + the framework's CLI in `start` mode) registers
//! with the real livekit-server and is dispatched to Outpost's room by the server, and the
//! real `outpost connect` (no voice) talks with it: chat, and a tool the agent calls over RPC.
//!
//! - Explicit dispatch by agent name: `outpost connect --agent-name` asks LiveKit's standard
//!   token endpoint (`tests/py/token_endpoint.py`, the official `livekit-api`) for a token
//!   whose `room_config.agents` names the agent; only then does the server dispatch it.
//! - Automatic dispatch, with a development token Outpost mints from an API key pair
//!   (`--api-key`, the secret in `$LIVEKIT_API_SECRET`).
//!
//! The worker's sessions speak (espeak-ng TTS): a voice agent holds its audio, and the text
//! paced by it, until its frontend subscribes to its voice, which Outpost does with voice
//! off too. livekit-server only: outpost-room has no agent dispatch (docs/ROOM.md).
//! Server, worker and endpoint in the server namespace, `outpost connect` in the client
//! one. Needs root, iproute2, espeak-ng, the venvs and livekit-server (scripts/setup.sh).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::time::Duration;

use outpost_tests::connect::Connect;
use outpost_tests::lkclient::{self, NsPair};
use outpost_tests::proc::Proc;
use outpost_tests::python;
use outpost_tests::server::{LkServer, ServerKind};
use serde_json::Value;

const CLI_BIN: &str = env!("CARGO_BIN_EXE_outpost_cli");
const AGENT_NAME: &str = "outpost-helper";
/// Generous: a worker process, its job process, libwebrtc and the client on 2 busy cores.
const WAIT: Duration = Duration::from_secs(120);

/// livekit-server plus a registered worker (dispatched automatically, or by `agent_name`).
struct Stage {
    worker: Proc,
    events: std::path::PathBuf,
    dir: tempfile::TempDir,
    server: LkServer,
    pair: NsPair,
}

impl Stage {
    fn start(agent_name: &str) -> Stage {
        let pair = NsPair::create().expect("namespaces");
        let server = LkServer::start_in(&pair, ServerKind::LiveKit, Path::new("unused"), &[])
            .expect("server");
        let dir = tempfile::tempdir().unwrap();
        let events = dir.path().join("worker-events.jsonl");
        let py = python::agents_python().unwrap();
        let mut cmd = pair.server_command(&py);
        cmd.arg(python::scripts_dir().join("lk_worker.py"))
            .arg("start")
            .current_dir(python::scripts_dir())
            .env("LIVEKIT_URL", &server.url)
            .env("LIVEKIT_API_KEY", lkclient::DEV_KEY)
            .env("LIVEKIT_API_SECRET", lkclient::DEV_SECRET)
            .env("LK_AGENT_NAME", agent_name)
            .env("LK_EVENTS", &events)
            .env("PYTHONWARNINGS", "ignore");
        let mut worker = Proc::spawn("lk_worker", cmd).unwrap();
        // The worker logs JSON lines on stdout; it is ready once the server registered it.
        worker
            .wait_for_line("registered worker", WAIT)
            .unwrap_or_else(|e| panic!("the worker did not register: {e:#}"));
        Stage {
            worker,
            events,
            dir,
            server,
            pair,
        }
    }

    fn policy(&self) -> String {
        let p = self.dir.path().join("policy.toml");
        std::fs::write(
            &p,
            "consent_timeout_secs = 5\n[tools]\ncalculator = \"allow\"\n",
        )
        .unwrap();
        p.display().to_string()
    }

    /// `outpost connect` as "user-app" in `room`, from the client namespace, with the
    /// stage's policy and a data folder of its own; `how` are the flags that give it a
    /// token (and the agent to dispatch), `env` its environment.
    fn connect(&self, room: &str, how: &[&str], env: &[(&str, &str)]) -> Connect {
        let policy = self.policy();
        let data = self.dir.path().join("data").display().to_string();
        let mut args: Vec<String> = how.iter().map(|s| (*s).to_owned()).collect();
        args.extend(
            [
                "--room",
                room,
                "--identity",
                "user-app",
                "--policy",
                &policy,
                "--data-dir",
                &data,
            ]
            .map(str::to_owned),
        );
        Connect::spawn(
            Some(&self.pair.client_ns),
            CLI_BIN,
            &args,
            env,
            self.dir.path().join("connect.stderr"),
        )
        .unwrap()
    }

    fn worker_events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.events)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn report(&self, c: &Connect) -> String {
        format!(
            "--- outpost connect ---\n{}\n{}\n--- worker events ---\n{:?}\n--- worker stderr (tail) ---\n{}\n--- server log (tail) ---\n{}",
            c.raw_lines().join("\n"),
            c.stderr(),
            self.worker_events(),
            tail(&self.worker.stderr(), 40),
            tail(&self.server.proc.stderr(), 30),
        )
    }
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// An assistant message (final or not) whose text is exactly `text`.
fn says(text: &'static str) -> impl Fn(&Value) -> bool {
    move |e| e["type"] == "assistant_message" && e["data"]["text"] == text
}

/// Types a message, and the next one once the agent answered; then leaves.
fn converse(stage: &Stage, mut c: Connect) {
    let result = (|| -> anyhow::Result<()> {
        // Typed at once: Outpost holds chat until the agent says its session is up.
        c.say("hello")?;
        c.wait_for(
            "the agent's greeting",
            WAIT,
            says("Hello from the scripted agent."),
        )?;
        c.say("calculate 6*7")?;
        c.wait_for("the calculator call", WAIT, |e| {
            e["type"] == "tool_call_finished"
                && e["data"]["toolName"] == "calculator"
                && e["data"]["success"] == true
        })?;
        c.wait_for("the agent's answer", WAIT, says("The answer is 42."))?;
        Ok(())
    })();
    if let Err(e) = result {
        panic!("{e:#}\n{}", stage.report(&c));
    }
    let (status, _) = c.finish(Duration::from_secs(30)).unwrap();
    assert!(status.success(), "outpost connect: {status}");
}

#[test]
fn a_worker_dispatched_by_name_through_the_token_endpoint_talks_with_outpost() {
    let stage = Stage::start(AGENT_NAME);
    let py = python::python().unwrap();
    let bind = format!("{}:8090", stage.pair.server_ip);
    let mut endpoint_cmd = stage.pair.server_command(&py);
    endpoint_cmd
        .arg(python::scripts_dir().join("token_endpoint.py"))
        .current_dir(python::scripts_dir())
        .env("LK_URL", &stage.server.url)
        .env("TOKEN_BIND", &bind)
        .env("PYTHONWARNINGS", "ignore");
    let mut endpoint = Proc::spawn("token_endpoint", endpoint_cmd).unwrap();
    let requests = endpoint.stdout_lines().unwrap();
    let listening = requests.recv_timeout(Duration::from_secs(30)).unwrap();
    assert!(listening.contains("listening"), "{listening}");

    let endpoint_url = format!("http://{bind}/");
    let c = stage.connect(
        "dispatch-by-name",
        &[
            "--token-endpoint",
            &endpoint_url,
            "--agent-name",
            AGENT_NAME,
        ],
        &[],
    );
    converse(&stage, c);

    // The endpoint was asked for the dispatch, in LiveKit's standard request.
    let minted: Value =
        serde_json::from_str(&requests.recv_timeout(Duration::from_secs(5)).unwrap()).unwrap();
    assert_eq!(minted["request"]["room_name"], "dispatch-by-name");
    assert_eq!(minted["request"]["participant_identity"], "user-app");
    assert_eq!(
        minted["request"]["room_config"]["agents"][0]["agent_name"],
        AGENT_NAME
    );
    // The server dispatched the named agent to that room.
    let dispatched: Vec<Value> = stage
        .worker_events()
        .into_iter()
        .filter(|e| e["event"] == "dispatched")
        .collect();
    assert_eq!(dispatched.len(), 1, "{dispatched:?}");
    assert_eq!(dispatched[0]["room"], "dispatch-by-name");
    assert_eq!(dispatched[0]["agent_name"], AGENT_NAME);
    assert_eq!(dispatched[0]["outpost"], "user-app");
}

#[test]
fn an_automatically_dispatched_worker_talks_with_outpost_on_a_token_it_minted() {
    let stage = Stage::start("");
    let c = stage.connect(
        "dispatch-auto",
        &["--url", &stage.server.url, "--api-key", lkclient::DEV_KEY],
        &[("LIVEKIT_API_SECRET", lkclient::DEV_SECRET)],
    );
    converse(&stage, c);
    let dispatched: Vec<Value> = stage
        .worker_events()
        .into_iter()
        .filter(|e| e["event"] == "dispatched")
        .collect();
    assert_eq!(dispatched.len(), 1, "{dispatched:?}");
    assert_eq!(dispatched[0]["room"], "dispatch-auto");
}

/// A user who asks for an agent no worker serves is told so, not left waiting: the
/// server finds no worker for the name, and `outpost connect` says after 20 s that no
/// assistant joined and what to check.
#[test]
fn asking_for_an_agent_no_worker_serves_says_so() {
    let stage = Stage::start(AGENT_NAME);
    let c = stage.connect(
        "dispatch-nobody",
        &[
            "--url",
            &stage.server.url,
            "--api-key",
            lkclient::DEV_KEY,
            "--agent-name",
            "nobody-serves-this",
        ],
        &[("LIVEKIT_API_SECRET", lkclient::DEV_SECRET)],
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    while !c.stderr().contains("no assistant has joined") && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
    }
    let stderr = c.stderr();
    assert!(
        stderr.contains("no assistant has joined after 20 s")
            && stderr.contains("\"nobody-serves-this\""),
        "{stderr}"
    );
    let (status, _) = c.finish(Duration::from_secs(20)).unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        stage
            .worker_events()
            .iter()
            .all(|e| e["event"] != "dispatched"),
        "the worker for another name was dispatched"
    );
}
