//! End to end: the user's MCP servers' tools offered to an assistant by the real
//! `outpost connect`, and called by the example Python assistant (official LiveKit SDK)
//! through `outpost-room`. The servers are the pinned reference servers nobody here wrote
//! (`@modelcontextprotocol/server-everything` and `server-memory` from tests/mcp,
//! `mcp-server-time` from the test venv), configured in a throw-away `mcp.toml`.
//!
//! Covered: the catalogue (names, `serverName`), policy allow / tool deny / server deny /
//! default ask (denied: `connect` has no consent UI), results in the documented shape,
//! progress reaching the assistant, ToolUseCancel and `timeoutMs` reaching the server as
//! `notifications/cancelled`, a server killed mid-call (clean `execution_error`, the next
//! call works after the restart), unknown servers and hostile names, roots (the allowed
//! folders; an edit of the policy file mid-session reaches the servers as
//! `roots/list_changed` and the new list), and the history and its search. Consent Allow/Deny with a UI is covered by `agents_e2e.rs` (a LiveKit
//! Agents agent calls server-everything's echo over RPC) and in-process by
//! `crates/outpost-core/tests/mcp_tools.rs`.
//!
//! Needs root, iproute2, node, the venv and `npm ci` in tests/mcp (scripts/setup.sh).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use outpost_tests::lkclient::{self, Env};
use outpost_tests::proc::Proc;
use outpost_tests::python;
use serde_json::{Value, json};

const ROOM_BIN: &str = env!("CARGO_BIN_EXE_room_server");
const CLI_BIN: &str = env!("CARGO_BIN_EXE_outpost_cli");
const ROOM: &str = "mcp-e2e";
const USER_TEXT: &str = "use my MCP tools";

fn node_server(package: &str) -> PathBuf {
    let p = python::workspace_root()
        .join("tests/mcp/node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup.sh (npm ci in tests/mcp)",
        p.display()
    );
    p
}

/// The config and data directories, `mcp.toml`, the policy, and where the servers' wire
/// traffic and pid go.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config");
        std::fs::create_dir_all(&config).unwrap();
        let everything = node_server("server-everything").display().to_string();
        let memory = node_server("server-memory").display().to_string();
        let py = python::python().unwrap().display().to_string();
        let wire = dir.path().join("wire");
        std::fs::create_dir_all(&wire).unwrap();
        // `everything` behind tee, so the test sees what the server received; `crashy`
        // writes its pid and becomes the server, so the test can kill it mid-call.
        let teed = format!(
            "tee '{}' | node '{everything}' stdio",
            wire.join("in.jsonl").display()
        );
        let crashy = format!(
            "echo $$ > '{}'; exec node '{everything}' stdio",
            wire.join("crashy.pid").display()
        );
        let toml_str = |s: &str| toml::Value::String(s.to_owned()).to_string();
        let mcp = format!(
            "[servers.everything]\ncommand = \"sh\"\nargs = [\"-c\", {teed}]\n\n\
             [servers.crashy]\ncommand = \"sh\"\nargs = [\"-c\", {crashy}]\n\n\
             [servers.time]\ncommand = {py}\nargs = [\"-m\", \"mcp_server_time\", \"--local-timezone\", \"UTC\"]\n\n\
             [servers.memory]\ncommand = \"node\"\nargs = [{memory}]\nenv = {{ MEMORY_FILE_PATH = {memfile} }}\n",
            teed = toml_str(&teed),
            crashy = toml_str(&crashy),
            py = toml_str(&py),
            memory = toml_str(&memory),
            memfile = toml_str(&dir.path().join("memory.jsonl").display().to_string()),
        );
        std::fs::write(config.join("mcp.toml"), mcp).unwrap();
        // One allowed folder: the servers' roots (a denied one is not offered).
        let shared = dir.path().join("shared");
        std::fs::create_dir_all(&shared).unwrap();
        let policy = format!(
            "consent_timeout_secs = 5\n\
             [tools]\n\"mcp__everything__get-sum\" = \"deny\"\n\n\
             [mcp_servers]\neverything = \"allow\"\ncrashy = \"allow\"\ntime = \"deny\"\n\n\
             [[folders]]\npath = {shared}\naccess = \"allow\"\n\n\
             [[folders]]\npath = {wire}\naccess = \"deny\"\n",
            shared = toml_str(&shared.display().to_string()),
            wire = toml_str(&wire.display().to_string()),
        );
        std::fs::write(dir.path().join("policy.toml"), policy).unwrap();
        Fixture { dir }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn wire(&self, name: &str) -> PathBuf {
        self.dir.path().join("wire").join(name)
    }
}

/// `outpost connect --json` in the client namespace; stdout lines collected as they come.
struct Connect {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    stderr_path: PathBuf,
}

impl Connect {
    fn start(env: &Env, fx: &Fixture) -> Connect {
        let stderr_path = fx.dir.path().join("connect.stderr");
        let mut child = env
            .outpost_connect(Path::new(CLI_BIN), ROOM)
            .unwrap()
            .arg("--json")
            .arg("--policy")
            .arg(fx.dir.path().join("policy.toml"))
            .arg("--data-dir")
            .arg(fx.data_dir())
            .env("OUTPOST_CONFIG_DIR", fx.dir.path().join("config"))
            .env("OUTPOST_SECRETS", "memory")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .expect("spawning outpost connect");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().unwrap();
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        Connect {
            child,
            lines,
            stderr_path,
        }
    }

    fn say(&mut self, text: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{text}").unwrap();
        stdin.flush().unwrap();
    }

    fn events(&self) -> Vec<Value> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }

    fn wait_for(&self, what: &str, timeout: Duration, pred: impl Fn(&Value) -> bool) {
        let deadline = Instant::now() + timeout;
        while !self.events().iter().any(&pred) {
            assert!(
                Instant::now() < deadline,
                "outpost connect never showed {what}; events:\n{}\nstderr:\n{}",
                self.lines.lock().unwrap().join("\n"),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    fn finish(mut self) -> Vec<Value> {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "outpost connect did not leave after EOF; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            status.success(),
            "outpost connect exited with {status}; stderr:\n{}\nevents:\n{}",
            self.stderr(),
            self.lines.lock().unwrap().join("\n")
        );
        self.events()
    }
}

impl Drop for Connect {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_agent(env: &Env, fx: &Fixture, steps: &Value) -> Proc {
    let py = python::python().unwrap();
    let scenario = fx.dir.path().join("scenario.json");
    std::fs::write(&scenario, serde_json::to_vec_pretty(steps).unwrap()).unwrap();
    let script = python::workspace_root().join("examples/python-agent/agent.py");
    let mut cmd = env.pair.server_command(&py);
    cmd.arg(script)
        .args([
            "--url",
            &env.server.url,
            "--room",
            ROOM,
            "--identity",
            "assistant",
        ])
        .arg("--scenario")
        .arg(&scenario)
        .args(["--timeout", "170"])
        .env("LK_API_KEY", lkclient::DEV_KEY)
        .env("LK_API_SECRET", lkclient::DEV_SECRET)
        .env("PYTHONWARNINGS", "ignore");
    Proc::spawn("python agent", cmd).unwrap()
}

fn cli(args: &[&str], data_dir: &Path) -> (i32, String, String) {
    let out = Command::new(CLI_BIN)
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn mcp_tools_are_offered_gated_run_cancelled_and_logged() {
    let fx = Fixture::new();
    let env = Env::start(Path::new(ROOM_BIN)).expect("namespaces and room server");
    let long = "mcp__everything__trigger-long-running-operation";
    let steps = json!([
        {"op": "wait_user", "text": USER_TEXT},
        {"name": "catalogue", "op": "expect_tool", "toolName": "mcp__everything__echo",
         "fields": {"serverName": "everything"}},
        {"op": "expect_tool", "toolName": "mcp__time__get_current_time",
         "fields": {"serverName": "time"}},
        {"op": "expect_tool", "toolName": "read_local_file"},
        // server-everything adds tools after `initialized` (notifications/tools/list_changed):
        // in the hello, or by a ToolsChanged.
        {"name": "list changed", "op": "wait_tool", "toolName": "mcp__everything__get-roots-list"},
        {"name": "allowed by the server rule", "op": "request", "id": "m-echo",
         "toolName": "mcp__everything__echo", "parameters": {"message": "hi"},
         "expect": {"success": true, "result": {"text": "Echo: hi", "isError": false,
                    "content": [{"type": "text", "text": "Echo: hi"}]}}},
        {"name": "a tool rule denies", "op": "request", "id": "m-sum",
         "toolName": "mcp__everything__get-sum", "parameters": {"a": 1, "b": 2},
         "expect": {"success": false, "errorCode": "permission_denied",
                    "errorMessageContains": "mcp__everything__get-sum"}},
        {"name": "a server rule denies", "op": "request", "id": "m-time",
         "toolName": "mcp__time__get_current_time", "parameters": {"timezone": "UTC"},
         "expect": {"success": false, "errorCode": "permission_denied",
                    "errorMessageContains": "MCP server 'time'"}},
        {"name": "default ask, no consent UI", "op": "request", "id": "m-mem",
         "toolName": "mcp__memory__read_graph", "parameters": {},
         "expect": {"success": false, "errorCode": "permission_denied"}},
        {"name": "unknown server", "op": "request", "id": "m-nosrv",
         "toolName": "mcp__nosuch__echo", "parameters": {},
         "expect": {"success": false, "errorCode": "unknown_tool"}},
        {"name": "hostile name", "op": "request", "id": "m-hostile",
         "toolName": "mcp__everything__../../echo", "parameters": {"message": "x"},
         "expect": {"success": false, "errorCode": "unknown_tool"}},
        {"name": "bad arguments", "op": "request", "id": "m-badargs",
         "toolName": "mcp__everything__echo", "parameters": {"message": 5},
         "expect": {"success": false, "errorCode": "invalid_parameters"}},
        {"name": "progress", "op": "request", "id": "m-long", "toolName": long,
         "parameters": {"duration": 1, "steps": 2},
         "expect": {"success": true, "progressContains": "1/2"}},
        {"name": "cancel", "op": "request", "id": "m-cancel", "toolName": long,
         "parameters": {"duration": 6, "steps": 6}, "cancelAfterMs": 1500,
         "expect": {"success": false, "errorCode": "cancelled"}},
        {"name": "timeout", "op": "request", "id": "m-timeout", "toolName": long,
         "timeoutMs": 1500, "parameters": {"duration": 6, "steps": 6},
         "expect": {"success": false, "errorCode": "timeout"}},
        {"name": "server killed mid-call", "op": "request", "id": "m-crash",
         "toolName": "mcp__crashy__trigger-long-running-operation",
         "parameters": {"duration": 20, "steps": 20},
         "expect": {"success": false, "errorCode": "execution_error",
                    "errorMessageContains": "MCP server 'crashy' stopped during the call"}},
        // The crash takes crashy's tools away and the restart brings them back: two
        // ToolsChanged at least.
        {"name": "gone after the crash", "op": "wait_tool", "toolName": "mcp__crashy__echo",
         "absent": true, "wait_ms": 10000},
        {"name": "back after restart", "op": "wait_tool", "toolName": "mcp__crashy__echo",
         "wait_ms": 30000},
        {"op": "sleep", "ms": 1000},
        {"name": "after the restart", "op": "request", "id": "m-again",
         "toolName": "mcp__crashy__echo", "parameters": {"message": "back"},
         "expect": {"success": true, "result": {"text": "Echo: back"}}},
        {"op": "say", "text": "MCP checks are done."}
    ]);
    let agent = start_agent(&env, &fx, &steps);
    let mut connect = Connect::start(&env, &fx);
    connect.say(USER_TEXT);
    // Kill the `crashy` server once its call reports progress.
    connect.wait_for(
        "progress of the call to kill",
        Duration::from_secs(120),
        |e| e["type"] == "tool_call_progress" && e["data"]["id"] == "m-crash",
    );
    // The pid of the server process this test's `outpost connect` started (`exec`ed by sh).
    let pid = std::fs::read_to_string(fx.wire("crashy.pid")).unwrap();
    let killed = Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success(), "kill -KILL {pid}");
    // The user allows one more folder by editing the policy file mid-session: the servers
    // are told (roots/list_changed) and get it at their next roots/list.
    let shared2 = fx.dir.path().join("shared2");
    std::fs::create_dir_all(&shared2).unwrap();
    let policy_file = fx.dir.path().join("policy.toml");
    let mut policy = std::fs::read_to_string(&policy_file).unwrap();
    policy.push_str(&format!(
        "\n[[folders]]\npath = {}\naccess = \"allow\"\n",
        toml::Value::String(shared2.display().to_string())
    ));
    std::fs::write(&policy_file, policy).unwrap();
    let shared2_uri = outpost_mcp::Root::from_path(&shared2).unwrap().uri;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !jsonl(&fx.wire("in.jsonl")).iter().any(|m| {
        m["result"]["roots"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["uri"] == shared2_uri.as_str()))
    }) {
        assert!(
            Instant::now() < deadline,
            "the new allowed folder never reached the server as a root; stderr:\n{}",
            connect.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let (status, out, err) = agent.finish(Duration::from_secs(180)).unwrap();
    let outcomes: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    for o in &outcomes {
        eprintln!("{o}");
    }
    assert!(
        status.success(),
        "the assistant's scenario failed ({status}):\n{out}\nstderr:\n{err}\n--- outpost connect ---\n{}\n{}",
        connect.lines.lock().unwrap().join("\n"),
        connect.stderr(),
    );
    connect.wait_for(
        "the final assistant message",
        Duration::from_secs(10),
        |e| e["type"] == "assistant_message" && e["data"]["text"] == "MCP checks are done.",
    );
    let events = connect.finish();

    // The assistant (protocol 2) was told of the crash and of the restart.
    let changed = |name: &str| {
        outcomes
            .iter()
            .find(|o| o["name"] == name)
            .and_then(|o| o["toolsChanged"].as_u64())
            .unwrap_or_else(|| panic!("no outcome for {name}"))
    };
    assert!(
        changed("back after restart") >= changed("list changed") + 2,
        "the crash and the restart each send a ToolsChanged"
    );
    assert!(
        events.iter().any(|e| e["type"] == "tools_changed"),
        "the UI is told too"
    );

    // The card names the server and carries its claims.
    let card = events
        .iter()
        .find(|e| e["type"] == "tool_call_requested" && e["data"]["id"] == "m-long")
        .expect("a card for the long call");
    assert_eq!(card["data"]["serverName"], "everything");
    assert_eq!(card["data"]["claims"]["readOnly"], true, "{card}");

    // The server received `notifications/cancelled` for the cancelled and the timed-out
    // call (the second and third long calls it was sent).
    let received = jsonl(&fx.wire("in.jsonl"));
    let long_ids: Vec<Value> = received
        .iter()
        .filter(|m| {
            m["method"] == "tools/call" && m["params"]["name"] == "trigger-long-running-operation"
        })
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(long_ids.len(), 3, "{long_ids:?}");
    for id in &long_ids[1..] {
        assert!(
            received.iter().any(
                |m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == *id
            ),
            "no notifications/cancelled for request {id}"
        );
    }
    assert!(
        !received
            .iter()
            .any(|m| m["method"] == "tools/call" && m["params"]["name"] == "get-sum"),
        "a denied call reached the server"
    );
    // The roots Outpost answered the server's `roots/list` with: the allowed folder only,
    // then (after the policy edit and `notifications/roots/list_changed`) both allowed
    // folders; never the denied one.
    let shared = outpost_mcp::Root::from_path(&fx.dir.path().join("shared")).unwrap();
    let answers: Vec<Vec<&str>> = received
        .iter()
        .filter_map(|m| m["result"]["roots"].as_array())
        .map(|r| r.iter().filter_map(|r| r["uri"].as_str()).collect())
        .collect();
    assert!(
        !answers.is_empty(),
        "the server never got an answer to roots/list"
    );
    assert_eq!(answers[0], [shared.uri.as_str()], "{answers:?}");
    let changed_at = received
        .iter()
        .position(|m| m["method"] == "notifications/roots/list_changed")
        .expect("no notifications/roots/list_changed after the policy edit");
    let last = answers.last().unwrap();
    assert_eq!(
        last,
        &[shared.uri.as_str(), shared2_uri.as_str()],
        "{answers:?}"
    );
    let first_new = received
        .iter()
        .position(|m| {
            m["result"]["roots"]
                .as_array()
                .is_some_and(|r| r.len() == 2)
        })
        .unwrap();
    assert!(
        changed_at < first_new,
        "the change was announced before it was asked for"
    );

    // History and audit: every MCP call with its server; search finds them.
    let data = fx.data_dir();
    let (code, out, err) = cli(&["history", "export", "--format", "json"], &data);
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    let items = doc["conversations"][0]["items"].as_array().unwrap().clone();
    let call = |id: &str| {
        items
            .iter()
            .find(|i| i["type"] == "tool_call" && i["data"]["id"] == id)
            .map(|i| i["data"].clone())
            .unwrap_or_else(|| panic!("no tool call {id} in the store"))
    };
    assert_eq!(call("m-echo")["server_name"], "everything");
    assert_eq!(call("m-echo")["state"], "completed");
    assert_eq!(call("m-time")["server_name"], "time");
    assert_eq!(call("m-time")["error_code"], "permission_denied");
    assert_eq!(call("m-crash")["server_name"], "crashy");
    assert_eq!(
        call("m-nosrv")["server_name"],
        "",
        "an unknown server is not recorded as one"
    );
    assert!(
        items
            .iter()
            .any(|i| i["type"] == "consent" && i["data"]["tool_call_id"] == "m-echo"),
        "the policy's decision is in the audit trail"
    );
    let (code, out, err) = cli(&["history", "search", "crashy", "--json"], &data);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|h| h["kind"] != "message"),
        "searching the server's name finds its calls: {out}"
    );
}
