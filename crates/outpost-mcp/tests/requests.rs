//! Server-initiated requests: elicitation (declined by default, or answered by the
//! caller's handler; form and URL modes), sampling (refused), and roots (the caller's list,
//! and its changes).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use outpost_mcp::requests::SAMPLING_REFUSED;
use outpost_mcp::{
    CallOptions, Connection, ElicitationAnswer, ElicitationRequest, Root, ServerRequests,
};
use serde_json::json;

#[tokio::test]
async fn elicitation_is_declined_by_default() {
    let logs = tempfile::tempdir().unwrap();
    let host = host(logs.path(), vec![], None);
    host.start("everything", everything()).unwrap();
    host.wait_running("everything", START).await.unwrap();
    let mut rx = host.subscribe();
    tokio::time::timeout(
        START,
        rx.wait_for(|s| {
            s["everything"]
                .tools
                .iter()
                .any(|t| t.name == "trigger-elicitation-request")
        }),
    )
    .await
    .unwrap()
    .unwrap();
    let out = host
        .call(
            "everything",
            "trigger-elicitation-request",
            None,
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    let text = out.result["text"].as_str().unwrap();
    assert!(text.contains("User declined"), "{text}");
    host.shutdown();
}

#[derive(Debug, Default)]
struct Recorder {
    seen: Mutex<Vec<(String, ElicitationRequest)>>,
}

#[async_trait::async_trait]
impl ServerRequests for Recorder {
    async fn elicit(&self, server: &str, request: ElicitationRequest) -> ElicitationAnswer {
        self.seen.lock().unwrap().push((server.to_owned(), request));
        ElicitationAnswer::Accept(json!({"name": "Ada"}).as_object().cloned())
    }
}

/// The connection's tools once `name` is among them: server-everything registers some of
/// its tools after `initialized`.
async fn tools_once(conn: &Connection, name: &str) -> Vec<outpost_mcp::McpTool> {
    let mut changed = conn.tools_changed();
    let deadline = tokio::time::Instant::now() + START;
    loop {
        let tools = conn.list_tools(START).await.unwrap();
        if tools.iter().any(|t| t.name == name) {
            return tools;
        }
        tokio::time::timeout_at(deadline, changed.changed())
            .await
            .unwrap()
            .unwrap();
    }
}

#[tokio::test]
async fn elicitation_goes_to_the_callers_handler() {
    let logs = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let mut opts = connect_options(logs.path());
    opts.requests = recorder.clone();
    let conn = open("ev", &everything(), &opts).await;
    // The tool is registered after `initialized`; wait for it.
    tools_once(&conn, "trigger-elicitation-request").await;
    let out = conn
        .call(
            "trigger-elicitation-request",
            None,
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    let text = out.result["text"].as_str().unwrap();
    assert!(
        text.contains("User provided the requested information") && text.contains("Ada"),
        "{text}"
    );
    let seen = recorder.seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, "ev");
    let ElicitationRequest::Form {
        message,
        requested_schema,
    } = &seen[0].1
    else {
        panic!("a form elicitation expected: {:?}", seen[0].1)
    };
    assert!(!message.is_empty());
    assert_eq!(requested_schema["type"], json!("object"));
}

/// Accepts URL requests (as a user who opened the link would) and records them.
#[derive(Debug, Default)]
struct UrlOpener {
    seen: Mutex<Vec<ElicitationRequest>>,
}

#[async_trait::async_trait]
impl ServerRequests for UrlOpener {
    async fn elicit(&self, _server: &str, request: ElicitationRequest) -> ElicitationAnswer {
        let url = matches!(request, ElicitationRequest::Url { .. });
        self.seen.lock().unwrap().push(request);
        if url {
            ElicitationAnswer::Accept(None)
        } else {
            ElicitationAnswer::Decline
        }
    }
}

#[tokio::test]
async fn url_elicitation_is_offered_only_when_declared_and_reaches_the_handler() {
    let logs = tempfile::tempdir().unwrap();
    // server-everything registers its elicitation tools in one step: once the form one is
    // there, the URL one would be too.
    let tools_of = |conn: Connection| async move {
        let tools = tools_once(&conn, "trigger-elicitation-request").await;
        (conn, tools)
    };
    // Not declared (the default): the server does not offer its URL tool.
    let opts = connect_options(logs.path());
    let conn = open("ev", &everything(), &opts).await;
    let (conn, tools) = tools_of(conn).await;
    assert!(
        !tools.iter().any(|t| t.name == "trigger-url-elicitation"),
        "URL mode was not declared"
    );
    drop(conn);

    let opener = Arc::new(UrlOpener::default());
    let mut opts = connect_options(logs.path());
    opts.elicitation_url = true;
    opts.requests = opener.clone();
    let conn = open("ev", &everything(), &opts).await;
    let (conn, tools) = tools_of(conn).await;
    assert!(tools.iter().any(|t| t.name == "trigger-url-elicitation"));
    let out = conn
        .call(
            "trigger-url-elicitation",
            json!({"url": "https://example.com/sign-in", "message": "Sign in, please"})
                .as_object()
                .cloned(),
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    assert!(!out.is_error, "{:?}", out.result);
    let text = out.result["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.to_lowercase().contains("accept"), "{:?}", out.result);
    let seen = opener.seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let ElicitationRequest::Url {
        message,
        url,
        elicitation_id,
    } = &seen[0]
    else {
        panic!("a URL elicitation expected: {:?}", seen[0])
    };
    assert_eq!(url, "https://example.com/sign-in");
    assert_eq!(message, "Sign in, please");
    assert!(!elicitation_id.is_empty());
}

#[tokio::test]
async fn sampling_is_refused_with_a_clear_error() {
    let logs = tempfile::tempdir().unwrap();
    let mut opts = connect_options(logs.path());
    // Declared so the server offers its sampling tool; the default handler still refuses.
    opts.sampling = true;
    let conn = open("ev", &everything(), &opts).await;
    tools_once(&conn, "trigger-sampling-request").await;
    let out = conn
        .call(
            "trigger-sampling-request",
            Some(json!({"prompt": "hi"}).as_object().cloned().unwrap()),
            CallOptions::with_timeout(CALL),
        )
        .await;
    // The server turns our JSON-RPC error into a tool error (or passes it on): our
    // sentence coming back inside its answer is the server having received the refusal.
    let text = match out {
        Ok(o) => {
            assert!(o.is_error, "{:?}", o.result);
            o.result["text"].as_str().unwrap().to_owned()
        }
        Err(e) => e.to_string(),
    };
    assert!(
        text.contains("Outpost does not answer sampling requests"),
        "{text}"
    );
    assert!(SAMPLING_REFUSED.starts_with("Outpost does not answer sampling requests"));
}

#[tokio::test]
async fn roots_offered_are_the_callers_list_and_follow_changes() {
    let logs = tempfile::tempdir().unwrap();
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let a_path = a.path().canonicalize().unwrap();
    let b_path = b.path().canonicalize().unwrap();
    let root_a = Root::from_path(&a_path).unwrap();
    let root_b = Root::from_path(&b_path).unwrap();
    let host = host(logs.path(), vec![root_a.clone()], None);
    host.start("everything", everything()).unwrap();
    // server-filesystem replaces its command-line folders with the client's roots.
    let elsewhere = tempfile::tempdir().unwrap();
    host.start("fs", filesystem(elsewhere.path())).unwrap();
    host.wait_running("everything", START).await.unwrap();
    host.wait_running("fs", START).await.unwrap();
    let mut rx = host.subscribe();
    tokio::time::timeout(
        START,
        rx.wait_for(|s| {
            s["everything"]
                .tools
                .iter()
                .any(|t| t.name == "get-roots-list")
        }),
    )
    .await
    .unwrap()
    .unwrap();

    let roots_text = |host: outpost_mcp::McpHost| async move {
        host.call(
            "everything",
            "get-roots-list",
            None,
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap()
        .result["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let allowed = |host: outpost_mcp::McpHost| async move {
        host.call(
            "fs",
            "list_allowed_directories",
            None,
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap()
        .result["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let text = roots_text(host.clone()).await;
    assert!(
        text.contains(&root_a.uri) && !text.contains(&root_b.uri),
        "{text}"
    );
    // The filesystem server asks for roots after `initialized`; give it a moment.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let dirs = allowed(host.clone()).await;
        if dirs.contains(&a_path.display().to_string()) {
            assert!(
                !dirs.contains(&elsewhere.path().display().to_string()),
                "{dirs}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the roots never reached server-filesystem: {dirs}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A change is announced (roots/list_changed) and both servers ask again.
    host.set_roots(vec![root_b.clone()]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = roots_text(host.clone()).await;
        let dirs = allowed(host.clone()).await;
        if text.contains(&root_b.uri) && dirs.contains(&b_path.display().to_string()) {
            assert!(!text.contains(&root_a.uri), "{text}");
            assert!(!dirs.contains(&a_path.display().to_string()), "{dirs}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new roots never arrived: {text} / {dirs}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    host.shutdown();
}

/// The tiny official-SDK server of tests/mcp that answers `-32042` (no reference server
/// emits it): its sign-in link is its own page on 127.0.0.1, so it needs the network.
fn url_elicitation_server() -> outpost_mcp::ServerConfig {
    let mut c = outpost_mcp::ServerConfig::stdio(
        python().display().to_string(),
        vec![
            repo()
                .join("tests/mcp/url_elicitation_server.py")
                .display()
                .to_string(),
        ],
    );
    sandbox_of(&mut c).network = Some(true);
    c
}

/// A user who clicks "Open link" and finishes the sign-in in the browser: the link is
/// fetched (the server then sends `notifications/elicitation/complete`), then accepted.
/// With `visit` off, the link is accepted but never opened.
#[derive(Debug, Default)]
struct SignIn {
    visit: bool,
    seen: Mutex<Vec<ElicitationRequest>>,
}

#[async_trait::async_trait]
impl ServerRequests for SignIn {
    async fn elicit(&self, _server: &str, request: ElicitationRequest) -> ElicitationAnswer {
        self.seen.lock().unwrap().push(request.clone());
        let ElicitationRequest::Url { url, .. } = request else {
            return ElicitationAnswer::Decline;
        };
        if self.visit {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            let rest = url.strip_prefix("http://").unwrap();
            let (host, path) = rest.split_once('/').unwrap();
            let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
            s.write_all(format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut page = String::new();
            s.read_to_string(&mut page).await.unwrap();
            assert!(page.starts_with("HTTP/1.1 200"), "{page}");
        }
        ElicitationAnswer::Accept(None)
    }
}

fn attempts(log_dir: &std::path::Path, tool: &str) -> usize {
    std::fs::read_to_string(log_dir.join("urlel.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == format!("CALL {tool}"))
        .count()
}

/// `-32042` is an error of 2025-11-25 that 2026-07-28 keeps: the same on both.
#[tokio::test]
async fn url_elicitation_required_shows_the_link_and_retries_once_it_completed() {
    for protocol in ["2026-07-28", "2025-11-25"] {
        link_then_retry(protocol).await;
    }
}

async fn link_then_retry(protocol: &str) {
    let logs = tempfile::tempdir().unwrap();
    let user = Arc::new(SignIn {
        visit: true,
        ..SignIn::default()
    });
    let mut opts = connect_options(logs.path());
    opts.elicitation_url = true;
    opts.requests = user.clone();
    let mut config = url_elicitation_server();
    config.protocol = Some(protocol.into());
    let conn = open("urlel", &config, &opts).await;
    assert_eq!(conn.protocol_version(), protocol);
    // The first attempt fails with -32042; the user opens the link; the call is sent again.
    let out = conn
        .call(
            "read_account",
            args(json!({"who": "ada"})),
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    assert_eq!(out.result["text"], json!("account data for ada"));
    assert_eq!(attempts(logs.path(), "read_account"), 2);
    {
        let seen = user.seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "{seen:?}");
        let ElicitationRequest::Url {
            message,
            url,
            elicitation_id,
        } = &seen[0]
        else {
            panic!("a URL elicitation expected: {:?}", seen[0])
        };
        assert_eq!(message, "Sign in to your test account");
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        assert!(url.ends_with(elicitation_id.as_str()) && !elicitation_id.is_empty());
    }
    // Signed in now: no link.
    conn.call(
        "read_account",
        args(json!({"who": "bo"})),
        CallOptions::with_timeout(CALL),
    )
    .await
    .unwrap();
    assert_eq!(user.seen.lock().unwrap().len(), 1);

    // A server that asks again after the link was opened: one retry, then a clear error.
    let err = conn
        .call("always_needs_link", None, CallOptions::with_timeout(CALL))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, outpost_mcp::McpError::UrlElicitationRequired { .. })
            && err.to_string().contains("asked again"),
        "{err}"
    );
    assert_eq!(attempts(logs.path(), "always_needs_link"), 2);
}

#[tokio::test]
async fn url_elicitation_required_fails_when_declined_or_never_completed() {
    let logs = tempfile::tempdir().unwrap();
    // The default handler (no UI, e.g. `outpost connect`) declines: no retry.
    let mut opts = connect_options(logs.path());
    opts.elicitation_url = true;
    let conn = open("urlel", &url_elicitation_server(), &opts).await;
    let err = conn
        .call(
            "read_account",
            args(json!({"who": "ada"})),
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "needs you to open a link before read_account can run: the link was declined"
        ),
        "{err}"
    );
    assert_eq!(attempts(logs.path(), "read_account"), 1);
    drop(conn);

    // Accepted but the sign-in never finishes: the call ends at its timeout (cancel too).
    let user = Arc::new(SignIn::default());
    let mut opts = connect_options(logs.path());
    opts.elicitation_url = true;
    opts.requests = user.clone();
    let conn = open("urlel", &url_elicitation_server(), &opts).await;
    let started = std::time::Instant::now();
    let err = conn
        .call(
            "read_account",
            args(json!({"who": "ada"})),
            CallOptions::with_timeout(Duration::from_secs(2)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, outpost_mcp::McpError::Timeout { .. }),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    let mut cancel = CallOptions::with_timeout(CALL);
    let token = cancel.cancel.clone();
    cancel.progress = None;
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        token.cancel();
    });
    let err = conn
        .call("read_account", args(json!({"who": "ada"})), cancel)
        .await
        .unwrap_err();
    assert!(
        matches!(err, outpost_mcp::McpError::Cancelled { .. }),
        "{err}"
    );
    assert_eq!(user.seen.lock().unwrap().len(), 2);
}
