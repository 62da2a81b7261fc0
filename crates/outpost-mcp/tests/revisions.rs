//! MCP 2026-07-28 beside 2025-11-25, against real servers: the official Python SDK's
//! (tests/mcp/mrtr_server.py, which speaks both) and the TypeScript reference server
//! (which speaks only the older one). The same questions, roots and links reach the user
//! on both revisions: as server requests on 2025-11-25, as `input_required` rounds on
//! 2026-07-28; a changed tool list reaches the host on both (a plain notification, or the
//! `subscriptions/listen` stream).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use outpost_mcp::{
    CallOptions, Connection, ElicitationAnswer, ElicitationRequest, McpError, Root, ServerConfig,
    ServerRequests,
};
use serde_json::json;

const NEWEST: &str = "2026-07-28";
const OLDER: &str = "2025-11-25";

/// tests/mcp/mrtr_server.py, pinned to `protocol` when given.
fn mrtr(protocol: Option<&str>, extra: &[&str]) -> ServerConfig {
    let mut c = python_server("mrtr_server.py", extra);
    c.protocol = protocol.map(str::to_owned);
    c
}

/// A user who answers every form with the name Ada, accepts every link, and is recorded.
#[derive(Debug, Default)]
struct User {
    seen: Mutex<Vec<ElicitationRequest>>,
}

#[async_trait::async_trait]
impl ServerRequests for User {
    async fn elicit(&self, _server: &str, request: ElicitationRequest) -> ElicitationAnswer {
        let form = matches!(request, ElicitationRequest::Form { .. });
        self.seen.lock().unwrap().push(request);
        if form {
            ElicitationAnswer::Accept(json!({"name": "Ada"}).as_object().cloned())
        } else {
            ElicitationAnswer::Accept(None)
        }
    }
}

fn text(out: &outpost_mcp::CallOutcome) -> String {
    out.result["text"].as_str().unwrap_or_default().to_owned()
}

/// The server's `CALL <tool> round=<k> version=<v>` lines for `tool`.
fn rounds(logs: &std::path::Path, server: &str, tool: &str) -> Vec<String> {
    std::fs::read_to_string(logs.join(format!("{server}.log")))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(&format!("CALL {tool} ")))
        .map(str::to_owned)
        .collect()
}

fn options(
    logs: &std::path::Path,
    user: Arc<User>,
    roots: Vec<Root>,
) -> outpost_mcp::ConnectOptions {
    let mut opts = connect_options(logs);
    opts.requests = user;
    opts.elicitation_url = true;
    opts = opts.with_roots(roots);
    opts
}

#[tokio::test]
async fn the_newest_revision_is_offered_and_an_older_server_gets_the_one_it_speaks() {
    let logs = tempfile::tempdir().unwrap();
    let opts = connect_options(logs.path());
    let python = open("py", &mrtr(None, &[]), &opts).await;
    assert_eq!(python.protocol_version(), NEWEST);
    let pinned = open("pinned", &mrtr(Some(OLDER), &[]), &opts).await;
    assert_eq!(pinned.protocol_version(), OLDER);
    // The TypeScript reference server answers `server/discover` as an unknown method.
    let ts = open("ts", &everything(), &opts).await;
    assert_eq!(ts.protocol_version(), OLDER);
    // Pinned to a revision the server does not speak: a clear start error.
    let mut strict = everything();
    strict.protocol = Some(NEWEST.into());
    let err = Connection::open(
        "strict",
        &strict,
        &outpost_mcp::MemorySecrets::shared(),
        &opts,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, McpError::Start { .. }), "{err}");
}

#[tokio::test]
async fn questions_roots_and_links_reach_the_user_on_both_revisions() {
    let folder = tempfile::tempdir().unwrap();
    let root = Root::from_path(&folder.path().canonicalize().unwrap()).unwrap();
    for protocol in [None, Some(OLDER)] {
        let logs = tempfile::tempdir().unwrap();
        let user = Arc::new(User::default());
        let opts = options(logs.path(), user.clone(), vec![root.clone()]);
        let conn = open("mrtr", &mrtr(protocol, &[]), &opts).await;
        let version = conn.protocol_version().to_owned();
        let call = |tool: &'static str| conn.call(tool, None, CallOptions::with_timeout(CALL));

        assert_eq!(
            text(&call("ask_name").await.unwrap()),
            "hello Ada",
            "{version}"
        );
        assert_eq!(
            text(&call("my_roots").await.unwrap()),
            root.uri,
            "{version}"
        );
        assert_eq!(
            text(&call("sign_in_link").await.unwrap()),
            "link accepted",
            "{version}"
        );

        let seen = user.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2, "{version}: {seen:?}");
        assert!(
            matches!(&seen[0], ElicitationRequest::Form { message, .. } if message == "What is your name?"),
            "{version}: {seen:?}"
        );
        assert!(
            matches!(&seen[1], ElicitationRequest::Url { url, .. } if url.starts_with("http://127.0.0.1:9/signin/")),
            "{version}: {seen:?}"
        );
        // On 2026-07-28 each call took two rounds: the need, then the answer.
        let asked = rounds(logs.path(), "mrtr", "ask_name");
        let expected: Vec<String> = match protocol {
            None => (1..=2)
                .map(|k| format!("CALL ask_name round={k} version={NEWEST}"))
                .collect(),
            Some(v) => vec![format!("CALL ask_name round=1 version={v}")],
        };
        assert_eq!(asked, expected);
    }
}

#[tokio::test]
async fn a_changed_roots_list_is_what_the_next_call_gets_on_the_newest_revision() {
    let logs = tempfile::tempdir().unwrap();
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let root_a = Root::from_path(&a.path().canonicalize().unwrap()).unwrap();
    let root_b = Root::from_path(&b.path().canonicalize().unwrap()).unwrap();
    let (tx, rx) = tokio::sync::watch::channel(vec![root_a.clone()]);
    let mut opts = options(logs.path(), Arc::new(User::default()), Vec::new());
    opts.roots = rx;
    let conn = open("mrtr", &mrtr(None, &[]), &opts).await;
    assert_eq!(conn.protocol_version(), NEWEST);
    let roots = || conn.call("my_roots", None, CallOptions::with_timeout(CALL));
    assert_eq!(text(&roots().await.unwrap()), root_a.uri);
    tx.send(vec![root_a.clone(), root_b.clone()]).unwrap();
    assert_eq!(
        text(&roots().await.unwrap()),
        format!("{}\n{}", root_a.uri, root_b.uri)
    );
}

#[tokio::test]
async fn a_changed_tool_list_reaches_the_host_on_both_revisions() {
    for protocol in [None, Some(OLDER)] {
        let logs = tempfile::tempdir().unwrap();
        let host = host(logs.path(), Vec::new(), None);
        host.start("mrtr", mrtr(protocol, &[])).unwrap();
        host.wait_running("mrtr", START).await.unwrap();
        let version = host.snapshot()["mrtr"].protocol_version.clone().unwrap();
        assert_eq!(version, protocol.unwrap_or(NEWEST));
        let mut rx = host.subscribe();
        for n in 1..=2 {
            let out = host
                .call("mrtr", "add_tool", None, CallOptions::with_timeout(CALL))
                .await
                .unwrap();
            assert_eq!(text(&out), format!("added extra_{n}"));
            let name = format!("extra_{n}");
            tokio::time::timeout(
                Duration::from_secs(10),
                rx.wait_for(|s| s["mrtr"].tools.iter().any(|t| t.name == name)),
            )
            .await
            .unwrap_or_else(|_| panic!("{version}: {name} never listed"))
            .unwrap();
        }
        let out = host
            .call("mrtr", "extra_2", None, CallOptions::with_timeout(CALL))
            .await
            .unwrap();
        assert_eq!(text(&out), "extra_2 here");
        host.shutdown();
    }
}

#[tokio::test]
async fn a_server_that_never_stops_asking_fails_after_ten_rounds() {
    for state_only in [false, true] {
        let logs = tempfile::tempdir().unwrap();
        let opts = options(logs.path(), Arc::new(User::default()), Vec::new());
        let conn = open("mrtr", &mrtr(None, &[]), &opts).await;
        let err = conn
            .call(
                "endless",
                args(json!({ "state_only": state_only })),
                CallOptions::with_timeout(Duration::from_secs(60)),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&err, McpError::Protocol { message, .. } if message.contains("after 10 rounds")),
            "{err}"
        );
        assert_eq!(rounds(logs.path(), "mrtr", "endless").len(), 10);
    }
}

#[tokio::test]
async fn the_request_state_goes_back_exactly_as_the_server_gave_it() {
    // Unsealed, so the server itself compares what comes back.
    let logs = tempfile::tempdir().unwrap();
    let opts = options(logs.path(), Arc::new(User::default()), Vec::new());
    let conn = open("mrtr", &mrtr(None, &["--plain-state"]), &opts).await;
    let out = conn
        .call("state_echo", None, CallOptions::with_timeout(CALL))
        .await
        .unwrap();
    assert_eq!(text(&out), "state ok");
    assert_eq!(rounds(logs.path(), "mrtr", "state_echo").len(), 2);
}

/// A user who never answers: the question stays open until the call ends.
#[derive(Debug, Default)]
struct Away;

#[async_trait::async_trait]
impl ServerRequests for Away {
    async fn elicit(&self, _server: &str, _request: ElicitationRequest) -> ElicitationAnswer {
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_question_left_open_ends_with_the_calls_timeout_or_cancel() {
    let logs = tempfile::tempdir().unwrap();
    let mut opts = connect_options(logs.path());
    opts.requests = Arc::new(Away);
    let conn = open("mrtr", &mrtr(None, &[]), &opts).await;
    assert_eq!(conn.protocol_version(), NEWEST);
    let err = conn
        .call(
            "ask_name",
            None,
            CallOptions::with_timeout(Duration::from_secs(2)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::Timeout { .. }), "{err}");
    let cancel = CallOptions::with_timeout(CALL);
    let token = cancel.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        token.cancel();
    });
    let err = conn.call("ask_name", None, cancel).await.unwrap_err();
    assert!(matches!(err, McpError::Cancelled { .. }), "{err}");
    // The session is fine afterwards.
    let out = conn
        .call("state_echo", None, CallOptions::with_timeout(CALL))
        .await
        .unwrap();
    assert_eq!(text(&out), "state ok");
}
