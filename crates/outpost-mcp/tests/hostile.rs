//! Issue 30: what a hostile server can make the host hold. `tests/mcp/hostile_server.py`
//! (official Python SDK) floods within MCP; the sizes here are smaller than the review's
//! (20 updates of 200 × 50 KiB tools), with the same shape.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use outpost_mcp::connection::{
    MAX_DESCRIPTION_BYTES, MAX_LIST_BYTES, MAX_PROGRESS_MESSAGE, MAX_SCHEMA_BYTES, MAX_TOOLS,
};

/// Calls one of the hostile server's tools; it answers.
async fn call(
    host: &outpost_mcp::McpHost,
    tool: &str,
    arguments: serde_json::Value,
    opts: outpost_mcp::CallOptions,
) -> outpost_mcp::CallOutcome {
    host.call("hostile", tool, args(arguments), opts)
        .await
        .unwrap()
}

/// `tools/list` answers the server logged (`LIST n` lines of its stderr log).
fn lists(log_dir: &Path) -> usize {
    std::fs::read_to_string(log_dir.join("hostile.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("LIST "))
        .count()
}

/// Finding 6: a server that floods `notifications/tools/list_changed` with a big list
/// is listed at most once per second (the notifications fold into the next list, the last
/// one included), and what the host keeps of its list is bounded: tools, description
/// sizes, schema sizes, and the list as a whole.
#[tokio::test]
async fn a_list_changed_flood_is_coalesced_and_the_list_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path(), Vec::new(), None);
    // 300 tools of 6 KB descriptions and 2 KB schemas: 2.4 MB a list.
    host.start(
        "hostile",
        hostile(&[
            "--tools",
            "300",
            "--description",
            "6000",
            "--schema",
            "2000",
        ]),
    )
    .unwrap();
    host.wait_running("hostile", START).await.unwrap();
    let check = |what: &str| {
        let tools = host.tools();
        assert!(!tools.is_empty(), "{what}: nothing listed");
        assert!(tools.len() <= MAX_TOOLS, "{what}: {} tools", tools.len());
        let mut total = 0;
        for t in &tools {
            assert!(
                t.description.len() <= MAX_DESCRIPTION_BYTES,
                "{what}: {}",
                t.description.len()
            );
            let schema = t.input_schema.to_string().len();
            assert!(
                schema <= MAX_SCHEMA_BYTES,
                "{what}: schema of {schema} bytes"
            );
            total += t.description.len() + schema + t.name.len();
        }
        assert!(
            total <= MAX_LIST_BYTES,
            "{what}: the list holds {total} bytes"
        );
        tools
    };
    check("at start");
    let before = lists(dir.path());
    // 30 changes, 100 ms apart: 3 s.
    let started = Instant::now();
    let out = call(
        &host,
        "flood",
        serde_json::json!({"count": 30, "pause_ms": 100}),
        outpost_mcp::CallOptions::with_timeout(CALL),
    )
    .await;
    assert!(!out.is_error, "{:?}", out.result);
    // The last change is listed too.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !host
        .tools()
        .iter()
        .any(|t| t.description.starts_with("generation 30 "))
    {
        assert!(
            Instant::now() < deadline,
            "the last change was never listed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let spent = started.elapsed().as_secs_f64();
    let listed = lists(dir.path()) - before;
    // One list per second at most, plus the first one after the flood began.
    assert!(
        listed as f64 <= spent.ceil() + 1.0,
        "{listed} lists in {spent:.1} s for 30 notifications"
    );
    check("after the flood");
    host.shutdown();
}

/// Finding 6: a message (one stdout line) longer than the host's bound ends the session
/// with a clear error instead of being read whole.
#[tokio::test]
async fn a_message_past_the_bound_ends_the_session_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = connect_options(dir.path());
    opts.max_message_bytes = 256 * 1024;
    let conn = outpost_mcp::Connection::open(
        "hostile",
        &hostile(&["--tools", "1", "--one-page-bytes", "2000000"]),
        &outpost_mcp::MemorySecrets::shared(),
        &opts,
    )
    .await
    .unwrap();
    // The handshake passes; the first list is the oversized message.
    assert!(conn.list_tools(CALL).await.is_err());
    let mut closed = conn.closed();
    let why = tokio::time::timeout(CALL, closed.wait_for(Option::is_some))
        .await
        .expect("the session did not end")
        .unwrap()
        .clone()
        .unwrap_or_default();
    assert!(why.contains("a message longer than 262144 bytes"), "{why}");
}

/// Finding 8: a server that floods progress notifications (1,000 of 64 KiB: the review's
/// 4,000 of 256 KiB, smaller) is passed on at most ten a second with messages cut to
/// 1 KiB, and the call's result still arrives.
#[tokio::test]
async fn a_progress_flood_is_throttled_and_cut_and_the_result_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path(), Vec::new(), None);
    host.start("hostile", hostile(&[])).unwrap();
    host.wait_running("hostile", START).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut opts = outpost_mcp::CallOptions::with_timeout(Duration::from_secs(60));
    opts.progress = Some(tx);
    let started = Instant::now();
    let out = call(
        &host,
        "progress_flood",
        serde_json::json!({"count": 1000, "size": 65536}),
        opts,
    )
    .await;
    let spent = started.elapsed().as_secs_f64();
    assert_eq!(out.result["text"], "done after 1000", "{:?}", out.result);
    let mut got = Vec::new();
    while let Ok(p) = rx.try_recv() {
        got.push(p);
    }
    assert!(!got.is_empty(), "no progress passed on");
    assert!(
        got.len() as f64 <= spent * 10.0 + 2.0,
        "{} progress notifications passed on in {spent:.1} s",
        got.len()
    );
    for p in &got {
        let len = p.message.as_deref().map_or(0, str::len);
        assert!(len <= MAX_PROGRESS_MESSAGE, "a message of {len} bytes");
    }
    host.shutdown();
}
