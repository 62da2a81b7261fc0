//! End to end: the real `outpost connect` (built from `outpost-cli` as the test binary
//! `outpost_cli`) against the example Python assistant (`examples/python-agent/agent.py`,
//! official LiveKit SDK) through each server (`outpost-room` and livekit-server), then
//! `outpost history` over the same data directory.
//!
//! Each test makes two network namespaces joined by a veth pair (see
//! `outpost_tests::lkclient`): the room server and the assistant in one, `outpost connect`
//! (run with `ip netns exec`) in the other, so the reconnect test can cut the client's link.
//! Needs root, iproute2 and the venv (see `outpost_tests::python`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use outpost_tests::connect::Connect;
use outpost_tests::lkclient::{self, Env};
use outpost_tests::proc::Proc;
use outpost_tests::server::ServerKind;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

const ROOM_BIN: &str = env!("CARGO_BIN_EXE_room_server");

outpost_tests::both_servers!(
    every_kind_of_tool_request_is_answered_logged_and_searchable,
    a_result_produced_while_the_link_is_down_arrives_once_and_the_tool_is_not_rerun,
    a_participant_holding_streams_open_does_not_block_the_assistants_large_request,
);
const CLI_BIN: &str = env!("CARGO_BIN_EXE_outpost_cli");
const ROOM: &str = "session-e2e";
const USER_TEXT: &str = "hello from the e2e test";

/// Files the tools work on, the policy allowing one folder, and the data directory.
struct Fixture {
    dir: tempfile::TempDir,
    allowed: PathBuf,
    big_sha: String,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let allowed = dir.path().join("allowed");
        std::fs::create_dir_all(allowed.join("bigdir")).unwrap();
        std::fs::write(allowed.join("notes.txt"), "hello outpost e2e\n").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "not for the assistant\n").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), allowed.join("escape-link"))
            .unwrap();
        // 5 MiB of text: the result (about 5 MiB of MessagePack) must travel as a stream.
        let mut big = String::with_capacity(5 << 20);
        let mut i = 0u64;
        while big.len() < 5 << 20 {
            big.push_str(&format!("line {i:08} of the big file for outpost\n"));
            i += 1;
        }
        big.truncate(5 << 20);
        std::fs::write(allowed.join("big.txt"), &big).unwrap();
        let big_sha = hex(&Sha256::digest(big.as_bytes()));
        // 48 MiB to search through: long enough to time out after 1 ms, to be cancelled,
        // and to be still running when the test cuts the link.
        let block = "the quick brown fox jumps over the lazy dog\n".repeat(24_000);
        for n in 0..48 {
            std::fs::write(allowed.join("bigdir").join(format!("f{n:02}.txt")), &block).unwrap();
        }
        let policy = format!(
            "consent_timeout_secs = 5\n[tools]\n\n[[folders]]\npath = \"{}\"\naccess = \"allow\"\n",
            allowed.display()
        );
        std::fs::write(dir.path().join("policy.toml"), policy).unwrap();
        Fixture {
            dir,
            allowed,
            big_sha,
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn path(&self, rel: &str) -> String {
        self.allowed.join(rel).display().to_string()
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `outpost connect --json` in the client namespace, with the fixture's policy and data.
fn start_connect(env: &Env, fx: &Fixture) -> Connect {
    let mut cmd = env.outpost_connect(Path::new(CLI_BIN), ROOM).unwrap();
    cmd.arg("--json")
        .arg("--policy")
        .arg(fx.dir.path().join("policy.toml"))
        .arg("--data-dir")
        .arg(fx.data_dir())
        .env("RUST_LOG", "warn");
    Connect::from_command(cmd, fx.dir.path().join("connect.stderr"))
        .expect("spawning outpost connect")
}

/// The example assistant running `steps`, in the server namespace.
fn start_agent(env: &Env, fx: &Fixture, steps: &Value) -> Proc {
    outpost_tests::connect::example_agent(env, ROOM, fx.dir.path(), steps, 150).unwrap()
}

/// Waits for the assistant's scenario; fails with every step's outcome on a mismatch.
fn agent_steps(agent: Proc, env: &Env, connect: &Connect) -> Vec<Value> {
    let (status, out, err) = agent.finish(Duration::from_secs(160)).unwrap();
    let steps: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    assert!(
        status.success(),
        "the assistant's scenario failed ({status}):\n{}\nstderr:\n{err}\n--- outpost connect ---\n{}\n{}\n--- server ---\n{}",
        out,
        connect.raw_lines().join("\n"),
        connect.stderr(),
        env.server.proc.stderr()
    );
    steps
}

fn cli(args: &[&str], data_dir: &Path) -> (i32, String, String) {
    outpost_tests::cli::run(CLI_BIN, args, data_dir).unwrap()
}

fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

fn every_kind_of_tool_request_is_answered_logged_and_searchable(kind: ServerKind) {
    let fx = Fixture::new();
    let env = Env::on(kind, Path::new(ROOM_BIN)).expect("namespaces and server");
    let secret = fx.dir.path().join("secret.txt").display().to_string();
    let steps = json!([
        {"op": "wait_user", "text": USER_TEXT},
        {"name": "client tool", "op": "request", "id": "t-read", "toolName": "read_local_file",
         "execution": "client", "parameters": {"filePath": fx.path("notes.txt")},
         "expect": {"success": true, "result": {"content": "hello outpost e2e\n"}, "via": "packet"}},
        {"name": "duplicate id", "op": "duplicate", "of": "t-read", "expect": {"success": true}},
        {"name": "either, client runs it", "op": "request", "id": "t-calc", "toolName": "calculator",
         "execution": "either", "parameters": {"expression": "6*7"},
         "expect": {"success": true, "result": {"answer": 42}}},
        {"name": "either, declined", "op": "request", "id": "t-either-web", "toolName": "web_search",
         "execution": "either", "parameters": {"query": "outpost"},
         "expect": {"errorCode": "unknown_tool",
                    "errorMessage": "Tool 'web_search' is not supported by this client"},
         "serverResult": {"success": true, "result": {"results": ["ran on the server"]}}},
        {"name": "server tool", "op": "request", "id": "t-server", "toolName": "web_search",
         "execution": "server", "parameters": {"query": "rust"}, "wait_ms": 1500,
         "expect": {"none": true},
         "serverResult": {"success": true, "result": {"results": ["server searched"]}}},
        {"name": "unknown tool", "op": "request", "id": "t-unknown", "toolName": "launch_rockets",
         "execution": "client", "parameters": {},
         "expect": {"success": false, "errorCode": "unknown_tool",
                    "errorMessage": "Tool 'launch_rockets' is not supported by this client"}},
        {"name": "invalid parameters", "op": "request", "id": "t-invalid", "toolName": "read_local_file",
         "execution": "client", "parameters": {"filePath": 42},
         "expect": {"success": false, "errorCode": "invalid_parameters",
                    "errorMessageContains": "Invalid parameters for tool 'read_local_file'"}},
        {"name": "timeout", "op": "request", "id": "t-timeout", "toolName": "search_files",
         "execution": "client", "timeoutMs": 1,
         "parameters": {"root": fx.path("bigdir"), "contains": "needle-not-there"},
         "expect": {"success": false, "errorCode": "timeout",
                    "errorMessage": "Tool execution exceeded timeout of 1ms"}},
        {"name": "path escape with ..", "op": "request", "id": "t-escape", "toolName": "read_local_file",
         "execution": "client", "parameters": {"filePath": format!("{}/../secret.txt", fx.allowed.display())},
         "expect": {"success": false, "errorCode": "permission_denied"}},
        {"name": "path escape by symlink", "op": "request", "id": "t-link", "toolName": "read_local_file",
         "execution": "client", "parameters": {"filePath": fx.path("escape-link")},
         "expect": {"success": false, "errorCode": "permission_denied"}},
        {"name": "outside the allowed folder", "op": "request", "id": "t-secret", "toolName": "read_local_file",
         "execution": "client", "parameters": {"filePath": secret},
         "expect": {"success": false, "errorCode": "permission_denied"}},
        {"name": "5 MiB file", "op": "request", "id": "t-big", "toolName": "read_local_file",
         "execution": "client", "parameters": {"filePath": fx.path("big.txt"), "maxBytes": 6_291_456},
         "wait_ms": 60_000,
         "expect": {"success": true, "via": "stream", "result": {"size": 5_242_880, "truncated": false},
                    "sha256": {"field": "content", "hex": fx.big_sha}}},
        {"name": "cancel", "op": "request", "id": "t-cancel", "toolName": "search_files",
         "execution": "client", "cancelAfterMs": 0,
         "parameters": {"root": fx.path("bigdir"), "contains": "needle-not-there"},
         "expect": {"success": false, "errorCode": "cancelled",
                    "errorMessage": "Tool execution was cancelled by the server"}},
        {"name": "missing execution", "op": "raw", "expectError": "missing_field", "refId": "t-noexec",
         "msg": {"type": 6, "id": "t-noexec", "messageId": "m1", "toolName": "calculator",
                 "parameters": {"expression": "1+1"}}},
        {"name": "malformed bytes", "op": "raw", "hex": "c1", "expectError": "malformed_message"},
        {"op": "expect_count", "id": "t-noexec", "count": 0, "settle_ms": 300},
        {"op": "say", "text": "All checks are done, thank you."}
    ]);
    let agent = start_agent(&env, &fx, &steps);
    let mut connect = start_connect(&env, &fx);
    connect.say(USER_TEXT).unwrap();
    let outcomes = agent_steps(agent, &env, &connect);
    for o in &outcomes {
        eprintln!("{o}");
    }
    assert!(
        outcomes
            .iter()
            .any(|o| o["event"] == "done" && o["failures"] == 0)
    );
    connect
        .wait_for(
            "the final assistant message",
            Duration::from_secs(10),
            |e| {
                e["type"] == "assistant_message"
                    && e["data"]["text"] == "All checks are done, thank you."
            },
        )
        .unwrap();
    let events = connect.finish_ok(Duration::from_secs(20)).unwrap();

    // The client showed each call once (the duplicate was not shown or run again), and
    // nothing went wrong locally (a store refusal would be an `error` event).
    let errors = of_type(&events, "error");
    assert!(errors.is_empty(), "local errors: {errors:?}");
    let requested: Vec<&str> = of_type(&events, "tool_call_requested")
        .iter()
        .map(|e| e["data"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(requested.iter().filter(|i| **i == "t-read").count(), 1);
    assert_eq!(requested.len(), 12, "{requested:?}");
    let sent_errors: Vec<&str> = of_type(&events, "protocol_error")
        .iter()
        .map(|e| e["data"]["code"].as_str().unwrap())
        .collect();
    assert_eq!(sent_errors, ["missing_field", "malformed_message"]);
    assert_eq!(of_type(&events, "session_started").len(), 1);

    // The store has the transcript and every call with its outcome.
    let data = fx.data_dir();
    let (code, out, err) = cli(&["history", "export", "--format", "json"], &data);
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    let conv = &doc["conversations"][0];
    let items = conv["items"].as_array().unwrap();
    let texts: Vec<&str> = items
        .iter()
        .filter(|i| i["type"] == "message")
        .map(|i| i["data"]["text"].as_str().unwrap())
        .collect();
    assert!(texts.contains(&USER_TEXT), "{texts:?}");
    assert!(texts.contains(&format!("You said: {USER_TEXT}").as_str()));
    let call = |id: &str| {
        items
            .iter()
            .find(|i| i["type"] == "tool_call" && i["data"]["id"] == id)
            .map(|i| i["data"].clone())
            .unwrap_or_else(|| panic!("no tool call {id} in the store"))
    };
    let calls = items.iter().filter(|i| i["type"] == "tool_call").count();
    assert_eq!(calls, 12, "one row per request id");
    let t = call("t-read");
    assert_eq!(
        (t["state"].as_str(), t["executed_by"].as_str()),
        (Some("completed"), Some("client"))
    );
    for (id, code) in [
        ("t-unknown", "unknown_tool"),
        ("t-invalid", "invalid_parameters"),
        ("t-timeout", "timeout"),
        ("t-escape", "permission_denied"),
        ("t-link", "permission_denied"),
        ("t-cancel", "cancelled"),
    ] {
        let c = call(id);
        assert_eq!(c["state"], "error", "{id}: {c}");
        assert_eq!(c["error_code"], code, "{id}: {c}");
    }
    for id in ["t-server", "t-either-web"] {
        let c = call(id);
        assert_eq!(c["state"], "completed", "{id}: {c}");
        assert_eq!(c["executed_by"], "server", "{id}: {c}");
    }
    assert_eq!(call("t-calc")["executed_by"], "client");
    assert!(
        items
            .iter()
            .any(|i| i["type"] == "consent" && i["data"]["tool_call_id"] == "t-read"),
        "the policy's decisions are in the audit trail"
    );

    // `outpost history search` finds the transcript and the tool calls.
    let conv_id = conv["conversation"]["id"].as_str().unwrap().to_owned();
    let (code, out, err) = cli(&["history", "search", "e2e test", "--json"], &data);
    assert_eq!(code, 0, "{err}");
    let hits: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        hits.iter()
            .any(|h| h["kind"] == "message" && h["conversation_id"] == conv_id.as_str()),
        "{out}"
    );
    let (code, out, _) = cli(&["history", "search", "launch_rockets"], &data);
    assert_eq!(code, 0);
    assert!(out.contains("tool call launch_rockets"), "{out}");
    let (code, out, _) = cli(&["history", "list"], &data);
    assert_eq!(code, 0);
    assert!(
        out.contains(&conv_id) && out.contains("12 tool calls"),
        "{out}"
    );
    let (code, out, err) = cli(&["history", "show", &conv_id], &data);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("user: {USER_TEXT}")), "{out}");
    let (code, out, _) = cli(
        &["history", "export", &conv_id, "--format", "markdown"],
        &data,
    );
    assert_eq!(code, 0);
    assert!(out.contains(USER_TEXT));
    let (code, _, err) = cli(&["history", "show", "no-such-conversation"], &data);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no conversation with id 'no-such-conversation'"),
        "{err}"
    );
}

fn a_result_produced_while_the_link_is_down_arrives_once_and_the_tool_is_not_rerun(
    kind: ServerKind,
) {
    let fx = Fixture::new();
    let env = Env::on(kind, Path::new(ROOM_BIN)).expect("namespaces and server");
    let steps = json!([
        {"name": "slow search across a link drop", "op": "request", "id": "t-slow",
         "toolName": "search_files", "execution": "client", "timeoutMs": 120_000,
         "parameters": {"root": fx.path("bigdir"), "contains": "needle-not-there"},
         "wait_ms": 60_000, "settle_ms": 3_000,
         "expect": {"success": true, "count": 1, "result": {"truncated": false}}},
        // A server that lost track asks again: the client answers from memory.
        {"name": "repeat after the reconnect", "op": "duplicate", "of": "t-slow", "settle_ms": 1_000,
         "expect": {"success": true, "count": 1}},
        {"op": "say", "text": "Reconnect checks done."}
    ]);
    let agent = start_agent(&env, &fx, &steps);
    let connect = start_connect(&env, &fx);
    connect
        .wait_for("the slow request", Duration::from_secs(60), |e| {
            e["type"] == "tool_call_requested" && e["data"]["id"] == "t-slow"
        })
        .unwrap();
    env.pair.set_client_link(false).unwrap();
    // Longer than the server's 4 s ping timeout: both sides give up on the session, so
    // the client must rejoin in full and greet the assistant again.
    std::thread::sleep(Duration::from_secs(6));
    env.pair.set_client_link(true).unwrap();
    let outcomes = agent_steps(agent, &env, &connect);
    for o in &outcomes {
        eprintln!("{o}");
    }
    connect
        .wait_for("the final message", Duration::from_secs(10), |e| {
            e["type"] == "assistant_message" && e["data"]["text"] == "Reconnect checks done."
        })
        .unwrap();
    let events = connect.finish_ok(Duration::from_secs(20)).unwrap();
    let pos = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred);
    let lost = pos(&|e| e["type"] == "connection" && e["data"]["state"] == "reconnecting")
        .expect("the link drop was noticed");
    let back = pos(&|e| e["type"] == "connection" && e["data"]["state"] == "reconnected")
        .expect("the link came back");
    let done = pos(&|e| e["type"] == "tool_call_finished").expect("the call finished");
    // Which path ran: held by the session (finished while reconnecting) or resent by
    // LiveKit's own queue (finished before the loss was noticed). Both must deliver once.
    eprintln!(
        "tool finished {} the reconnect",
        if done > lost && done < back {
            "during"
        } else if done < lost {
            "before noticing"
        } else {
            "after"
        }
    );
    let starts = of_type(&events, "session_started");
    assert_eq!(starts.len(), 2, "hello again after the rejoin");
    assert_eq!(
        starts[0]["data"]["conversationId"], starts[1]["data"]["conversationId"],
        "the rejoin continues the same conversation"
    );
    assert_eq!(
        of_type(&events, "tool_call_requested").len(),
        1,
        "the repeated request is not a new call"
    );
    assert_eq!(of_type(&events, "tool_call_finished").len(), 1);
    assert!(of_type(&events, "error").is_empty(), "{events:?}");
    let (code, out, err) = cli(&["history", "export", "--format", "json"], &fx.data_dir());
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    let calls: Vec<&Value> = doc["conversations"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["data"]["state"], "completed");
}

/// Issue 17, finding 4, through `outpost connect`: another participant opens 70 byte
/// streams to the client on the Outpost topic and never finishes them; the assistant's
/// 30 KB ToolUseRequest (a byte stream) is still answered, and the flood is dropped
/// without a word to the user.
fn a_participant_holding_streams_open_does_not_block_the_assistants_large_request(
    kind: ServerKind,
) {
    let fx = Fixture::new();
    let env = Env::on(kind, Path::new(ROOM_BIN)).expect("namespaces and server");
    let pad = "x".repeat(30_000);
    let steps = json!([
        {"op": "wait_user", "text": USER_TEXT},
        {"name": "30 KB request", "op": "request", "id": "t-30k", "toolName": "launch_rockets",
         "execution": "client", "parameters": {"pad": pad},
         "expect": {"success": false, "errorCode": "unknown_tool"}},
        {"op": "say", "text": "Stream checks done."}
    ]);
    // On Outpost's own topic ("outpost"), once the client is in the room.
    let startup = json!({"op": "hold_streams", "n": 70, "to": ["app"], "wait_for": "app",
                         "settle": 1.0, "topic": "outpost"});
    let mallory = lkclient::PyPeer::start_with_env(
        &env.pair,
        &env.server.url,
        ROOM,
        "mallory",
        &[("LK_STARTUP", &startup.to_string())],
    )
    .expect("mallory peer");
    let agent = start_agent(&env, &fx, &steps);
    let mut connect = start_connect(&env, &fx);
    connect
        .wait_for("the welcome", Duration::from_secs(30), |e| {
            e["type"] == "session_started"
        })
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !mallory.proc.stderr().contains("\"held\"") {
        assert!(
            Instant::now() < deadline,
            "mallory never held her streams; stderr:\n{}",
            mallory.proc.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let her last packets reach the client before the assistant sends its request.
    std::thread::sleep(Duration::from_secs(1));
    connect.say(USER_TEXT).unwrap();
    let outcomes = agent_steps(agent, &env, &connect);
    for o in &outcomes {
        eprintln!("{o}");
    }
    let request = outcomes
        .iter()
        .find(|o| o["id"] == "t-30k")
        .expect("the 30 KB request step ran");
    assert_eq!(request["ok"], true, "{request}");
    connect
        .wait_for("the final message", Duration::from_secs(10), |e| {
            e["type"] == "assistant_message" && e["data"]["text"] == "Stream checks done."
        })
        .unwrap();
    let events = connect.finish_ok(Duration::from_secs(20)).unwrap();
    assert!(of_type(&events, "error").is_empty(), "{events:?}");
    assert_eq!(of_type(&events, "tool_call_requested").len(), 1);
}
