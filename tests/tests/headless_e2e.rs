//! End to end, as a user of the headless demo sees it: a server,
//! `outpost-agent` (scripted brain) and the real `outpost connect` with its stdin piped.
//!
//! - Questions typed in quick succession are each answered, in order, and none is
//!   interrupted; the assistant is announced once.
//! - `--linger`: at the end of input connect waits for the answer still coming, then leaves
//!   at once; when no answer comes, it leaves after the linger and says how many are missing.
//!
//! Each test runs against both servers: outpost-room on plain loopback (the Rust client
//! and server need no network namespace), and livekit-server inside one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use outpost_tests::netns::NetNs;
use outpost_tests::proc::Proc;
use outpost_tests::server::{LkServer, ServerKind, ServerOptions};
use serde_json::Value;

const ROOM_BIN: &str = env!("CARGO_BIN_EXE_room_server");
const AGENT_BIN: &str = env!("CARGO_BIN_EXE_agent_server");
const CLI_BIN: &str = env!("CARGO_BIN_EXE_outpost_cli");
const ROOM: &str = "headless-e2e";

outpost_tests::both_servers!(
    questions_typed_ahead_are_each_answered_in_order,
    at_end_of_input_connect_waits_for_the_answer_then_leaves,
    connect_leaves_after_the_linger_when_no_answer_comes,
);

/// A server and the scripted agent in its room: outpost-room on a free loopback port
/// (the headless demo's own set-up), or livekit-server in a network namespace (with the
/// agent and `outpost connect` in there too).
struct Stage {
    url: String,
    agent: Proc,
    _server: Proc,
    dir: tempfile::TempDir,
    /// Dropped last: the namespace of a livekit-server stage.
    ns: Option<NetNs>,
}

impl Stage {
    /// `delay_ms` is the scripted brain's pause between streamed words.
    fn start(kind: ServerKind, delay_ms: u64) -> Stage {
        let (url, server, ns) = match kind {
            ServerKind::Room => {
                let mut cmd = Command::new(ROOM_BIN);
                cmd.args(["serve", "--bind", "127.0.0.1:0"]);
                let mut room = Proc::spawn("outpost-room", cmd).unwrap();
                let line = room
                    .wait_for_line("listening on", Duration::from_secs(20))
                    .unwrap();
                let url = line
                    .split("listening on ")
                    .nth(1)
                    .and_then(|rest| rest.split_whitespace().next())
                    .unwrap_or_else(|| panic!("no URL in {line:?}"))
                    .to_owned();
                (url, room, None)
            }
            ServerKind::LiveKit => {
                let ns = NetNs::create().unwrap();
                let server = LkServer::start(
                    kind,
                    &|program| ns.command(program),
                    ns.server_ip,
                    Path::new(ROOM_BIN),
                    &ServerOptions::default(),
                )
                .unwrap();
                let url = server.url.clone();
                (url, server.proc, Some(ns))
            }
        };
        let mut cmd = in_ns(ns.as_ref(), AGENT_BIN);
        cmd.args(["--url", &url, "--room", ROOM, "--scripted-delay-ms"])
            .arg(delay_ms.to_string());
        let mut agent = Proc::spawn("outpost-agent", cmd).unwrap();
        agent
            .wait_for_line("outpost-agent: joined", Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e:#}\n--- server ---\n{}", server.stderr()));
        let dir = tempfile::tempdir().unwrap();
        let allowed = dir.path().join("allowed");
        std::fs::create_dir_all(&allowed).unwrap();
        std::fs::write(allowed.join("notes.txt"), "hello from the headless e2e\n").unwrap();
        let policy = format!(
            "consent_timeout_secs = 5\n[tools]\n\n[[folders]]\npath = \"{}\"\naccess = \"allow\"\n",
            allowed.display()
        );
        std::fs::write(dir.path().join("policy.toml"), policy).unwrap();
        Stage {
            url,
            agent,
            _server: server,
            dir,
            ns,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Runs `outpost connect --json` with `lines` written to its stdin at once, then end of
    /// input. Returns the exit status, the events, stderr and how long it ran.
    fn connect(&self, lines: &[String], linger_secs: u64) -> Run {
        let token = outpost_room::Keys::default()
            .mint(ROOM, "e2e-user", None, Duration::from_secs(600))
            .unwrap();
        let mut child = in_ns(self.ns.as_ref(), CLI_BIN)
            .args(["connect", "--json", "--url", &self.url, "--token", &token])
            .args(["--room", ROOM, "--linger", &linger_secs.to_string()])
            .arg("--policy")
            .arg(self.path("policy.toml"))
            .arg("--data-dir")
            .arg(self.path("data"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        {
            // Typed in quick succession: one write, then end of input.
            let mut stdin = child.stdin.take().unwrap();
            let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
            stdin.write_all(text.as_bytes()).unwrap();
        }
        let (status, stdout, stderr) = wait(child, Duration::from_secs(90), &self.agent);
        let events = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        Run {
            status,
            events,
            stderr,
            took: started.elapsed(),
        }
    }
}

/// `program`, inside `ns` when there is one.
fn in_ns(ns: Option<&NetNs>, program: &str) -> Command {
    match ns {
        Some(ns) => ns.command(program),
        None => Command::new(program),
    }
}

struct Run {
    status: ExitStatus,
    events: Vec<Value>,
    stderr: String,
    took: Duration,
}

impl Run {
    fn of_type(&self, ty: &str) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["type"] == ty)
            .map(|e| &e["data"])
            .collect()
    }

    fn texts(&self, ty: &str) -> Vec<String> {
        self.of_type(ty)
            .iter()
            .map(|d| d["text"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

/// Waits for `child` (killing it after `timeout`), reading its output meanwhile.
fn wait(mut child: Child, timeout: Duration, agent: &Proc) -> (ExitStatus, String, String) {
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "outpost connect did not finish in {timeout:?}\n--- stdout ---\n{}\n--- agent ---\n{}",
                out.join().unwrap_or_default(),
                agent.stderr()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (
        status,
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    )
}

fn notes(stage: &Stage) -> String {
    let p: &Path = &stage.path("allowed/notes.txt");
    p.display().to_string()
}

fn questions_typed_ahead_are_each_answered_in_order(kind: ServerKind) {
    let stage = Stage::start(kind, 5);
    let questions = vec![
        "calculate 6*7".to_owned(),
        format!("read {}", notes(&stage)),
        "ssh".to_owned(),
    ];
    let run = stage.connect(&questions, 60);
    let dump = || format!("{:#?}\n--- stderr ---\n{}", run.events, run.stderr);
    assert!(run.status.success(), "{}", dump());

    // The user's messages, in the order typed, and the answers, each naming its question.
    let asked: Vec<&Value> = run.of_type("user_message");
    let asked_ids: Vec<&str> = asked.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(run.texts("user_message"), questions, "{}", dump());
    // A turn's text after a tool call is its own segment (it shows below the call's
    // card), so one answer may be several messages in a row replying to one question.
    let mut replied: Vec<&str> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    for m in run.of_type("assistant_message") {
        let to = m["inReplyTo"].as_str().unwrap_or("-");
        let text = m["text"].as_str().unwrap_or_default();
        if replied.last() == Some(&to) {
            if let Some(t) = texts.last_mut() {
                t.push_str(text);
            }
        } else {
            replied.push(to);
            texts.push(text.to_owned());
        }
    }
    assert_eq!(
        replied,
        asked_ids,
        "one answer per question, in order: {}",
        dump()
    );

    for t in &texts {
        assert!(!t.contains("(interrupted)"), "{}", dump());
    }
    assert!(texts[0].contains("= 42"), "{}", dump());
    assert!(
        texts[1].contains("hello from the headless e2e"),
        "{}",
        dump()
    );
    assert!(texts[2].contains("refused"), "{}", dump());

    // The assistant found at join time is announced once (issue 19, item 2).
    let here = run
        .of_type("assistant_presence")
        .into_iter()
        .filter(|p| p["present"] == true)
        .count();
    assert_eq!(here, 1, "{}", dump());
}

fn at_end_of_input_connect_waits_for_the_answer_then_leaves(kind: ServerKind) {
    // 100 ms a word: the answer takes well over a second after end of input.
    let stage = Stage::start(kind, 100);
    let run = stage.connect(&["calculate 6*7".to_owned()], 60);
    let dump = || format!("{:#?}\n--- stderr ---\n{}", run.events, run.stderr);
    assert!(run.status.success(), "{}", dump());
    // One answer: its text after the tool call is a second segment of the same reply.
    let replies = run.of_type("assistant_message");
    assert!(!replies.is_empty(), "{}", dump());
    let to: Vec<&str> = replies
        .iter()
        .map(|m| m["inReplyTo"].as_str().unwrap_or("-"))
        .collect();
    assert!(to.iter().all(|t| *t == to[0]), "{}", dump());
    assert!(
        run.texts("assistant_message").concat().contains("= 42"),
        "{}",
        dump()
    );
    // It left because the answer was in, not because the linger ran out.
    assert!(run.took < Duration::from_secs(45), "took {:?}", run.took);
    let ended = run.of_type("ended");
    assert_eq!(ended.len(), 1, "{}", dump());
    assert_eq!(ended[0]["reason"], "left the room", "{}", dump());
}

fn connect_leaves_after_the_linger_when_no_answer_comes(kind: ServerKind) {
    // 2 s a word: the help text would take minutes.
    let stage = Stage::start(kind, 2000);
    let linger = 2;
    let run = stage.connect(&["help".to_owned()], linger);
    let dump = || format!("{:#?}\n--- stderr ---\n{}", run.events, run.stderr);
    assert!(run.status.success(), "{}", dump());
    assert!(run.of_type("assistant_message").is_empty(), "{}", dump());
    assert!(
        run.stderr
            .contains("* leaving: 1 message(s) still unanswered after 2 s"),
        "{}",
        dump()
    );
    let ended = run.of_type("ended");
    assert_eq!(ended.len(), 1, "{}", dump());
    assert_eq!(ended[0]["reason"], "left the room", "{}", dump());
    assert!(
        run.took >= Duration::from_secs(linger),
        "left before the linger: {:?}",
        run.took
    );
    assert!(run.took < Duration::from_secs(30), "took {:?}", run.took);
}
