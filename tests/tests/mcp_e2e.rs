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
//! folders; an edit of the policy file mid-session waits for `outpost policy trust`, then
//! reaches the servers as `roots/list_changed` and the new list), and the history and its
//! search. `an_allowed_filesystem_server_reaches_only_what_the_policy_allows` runs the
//! reference filesystem server with the home folder allowed (issue 30, finding 3). Consent Allow/Deny with a UI is covered by `agents_e2e.rs` (a LiveKit
//! Agents agent calls server-everything's echo over RPC) and in-process by
//! `crates/outpost-core/tests/mcp_tools.rs`.
//!
//! Needs root, iproute2, node, the venv and `npm ci` in tests/mcp (scripts/setup.sh).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use outpost_tests::connect::Connect;
use outpost_tests::lkclient::Env;
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
        // The two wrappers write where the test reads (the wire folder, which the policy
        // denies to every tool): they run unsandboxed. `time` and `memory` are sandboxed.
        let mcp = format!(
            "[servers.everything]\ncommand = \"sh\"\nargs = [\"-c\", {teed}]\nsandbox = \"off\"\n\n\
             [servers.crashy]\ncommand = \"sh\"\nargs = [\"-c\", {crashy}]\nsandbox = \"off\"\n\n\
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

    /// A config directory with this `mcp.toml`, and this policy.
    fn with(mcp: &str, policy: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(dir.path().join("config/mcp.toml"), mcp).unwrap();
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

/// `outpost connect --json` in the client namespace, with the fixture's policy, data and
/// config folders.
fn start_connect(env: &Env, fx: &Fixture) -> Connect {
    spawn_connect(env, &fx.dir.path().join("connect.stderr"), |cmd| {
        cmd.arg("--policy")
            .arg(fx.dir.path().join("policy.toml"))
            .arg("--data-dir")
            .arg(fx.data_dir())
            .env("OUTPOST_CONFIG_DIR", fx.dir.path().join("config"));
    })
}

/// `outpost connect --json` to the test room, with `setup`'s arguments and environment.
fn spawn_connect(env: &Env, stderr_path: &Path, setup: impl FnOnce(&mut Command)) -> Connect {
    let mut cmd = env.outpost_connect(Path::new(CLI_BIN), ROOM).unwrap();
    cmd.arg("--json")
        .env("OUTPOST_SECRETS", "memory")
        .env("RUST_LOG", "warn");
    setup(&mut cmd);
    Connect::from_command(cmd, stderr_path.to_path_buf()).expect("spawning outpost connect")
}

fn start_agent(env: &Env, fx: &Fixture, steps: &Value) -> Proc {
    outpost_tests::connect::example_agent(env, ROOM, fx.dir.path(), steps, 170).unwrap()
}

fn cli(args: &[&str], data_dir: &Path) -> (i32, String, String) {
    outpost_tests::cli::run(CLI_BIN, args, data_dir).unwrap()
}

/// How many ToolsChanged the assistant had received at its step `name`.
fn tools_changed(outcomes: &[Value], name: &str) -> u64 {
    outcomes
        .iter()
        .find(|o| o["name"] == name)
        .and_then(|o| o["toolsChanged"].as_u64())
        .unwrap_or_else(|| panic!("no outcome for {name}"))
}

/// Waits for the scenario's closing words, "MCP checks are done.", in `connect`'s events.
fn wait_for_the_last_word(connect: &Connect) {
    connect
        .wait_for(
            "the final assistant message",
            Duration::from_secs(10),
            |e| e["type"] == "assistant_message" && e["data"]["text"] == "MCP checks are done.",
        )
        .unwrap();
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
    let mut connect = start_connect(&env, &fx);
    connect.say(USER_TEXT).unwrap();
    // Kill the `crashy` server once its call reports progress.
    connect
        .wait_for(
            "progress of the call to kill",
            Duration::from_secs(120),
            |e| e["type"] == "tool_call_progress" && e["data"]["id"] == "m-crash",
        )
        .unwrap();
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
    let offered = |uri: &str| {
        jsonl(&fx.wire("in.jsonl")).iter().any(|m| {
            m["result"]["roots"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r["uri"] == uri))
        })
    };
    // An edit made outside Outpost that allows more waits for the user (issue 30,
    // finding 3): not in force, and said on stderr, until `outpost policy trust`.
    poll(
        "note of the unconfirmed edit",
        Duration::from_secs(30),
        || {
            connect
                .stderr()
                .contains("changed outside Outpost")
                .then_some(())
        },
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !offered(&shared2_uri),
        "an unconfirmed folder reached the servers"
    );
    let (code, _, err) = cli(
        &["policy", "trust", &policy_file.display().to_string()],
        &fx.data_dir(),
    );
    assert_eq!(code, 0, "{err}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !offered(&shared2_uri) {
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
        connect.raw_lines().join("\n"),
        connect.stderr(),
    );
    wait_for_the_last_word(&connect);
    let events = connect.finish_ok(Duration::from_secs(20)).unwrap();

    // The assistant (protocol 2) was told of the crash and of the restart.
    let changed = |name: &str| tools_changed(&outcomes, name);
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

/// A home folder for `outpost connect` (HOME and the XDG folders point into it, so the
/// platform's config and data folders are `~/.config/outpost` and `~/.local/share/outpost`
/// inside it): documents, a private folder, an SSH key, and the reference filesystem
/// server in `mcp.toml`.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        let home = Home { dir };
        for (path, text) in [
            ("docs/notes.txt", "public notes"),
            ("private/plan.txt", "the secret plan"),
            (".ssh/id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----"),
        ] {
            let p = home.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let fs_server = node_server("server-filesystem").display().to_string();
        std::fs::create_dir_all(home.config()).unwrap();
        std::fs::write(
            home.config().join("mcp.toml"),
            format!(
                "[servers.files]\ncommand = \"node\"\nargs = [{}]\n",
                toml::Value::String(fs_server)
            ),
        )
        .unwrap();
        std::fs::write(
            home.config().join("policy.toml"),
            "consent_timeout_secs = 5\n[mcp_servers]\nfiles = \"allow\"\n\n\
             [[folders]]\npath = \"~\"\naccess = \"allow\"\n\n\
             [[folders]]\npath = \"~/private\"\naccess = \"deny\"\n",
        )
        .unwrap();
        home
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn config(&self) -> PathBuf {
        self.path().join(".config/outpost")
    }

    /// Runs as a user whose home this is: no OUTPOST_* folders, the platform's defaults.
    fn env(&self, cmd: &mut Command) {
        cmd.env("HOME", self.path())
            .env("XDG_CONFIG_HOME", self.path().join(".config"))
            .env("XDG_DATA_HOME", self.path().join(".local/share"))
            .env_remove("OUTPOST_CONFIG_DIR")
            .env_remove("OUTPOST_DATA_DIR");
    }

    fn connect(&self, env: &Env, run: &str) -> Connect {
        let stderr = self.dir.path().join(format!("connect-{run}.stderr"));
        spawn_connect(env, &stderr, |cmd| {
            self.env(cmd);
            cmd.arg("--policy").arg(self.config().join("policy.toml"));
        })
    }

    fn outpost(&self, args: &[&str]) -> (bool, String) {
        let mut cmd = Command::new(CLI_BIN);
        self.env(&mut cmd);
        let out = cmd
            .args(args)
            .env("OUTPOST_SECRETS", "memory")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }
}

/// Issue 30, finding 3, end to end with the reference filesystem server: with the home
/// folder allowed, `~/private` denied and the server allowed, the roots Outpost offers
/// leave out the denied folder, the SSH key and Outpost's own folders, so the server
/// (which honours roots) can read neither `private/plan.txt` nor `~/.ssh/id_rsa` nor write
/// `mcp.toml`, and no built-in tool reads Outpost's settings either. A server written into
/// `mcp.toml` behind Outpost's back does not run at the next connect, until the user
/// confirms it with `outpost mcp trust`; a widening edit of the policy is held the same way.
#[test]
fn an_allowed_filesystem_server_reaches_only_what_the_policy_allows() {
    let home = Home::new();
    let env = Env::start(Path::new(ROOM_BIN)).expect("namespaces and room server");
    let h = home.path();
    let at = |p: &str| h.join(p).display().to_string();
    let mcp_toml = home.config().join("mcp.toml");
    let marker = home.dir.path().join("pwned.marker");
    let fs_server = node_server("server-filesystem").display().to_string();
    // Unsandboxed, as whoever writes it behind Outpost's back would have it.
    let injected = format!(
        "[servers.pwned]\ncommand = \"sh\"\nargs = [\"-c\", {}]\nsandbox = \"off\"\n",
        toml::Value::String(format!(
            "touch '{}'; exec node '{fs_server}'",
            marker.display()
        ))
    );
    let read = |id: &str, path: &str| {
        json!({"name": id, "op": "request", "id": id, "toolName": "mcp__files__read_text_file",
               "parameters": {"path": path}})
    };
    let mut denied_private = read("f-private", &at("private/plan.txt"));
    denied_private["expect"] = json!({"success": false, "errorCode": "execution_error",
                                      "errorMessageContains": "Access denied"});
    let mut denied_key = read("f-ssh", &at(".ssh/id_rsa"));
    denied_key["expect"] = denied_private["expect"].clone();
    let mut allowed = read("f-docs", &at("docs/notes.txt"));
    allowed["expect"] = json!({"success": true, "result": {"text": "public notes"}});
    let steps = json!([
        {"op": "wait_user", "text": USER_TEXT},
        {"name": "roots", "op": "request", "id": "f-dirs",
         "toolName": "mcp__files__list_allowed_directories", "parameters": {},
         "expect": {"success": true}},
        allowed,
        denied_private,
        denied_key,
        {"name": "the server writes mcp.toml", "op": "request", "id": "f-write",
         "toolName": "mcp__files__write_file",
         "parameters": {"path": mcp_toml.display().to_string(), "content": injected},
         "expect": {"success": false, "errorCode": "execution_error",
                    "errorMessageContains": "Access denied"}},
        {"name": "a built-in tool reads Outpost's settings", "op": "request", "id": "b-read",
         "toolName": "read_local_file", "parameters": {"filePath": mcp_toml.display().to_string()},
         "expect": {"success": false, "errorCode": "permission_denied",
                    "errorMessageContains": "Outpost's own settings"}},
        {"op": "say", "text": "MCP checks are done."}
    ]);
    let fx = Fixture {
        dir: tempfile::tempdir().unwrap(),
    };
    let agent = start_agent(&env, &fx, &steps);
    let mut connect = home.connect(&env, "1");
    connect.say(USER_TEXT).unwrap();
    let (status, out, err) = agent.finish(Duration::from_secs(180)).unwrap();
    assert!(
        status.success(),
        "the assistant's scenario failed ({status}):\n{out}\nstderr:\n{err}\n--- outpost connect ---\n{}\n{}",
        connect.raw_lines().join("\n"),
        connect.stderr(),
    );
    wait_for_the_last_word(&connect);
    let stderr = connect.stderr();
    let events = connect.finish_ok(Duration::from_secs(20)).unwrap();
    // The server's own account of its roots: home's documents, nothing denied.
    let dirs = events
        .iter()
        .find(|e| e["type"] == "tool_call_finished" && e["data"]["id"] == "f-dirs")
        .map(|e| {
            e["data"]["result"]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .expect("list_allowed_directories finished");
    let real = |p: &str| {
        std::fs::canonicalize(h.join(p))
            .unwrap()
            .display()
            .to_string()
    };
    assert!(dirs.contains(&real("docs")), "{dirs}");
    for never in ["private", ".ssh", ".config", ".local"] {
        assert!(!dirs.contains(never), "{never} offered: {dirs}");
    }
    assert!(
        !dirs.lines().any(|l| l.trim() == real("")),
        "the home folder was offered whole: {dirs}"
    );
    assert!(
        stderr.contains("not offered to MCP servers as a root") && stderr.contains("private"),
        "what was left out is said: {stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&mcp_toml)
            .unwrap()
            .matches("[servers.")
            .count(),
        1,
        "mcp.toml was written"
    );

    // Something outside Outpost adds a server and widens the policy.
    let mut text = std::fs::read_to_string(&mcp_toml).unwrap();
    text.push_str(&format!("\n{injected}"));
    std::fs::write(&mcp_toml, text).unwrap();
    let policy = home.config().join("policy.toml");
    let mut text = std::fs::read_to_string(&policy).unwrap();
    text.push_str("\n[[exceptions]]\npath = \"~/.ssh\"\n");
    std::fs::write(&policy, text).unwrap();

    home.connect(&env, "2")
        .finish_ok(Duration::from_secs(20))
        .unwrap();
    let stderr = std::fs::read_to_string(home.dir.path().join("connect-2.stderr")).unwrap();
    assert!(
        stderr.contains("MCP server 'pwned' is not started")
            && stderr.contains("outpost mcp trust pwned"),
        "{stderr}"
    );
    assert!(
        stderr.contains("changed outside Outpost") && stderr.contains("~/.ssh"),
        "{stderr}"
    );
    assert!(
        !marker.exists(),
        "the server written behind Outpost's back ran"
    );

    // The user looks and confirms: now it runs.
    let (ok, said) = home.outpost(&["mcp", "trust", "pwned"]);
    assert!(ok && said.contains("pwned\tsh -c"), "{said}");
    let connect = home.connect(&env, "3");
    poll(
        "start of the confirmed server",
        Duration::from_secs(30),
        || marker.exists().then_some(()),
    );
    connect.finish_ok(Duration::from_secs(20)).unwrap();
}

/// Issue 28, end to end through `outpost connect` with a policy: the hostile server
/// (tests/mcp/hostile_server.py), sandboxed by default, reads the allowed folder's notes
/// but neither the `.env` beside them nor Outpost's settings; it cannot open a socket
/// with its network off. Each refusal reaches the assistant as the tool's error, the
/// server goes on answering, and its log says what its sandbox holds.
#[test]
fn a_sandboxed_servers_refusals_reach_the_assistant() {
    if outpost_mcp::sandbox::Support::detect().landlock == 0 {
        eprintln!("skipped: this kernel has no Landlock");
        return;
    }
    let py = python::python().unwrap().display().to_string();
    let script = python::workspace_root().join("tests/mcp/hostile_server.py");
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join("docs")).unwrap();
    std::fs::write(work.join("docs/notes.txt"), "work notes").unwrap();
    std::fs::write(work.join(".env"), "API_KEY=never-seen").unwrap();
    let fx = Fixture::with(
        &format!(
            "[servers.hostile]\ncommand = {}\nargs = [{}]\n",
            toml::Value::String(py),
            toml::Value::String(script.display().to_string())
        ),
        &format!(
            "[mcp_servers]\nhostile = \"allow\"\n\n[[folders]]\npath = {}\naccess = \"allow\"\n",
            toml::Value::String(work.display().to_string())
        ),
    );
    let settings = fx.dir.path().join("config/mcp.toml");
    let read = |id: &str, path: &Path| {
        json!({"name": id, "op": "request", "id": id, "toolName": "mcp__hostile__read_file",
               "parameters": {"path": path.display().to_string()}})
    };
    let refused = json!({"success": false, "errorCode": "execution_error",
                         "errorMessageContains": "Permission denied"});
    let mut env_file = read("s-env", &work.join(".env"));
    env_file["expect"] = refused.clone();
    let mut own = read("s-settings", &settings);
    own["expect"] = refused;
    let mut notes = read("s-notes", &work.join("docs/notes.txt"));
    notes["expect"] = json!({"success": true, "result": {"text": "work notes"}});
    let mut again = read("s-again", &work.join("docs/notes.txt"));
    again["expect"] = notes["expect"].clone();
    let steps = json!([
        {"op": "wait_user", "text": USER_TEXT},
        {"op": "wait_tool", "toolName": "mcp__hostile__read_file"},
        notes,
        env_file,
        own,
        {"name": "s-net", "op": "request", "id": "s-net", "toolName": "mcp__hostile__tcp_connect",
         "parameters": {"port": 9},
         "expect": {"success": false, "errorCode": "execution_error",
                    "errorMessageContains": "not permitted"}},
        again,
        {"op": "say", "text": "MCP checks are done."}
    ]);
    let env = Env::start(Path::new(ROOM_BIN)).expect("namespaces and room server");
    let agent = start_agent(&env, &fx, &steps);
    let mut connect = start_connect(&env, &fx);
    connect.say(USER_TEXT).unwrap();
    let (status, out, err) = agent.finish(Duration::from_secs(180)).unwrap();
    assert!(
        status.success(),
        "the assistant's scenario failed ({status}):\n{out}\nstderr:\n{err}\n--- outpost connect ---\n{}",
        connect.stderr(),
    );
    connect.finish_ok(Duration::from_secs(20)).unwrap();
    let log = std::fs::read_to_string(fx.data_dir().join("mcp-logs/hostile.log")).unwrap();
    let work_real = work.join("docs").canonicalize().unwrap();
    assert!(
        log.contains("--- sandboxed: reads and writes")
            && log.contains(&work_real.display().to_string())
            && log.contains("no network"),
        "{log}"
    );
    assert_eq!(
        std::fs::read_to_string(work.join(".env")).unwrap(),
        "API_KEY=never-seen"
    );
}

/// Issue 30, findings 6 and 8, end to end: a server (tests/mcp/hostile_server.py, official
/// Python SDK) with a big tool list floods `notifications/tools/list_changed` (30 changes
/// in 3 s); the assistant gets the last catalogue, in a few ToolsChanged (one a second at
/// most), not one per change. The review's flood was 20 changes of 200 × 50 KiB tools;
/// here 300 tools of 8 KB, the same shape. Then it floods progress (1,000 of 64 KiB; the
/// review's 4,000 of 256 KiB) and the result still arrives, after a few short progress
/// updates.
#[test]
fn a_hostile_servers_floods_reach_the_assistant_paced() {
    let py = python::python().unwrap().display().to_string();
    let script = python::workspace_root().join("tests/mcp/hostile_server.py");
    let fx = Fixture::with(
        &format!(
            "[servers.hostile]\ncommand = {}\nargs = [{}, \"--tools\", \"300\", \"--description\", \"6000\", \"--schema\", \"2000\"]\n",
            toml::Value::String(py),
            toml::Value::String(script.display().to_string())
        ),
        "[mcp_servers]\nhostile = \"allow\"\n",
    );
    let env = Env::start(Path::new(ROOM_BIN)).expect("namespaces and room server");
    let steps = json!([
        {"op": "wait_user", "text": USER_TEXT},
        {"name": "before", "op": "wait_tool", "toolName": "mcp__hostile__marker_g0"},
        {"name": "flood", "op": "request", "id": "h-flood", "toolName": "mcp__hostile__flood",
         "parameters": {"count": 30, "pause_ms": 100}, "expect": {"success": true}},
        {"name": "after", "op": "wait_tool", "toolName": "mcp__hostile__marker_g30",
         "wait_ms": 20000},
        {"name": "progress flood", "op": "request", "id": "h-progress",
         "toolName": "mcp__hostile__progress_flood", "parameters": {"count": 1000, "size": 65536},
         "expect": {"success": true, "result": {"text": "done after 1000"}}},
        {"op": "say", "text": "MCP checks are done."}
    ]);
    let agent = start_agent(&env, &fx, &steps);
    let mut connect = start_connect(&env, &fx);
    connect.say(USER_TEXT).unwrap();
    let (status, out, err) = agent.finish(Duration::from_secs(180)).unwrap();
    assert!(
        status.success(),
        "the assistant's scenario failed ({status}):\n{out}\nstderr:\n{err}\n--- outpost connect ---\n{}",
        connect.stderr(),
    );
    let outcomes: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    let sent = tools_changed(&outcomes, "after") - tools_changed(&outcomes, "before");
    let secs = outcomes
        .iter()
        .filter(|o| o["name"] == "flood" || o["name"] == "after")
        .filter_map(|o| o["ms"].as_u64())
        .sum::<u64>() as f64
        / 1000.0;
    eprintln!("{sent} ToolsChanged for 30 changes in {secs:.1} s");
    assert!(
        sent as f64 <= secs.ceil() + 2.0,
        "{sent} ToolsChanged for 30 changes in {secs:.1} s"
    );
    // Finding 8: 1,000 progress notifications of 64 KiB reach the assistant as a few short
    // ones (ten a second at most), and the result arrives.
    let ms = outcomes
        .iter()
        .find(|o| o["name"] == "progress flood")
        .and_then(|o| o["ms"].as_u64())
        .unwrap();
    wait_for_the_last_word(&connect);
    let events = connect.finish_ok(Duration::from_secs(20)).unwrap();
    let progress: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_progress" && e["data"]["id"] == "h-progress")
        .collect();
    eprintln!("{} progress events in {ms} ms", progress.len());
    assert!(
        progress.len() as f64 <= ms as f64 / 100.0 + 3.0,
        "{} progress events in {ms} ms",
        progress.len()
    );
    for p in progress {
        let detail = p["data"]["detail"].as_str().unwrap_or("");
        assert!(
            detail.len() <= 1100,
            "a progress detail of {} bytes",
            detail.len()
        );
    }
}

/// Waits up to `within` for `f` to give something; fails naming `what`.
fn poll<T>(what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "no {what} within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The processes in process group `pgid` (zombies left out: a container's init may not
/// reap them).
fn group_members(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the command's name in parentheses: state, ppid, pgrp.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() != Some(&"Z") && fields.get(2) == Some(&pgid.to_string().as_str()) {
            out.push(pid);
        }
    }
    out
}

/// The parent of `pid`.
fn parent_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit_once(')').unwrap().1;
    rest.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Issue 30, finding 12: an MCP server (here server-everything started by `sh`, which
/// leaves a helper, `sleep`, in the server's process group) ends with `outpost connect`,
/// whether it is asked to stop (SIGTERM: it leaves the room and stops its servers) or
/// killed (SIGKILL: the server's parent-death signal and its group's watchdog): no process
/// of the group is left.
#[test]
fn mcp_servers_end_with_outpost_connect_however_it_ends() {
    let pids = tempfile::tempdir().unwrap();
    let pidfile = pids.path().join("server.pid");
    let script = format!(
        "echo $$ > '{}'; sleep 1000 & exec node '{}' stdio",
        pidfile.display(),
        node_server("server-everything").display()
    );
    // Sandboxed (issue 28), with the inline script's needs given as a user would.
    let fx = Fixture::with(
        &format!(
            "[servers.helper]\ncommand = \"sh\"\nargs = [\"-c\", {}]\nwrite = [{}]\nread = [{}]\n",
            toml::Value::String(script),
            toml::Value::String(pids.path().display().to_string()),
            toml::Value::String(
                python::workspace_root()
                    .join("tests/mcp/node_modules")
                    .display()
                    .to_string()
            ),
        ),
        "consent_timeout_secs = 5\n",
    );
    let env = Env::start(Path::new(ROOM_BIN)).expect("namespaces and room server");
    for signal in ["TERM", "KILL"] {
        let _ = std::fs::remove_file(&pidfile);
        let mut connect = start_connect(&env, &fx);
        let pgid = poll("the server and its helper", Duration::from_secs(60), || {
            let pid = std::fs::read_to_string(&pidfile)
                .ok()?
                .trim()
                .parse::<u32>()
                .ok()?;
            (group_members(pid).len() >= 2).then_some(pid)
        });
        let outpost = parent_of(pgid);
        connect
            .wait_for("the session", Duration::from_secs(30), |e| {
                e["type"] == "connection"
            })
            .unwrap();
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &outpost.to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = poll(
            "the end of outpost connect",
            Duration::from_secs(20),
            || connect.try_wait().unwrap(),
        );
        if signal == "TERM" {
            assert!(
                status.success(),
                "SIGTERM leaves the room cleanly: {status}; stderr:\n{}",
                connect.stderr()
            );
        }
        let what = format!("end of the server's group {pgid} after SIG{signal}");
        poll(&what, Duration::from_secs(10), || {
            group_members(pgid).is_empty().then_some(())
        });
    }
}
