//! Progress, cancellation (the server receives it), a crash mid-call and the restart,
//! list_changed, and servers that print garbage or never answer `initialize`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use outpost_mcp::{CallOptions, Connection, McpError, MemorySecrets, ServerConfig, ServerStatus};
use serde_json::{Value, json};

#[tokio::test]
async fn long_running_operation_reports_progress() {
    let logs = tempfile::tempdir().unwrap();
    let host = host(logs.path(), vec![], None);
    host.start("everything", everything()).unwrap();
    host.wait_running("everything", START).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut opts = CallOptions::with_timeout(CALL);
    opts.progress = Some(tx);
    let out = host
        .call(
            "everything",
            "trigger-long-running-operation",
            args(json!({"duration": 1, "steps": 4})),
            opts,
        )
        .await
        .unwrap();
    assert!(out.result["text"].as_str().unwrap().contains("Steps: 4"));
    let mut got = Vec::new();
    while let Ok(p) = rx.try_recv() {
        got.push((p.progress, p.total));
    }
    assert_eq!(
        got,
        vec![
            (1.0, Some(4.0)),
            (2.0, Some(4.0)),
            (3.0, Some(4.0)),
            (4.0, Some(4.0))
        ]
    );
    host.shutdown();
}

/// server-everything behind `tee`, so the test sees every line the server received and sent.
/// Sandboxed: an inline script names no program Outpost can find, so the script's needs
/// are given as a user would: the server's package to read, the wire folder to write.
fn teed_everything(dir: &Path) -> ServerConfig {
    let script = format!(
        "tee '{inp}' | node '{js}' stdio | tee '{out}'",
        inp = dir.join("in.jsonl").display(),
        out = dir.join("out.jsonl").display(),
        js = everything_js().display(),
    );
    let mut c = ServerConfig::stdio("sh", vec!["-c".into(), script]);
    let sandbox = sandbox_of(&mut c);
    sandbox.read = vec![repo().join("tests/mcp/node_modules")];
    sandbox.write = vec![dir.to_path_buf()];
    c
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The id of the last `tools/call` of `tool` the server received.
fn call_id(dir: &Path, tool: &str) -> Value {
    lines(&dir.join("in.jsonl"))
        .into_iter()
        .rfind(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
        .map(|m| m["id"].clone())
        .expect("the server received the call")
}

fn cancelled_reasons(dir: &Path, id: &Value) -> Vec<String> {
    lines(&dir.join("in.jsonl"))
        .into_iter()
        .filter(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == *id)
        .map(|m| m["params"]["reason"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn answered(dir: &Path, id: &Value) -> bool {
    lines(&dir.join("out.jsonl"))
        .into_iter()
        .any(|m| m["id"] == *id && (m.get("result").is_some() || m.get("error").is_some()))
}

#[tokio::test]
async fn cancel_timeout_and_drop_each_send_notifications_cancelled() {
    let logs = tempfile::tempdir().unwrap();
    let wire = tempfile::tempdir().unwrap();
    let conn = open(
        "ev",
        &teed_everything(wire.path()),
        &connect_options(logs.path()),
    )
    .await;
    let long = || args(json!({"duration": 2, "steps": 4}));

    // 1. The caller's token fires after the first progress step.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut opts = CallOptions::with_timeout(CALL);
    opts.progress = Some(tx);
    let token = opts.cancel.clone();
    tokio::spawn(async move {
        let _ = rx.recv().await;
        token.cancel();
    });
    let err = conn
        .call("trigger-long-running-operation", long(), opts)
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::Cancelled { .. }), "{err}");
    let id1 = call_id(wire.path(), "trigger-long-running-operation");

    // 2. The call's timeout.
    let started = Instant::now();
    let err = conn
        .call(
            "trigger-long-running-operation",
            long(),
            CallOptions::with_timeout(Duration::from_millis(700)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::Timeout { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(2));
    let id2 = call_id(wire.path(), "trigger-long-running-operation");

    // 3. The caller drops the call's future.
    let dropped = tokio::time::timeout(
        Duration::from_millis(700),
        conn.call(
            "trigger-long-running-operation",
            long(),
            CallOptions::with_timeout(CALL),
        ),
    )
    .await;
    assert!(dropped.is_err(), "the outer timeout dropped the call");
    let id3 = call_id(wire.path(), "trigger-long-running-operation");
    assert!(id1 != id2 && id2 != id3);

    // Long enough for every operation to have finished had it not been cancelled.
    tokio::time::sleep(Duration::from_millis(2600)).await;
    assert_eq!(
        cancelled_reasons(wire.path(), &id1),
        vec!["cancelled by the user"]
    );
    assert_eq!(cancelled_reasons(wire.path(), &id2), vec!["timeout"]);
    assert_eq!(
        cancelled_reasons(wire.path(), &id3),
        vec!["the caller abandoned the call"]
    );
    // The server honoured them: no answer for any cancelled request.
    for id in [&id1, &id2, &id3] {
        assert!(
            !answered(wire.path(), id),
            "request {id} was answered after its cancellation"
        );
    }
    // And the session still works.
    let ok = conn
        .call(
            "echo",
            args(json!({"message": "still here"})),
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    assert_eq!(ok.result["text"], json!("Echo: still here"));
}

#[tokio::test]
async fn a_server_killed_mid_call_fails_the_call_and_restarts() {
    let logs = tempfile::tempdir().unwrap();
    let host = host(logs.path(), vec![], None);
    host.start("everything", everything()).unwrap();
    host.wait_running("everything", START).await.unwrap();
    let pid = host.snapshot()["everything"]
        .pid
        .expect("a stdio server has a pid");

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut opts = CallOptions::with_timeout(CALL);
    opts.progress = Some(tx);
    let h = host.clone();
    let call = tokio::spawn(async move {
        h.call(
            "everything",
            "trigger-long-running-operation",
            args(json!({"duration": 10, "steps": 20})),
            opts,
        )
        .await
    });
    rx.recv().await.expect("the call is under way");
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let started = Instant::now();
    let err = call.await.unwrap().unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the call failed promptly"
    );
    match &err {
        McpError::ServerGone { message, .. } => assert!(message.contains("signal 9"), "{message}"),
        other => panic!("expected ServerGone, got {other}"),
    }

    // The supervisor restarts it; the next call works.
    let mut rx = host.subscribe();
    tokio::time::timeout(
        START,
        rx.wait_for(|s| {
            let st = &s["everything"];
            st.status == ServerStatus::Running && st.starts == 2
        }),
    )
    .await
    .expect("restarted")
    .unwrap();
    let st = host.snapshot()["everything"].clone();
    assert_ne!(st.pid, Some(pid));
    let ok = host
        .call(
            "everything",
            "echo",
            args(json!({"message": "back"})),
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    assert_eq!(ok.result["text"], json!("Echo: back"));
    let log = std::fs::read_to_string(logs.path().join("everything.log")).unwrap();
    assert_eq!(log.matches("--- started").count(), 2, "{log}");
    host.shutdown();
}

#[tokio::test]
async fn tools_list_changed_updates_the_snapshot() {
    // server-everything registers its capability-dependent tools (roots, elicitation)
    // after `initialized`, announcing each with notifications/tools/list_changed.
    let logs = tempfile::tempdir().unwrap();
    let host = host(logs.path(), vec![], None);
    host.start("everything", everything()).unwrap();
    host.wait_running("everything", START).await.unwrap();
    let mut rx = host.subscribe();
    tokio::time::timeout(
        START,
        rx.wait_for(|s| {
            let st = &s["everything"];
            st.list_changed >= 1
                && st.tools.iter().any(|t| t.name == "get-roots-list")
                && st
                    .tools
                    .iter()
                    .any(|t| t.name == "trigger-elicitation-request")
        }),
    )
    .await
    .expect("the list_changed notifications were handled")
    .unwrap();
    assert!(host.snapshot()["everything"].tools_version >= 1);
    host.shutdown();
}

#[tokio::test]
async fn garbage_on_stdout_fails_the_start_clearly_and_in_time() {
    let mut opts = connect_options(tempfile::tempdir().unwrap().path());
    opts.start_timeout = Duration::from_secs(2);
    let config = ServerConfig::stdio(
        "sh",
        vec!["-c".into(), "echo 'Welcome to my server!'; sleep 60".into()],
    );
    let started = Instant::now();
    let err = Connection::open("noisy", &config, &MemorySecrets::shared(), &opts)
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(4));
    let text = err.to_string();
    assert!(
        text.contains("no answer to `server/discover` or `initialize` within 2000 ms"),
        "{text}"
    );
    assert!(
        text.contains("not MCP") && text.contains("Welcome to my server!"),
        "{text}"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_initialize_fails_in_time() {
    let mut opts = connect_options(tempfile::tempdir().unwrap().path());
    opts.start_timeout = Duration::from_secs(2);
    let config = ServerConfig::stdio(
        "sh",
        vec!["-c".into(), "echo 'starting up' >&2; sleep 60".into()],
    );
    let started = Instant::now();
    let err = Connection::open("mute", &config, &MemorySecrets::shared(), &opts)
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(4));
    let text = err.to_string();
    assert!(
        text.starts_with("MCP server 'mute' could not start"),
        "{text}"
    );
    assert!(
        text.contains("no answer to `server/discover` or `initialize`")
            && text.contains("starting up"),
        "{text}"
    );
}

#[tokio::test]
async fn a_server_that_exits_at_once_reports_its_status_and_stderr() {
    let opts = connect_options(tempfile::tempdir().unwrap().path());
    let config = ServerConfig::stdio(
        "sh",
        vec!["-c".into(), "echo 'missing API key' >&2; exit 3".into()],
    );
    let err = Connection::open("quits", &config, &MemorySecrets::shared(), &opts)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("exited with status 3") && text.contains("missing API key"),
        "{text}"
    );
    let missing = ServerConfig::stdio("/nonexistent/server", vec![]);
    let err = Connection::open("nothere", &missing, &MemorySecrets::shared(), &opts)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("cannot run '/nonexistent/server'"),
        "{err}"
    );
}

#[tokio::test]
async fn a_failing_server_is_retried_with_backoff_and_calls_fail_at_once() {
    let logs = tempfile::tempdir().unwrap();
    let host = host(logs.path(), vec![], None);
    host.start(
        "broken",
        ServerConfig::stdio("sh", vec!["-c".into(), "exit 1".into()]),
    )
    .unwrap();
    let mut rx = host.subscribe();
    tokio::time::timeout(
        Duration::from_secs(10),
        rx.wait_for(|s| {
            matches!(
                s["broken"].status,
                ServerStatus::Restarting { attempt: 2, .. }
            )
        }),
    )
    .await
    .expect("two failures in a row")
    .unwrap();
    let st = host.snapshot()["broken"].clone();
    let ServerStatus::Restarting { retry_in, .. } = st.status else {
        unreachable!()
    };
    assert_eq!(retry_in, Duration::from_millis(400), "the delay doubles");
    assert!(st.last_error.unwrap().contains("exited with status 1"));
    let started = Instant::now();
    let err = host
        .call("broken", "x", None, CallOptions::with_timeout(CALL))
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a call to a server waiting to restart fails at once"
    );
    assert!(matches!(err, McpError::NotRunning { .. }), "{err}");
    host.stop("broken").unwrap();
    assert_eq!(host.snapshot()["broken"].status, ServerStatus::Stopped);
}

#[tokio::test]
async fn dropping_the_host_stops_its_servers() {
    let logs = tempfile::tempdir().unwrap();
    let host = host(logs.path(), vec![], None);
    host.start("everything", everything()).unwrap();
    host.wait_running("everything", START).await.unwrap();
    let pid = host.snapshot()["everything"].pid.unwrap();
    let alive = |pid: u32| Path::new(&format!("/proc/{pid}")).exists();
    assert!(alive(pid));
    drop(host);
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "server {pid} still running after the host was dropped"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Issue 30, finding 10: the host refuses a server whose tools could be named like another
/// one's (`a` and `a_`: a tool `_x` of `a` and `x` of `a_` are both `mcp__a___x`), either
/// way round, with an error naming both.
#[tokio::test]
async fn a_server_whose_tool_names_could_collide_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path(), Vec::new(), None);
    let idle = outpost_mcp::ServerConfig {
        enabled: false,
        ..everything()
    };
    host.start("a", idle.clone()).unwrap();
    let err = host.start("a_", idle.clone()).unwrap_err().to_string();
    assert!(
        err.contains("'a' and 'a_'") && err.contains("mcp__a___x"),
        "{err}"
    );
    host.start("b_", idle.clone()).unwrap();
    let err = host.start("b", idle).unwrap_err().to_string();
    assert!(err.contains("'b' and 'b_'"), "{err}");
}
