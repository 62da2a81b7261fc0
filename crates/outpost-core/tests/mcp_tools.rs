//! MCP tools through the core's executor, with a consent UI attached: the catalogue,
//! consent Allow and Deny (the question names the server and carries its description and
//! claims), "allow for this conversation", and tools leaving the catalogue when their
//! server stops; and a Streamable HTTP server (server-everything's `streamableHttp` mode on
//! loopback) offered and called like a stdio one. The server is the pinned
//! `@modelcontextprotocol/server-everything` (tests/mcp, `npm ci` by scripts/setup.sh). The room path is covered end to end by
//! `tests/tests/mcp_e2e.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use outpost_core::Decision;
use outpost_core::executor::{DispatchEvent, Executor, Permissions, PolicySource, ToolsConfig};
use outpost_mcp::{ConnectOptions, HostOptions, McpHost, MemorySecrets, ServerConfig};
use outpost_policy::{ConsentEvent, ConsentInbox, Policy, WithdrawReason};
use outpost_protocol::{Execution, ToolUseRequest};
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

const WAIT: Duration = Duration::from_secs(30);

fn everything() -> ServerConfig {
    let js = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        js.exists(),
        "{} is missing: run scripts/setup.sh",
        js.display()
    );
    ServerConfig::stdio("node", vec![js.display().to_string(), "stdio".into()])
}

async fn host(logs: &Path) -> McpHost {
    let connect = ConnectOptions {
        log_dir: Some(logs.to_owned()),
        ..ConnectOptions::default()
    };
    let host = McpHost::new(
        HostOptions::new(connect, Arc::new(MemorySecrets::default())),
        Vec::new(),
    );
    host.start("everything", everything()).unwrap();
    host.wait_running("everything", WAIT).await.unwrap();
    host
}

fn perms(home: PathBuf, policy: Policy) -> Permissions {
    Permissions::new(&ToolsConfig {
        policy: PolicySource::InMemory(policy),
        home,
        protected: Vec::new(),
    })
    .unwrap()
}

fn request(id: &str, tool: &str, params: serde_json::Value) -> ToolUseRequest {
    ToolUseRequest {
        id: id.into(),
        message_id: "m1".into(),
        tool_name: tool.into(),
        execution: Execution::Client,
        parameters: params.as_object().cloned().unwrap(),
        timeout_ms: Some(20_000),
    }
}

/// Events until `id`'s result (included).
async fn until_result(rx: &mut UnboundedReceiver<DispatchEvent>, id: &str) -> Vec<DispatchEvent> {
    let mut out = Vec::new();
    loop {
        let ev = tokio::time::timeout(WAIT, rx.recv())
            .await
            .expect("an event in time")
            .expect("the dispatcher is alive");
        let done = matches!(&ev, DispatchEvent::Result(r) if r.id == id);
        out.push(ev);
        if done {
            return out;
        }
    }
}

/// The next question; the closing of one answered before it is passed over.
async fn asked(inbox: &mut ConsentInbox) -> outpost_policy::ConsentRequest {
    loop {
        match tokio::time::timeout(WAIT, inbox.next()).await.unwrap() {
            Some(ConsentEvent::Asked(q)) => return *q,
            Some(ConsentEvent::Withdrawn {
                reason: WithdrawReason::Answered,
                ..
            }) => {}
            other => panic!("expected a question, got {other:?}"),
        }
    }
}

fn result_of(evs: &[DispatchEvent]) -> &outpost_protocol::ToolUseResult {
    evs.iter()
        .find_map(|e| match e {
            DispatchEvent::Result(r) => Some(r),
            _ => None,
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tools_ask_by_default_and_the_users_answer_decides() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path()).await;
    let perms = perms(dir.path().to_owned(), Policy::default());
    let mut inbox = perms.attach_consent();
    let (exec, mut rx) = Executor::new(&perms, &[], Some(host.clone())).unwrap();

    // The catalogue: the built-ins first, then the server's tools with its name.
    let cat = exec.catalogue();
    let first_mcp = cat.iter().position(|t| t.server_name.is_some()).unwrap();
    assert!(
        cat[..first_mcp]
            .iter()
            .all(|t| !t.name.starts_with("mcp__"))
    );
    let echo = cat
        .iter()
        .find(|t| t.name == "mcp__everything__echo")
        .expect("echo is offered");
    assert_eq!(echo.server_name.as_deref(), Some("everything"));
    assert!(!echo.description.is_empty());
    assert!(cat.iter().all(|t| t.name.len() <= 64));

    // Allow once: the question names the server and shows its claims; the result comes.
    exec.run(
        "scope-1",
        request("r1", "mcp__everything__echo", json!({"message": "hi"})),
    );
    let q = asked(&mut inbox).await;
    assert_eq!(q.server.as_deref(), Some("everything"));
    assert_eq!(q.tool, "mcp__everything__echo");
    assert_eq!(q.description, echo.description);
    assert!(q.claims.is_some(), "{q:?}");
    // What the server may touch (issue 28): its sandbox, as the host planned it.
    if outpost_mcp::sandbox::Support::detect().landlock > 0 {
        assert!(
            q.summary
                .ends_with("(sandboxed: none of your folders; no network)"),
            "{}",
            q.summary
        );
    }
    assert_eq!(q.parameters["message"], "hi");
    assert!(q.options.contains(&Decision::AllowForConversation));
    perms
        .answer_consent(&q.consent_id, Decision::AllowOnce)
        .unwrap();
    let evs = until_result(&mut rx, "r1").await;
    let r = result_of(&evs);
    assert!(r.success, "{r:?}");
    assert_eq!(r.result.as_ref().unwrap()["text"], "Echo: hi");
    assert!(evs.iter().any(|e| matches!(
        e,
        DispatchEvent::Decided {
            by: outpost_core::Decider::User,
            ..
        }
    )));

    // Deny: permission_denied, by the user.
    exec.run(
        "scope-1",
        request("r2", "mcp__everything__echo", json!({"message": "no"})),
    );
    let q = asked(&mut inbox).await;
    perms
        .answer_consent(&q.consent_id, Decision::DenyOnce)
        .unwrap();
    let evs = until_result(&mut rx, "r2").await;
    let r = result_of(&evs);
    assert!(!r.success);
    assert_eq!(
        r.error_code.as_ref().map(|c| c.as_str()),
        Some("permission_denied")
    );

    // Allow for this conversation: the next call in the same scope is not asked about.
    exec.run(
        "scope-1",
        request("r3", "mcp__everything__echo", json!({"message": "a"})),
    );
    let q = asked(&mut inbox).await;
    perms
        .answer_consent(&q.consent_id, Decision::AllowForConversation)
        .unwrap();
    assert!(result_of(&until_result(&mut rx, "r3").await).success);
    exec.run(
        "scope-1",
        request("r4", "mcp__everything__echo", json!({"message": "b"})),
    );
    let r = until_result(&mut rx, "r4").await;
    assert!(
        result_of(&r).success,
        "no second question within the conversation"
    );

    // The server stops: its tools leave the catalogue and are unknown from then on.
    host.stop("everything").unwrap();
    assert!(exec.refresh_mcp());
    assert!(exec.catalogue().iter().all(|t| t.server_name.is_none()));
    exec.run(
        "scope-1",
        request("r5", "mcp__everything__echo", json!({"message": "c"})),
    );
    let r = until_result(&mut rx, "r5").await;
    assert_eq!(
        result_of(&r).error_code.as_ref().map(|c| c.as_str()),
        Some("unknown_tool")
    );
    host.shutdown();
}

/// Kills the HTTP server when the test ends, however it ends.
struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Streamable HTTP server through Outpost: server-everything in its `streamableHttp`
/// mode on loopback, reached by URL; its tools join the catalogue under the server's name,
/// the server's policy rule applies (here allow), a call runs with progress and the
/// result comes back in the documented shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamable_http_server_is_offered_and_called_through_the_executor() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ServerConfig { transport, .. } = everything();
    let outpost_mcp::Transport::Stdio { args, .. } = transport else {
        unreachable!()
    };
    let _server = Child(
        std::process::Command::new("node")
            .arg(&args[0])
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = std::time::Instant::now() + WAIT;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "no listener on {port}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let host = McpHost::new(
        HostOptions::new(
            ConnectOptions::default(),
            Arc::new(MemorySecrets::default()),
        ),
        Vec::new(),
    );
    host.start(
        "web",
        ServerConfig::http(format!("http://127.0.0.1:{port}/mcp")),
    )
    .unwrap();
    host.wait_running("web", WAIT).await.unwrap();
    let mut policy = Policy::default();
    policy
        .mcp_servers
        .insert("web".into(), outpost_policy::Rule::Allow);
    let perms = perms(dir.path().to_owned(), policy);
    let (exec, mut rx) = Executor::new(&perms, &[], Some(host.clone())).unwrap();

    let echo = exec
        .catalogue()
        .into_iter()
        .find(|t| t.name == "mcp__web__echo")
        .expect("the HTTP server's echo is offered");
    assert_eq!(echo.server_name.as_deref(), Some("web"));

    exec.run(
        "s",
        request("h1", "mcp__web__echo", json!({"message": "over http"})),
    );
    let evs = until_result(&mut rx, "h1").await;
    let r = result_of(&evs);
    assert!(r.success, "{r:?}");
    assert_eq!(r.result.as_ref().unwrap()["text"], "Echo: over http");
    assert!(evs.iter().any(|e| matches!(
        e,
        DispatchEvent::Decided {
            by: outpost_core::Decider::Policy,
            ..
        }
    )));

    exec.run(
        "s",
        request(
            "h2",
            "mcp__web__trigger-long-running-operation",
            json!({"duration": 0.4, "steps": 2}),
        ),
    );
    let evs = until_result(&mut rx, "h2").await;
    assert!(result_of(&evs).success, "{evs:?}");
    assert!(
        evs.iter()
            .filter(|e| matches!(e, DispatchEvent::Progress(..)))
            .count()
            >= 1,
        "progress over HTTP reaches the executor's events: {evs:?}"
    );
    host.shutdown();
}
