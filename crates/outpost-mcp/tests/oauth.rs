//! OAuth sign-in against real parts: oidc-provider as the authorization server
//! (`tests/mcp/oauth/as.mjs`), the official TypeScript SDK's bearer-auth MCP server in
//! front of it (`rs.mjs`), and Debian's Chromium as the user's browser (`browser.mjs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use outpost_mcp::oauth::{self, SignInState, SignedOut};
use outpost_mcp::{CallOptions, McpError, MemorySecrets, SecretStore, ServerConfig, ServerStatus};
use serde_json::{Value, json};

/// The access tokens' lifetime at the authorization server: short, so a refresh happens.
const TOKEN_TTL: Duration = Duration::from_secs(4);

fn oauth_dir() -> std::path::PathBuf {
    repo().join("tests/mcp/oauth")
}

/// Starts `script` with `env`; waits for its `ready` line. Its stdout lines after that go
/// to the returned channel.
fn start(script: &str, env: &[(&str, String)]) -> (Child, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead as _;
    let mut cmd = Command::new("node");
    cmd.arg(oauth_dir().join(script))
        .current_dir(oauth_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("node");
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{script} did not start"));
    assert!(line.starts_with("ready"), "{script}: {line}");
    (Child(child), rx)
}

/// The authorization server (access tokens living `ttl`) and the MCP server that wants
/// its tokens; their stdout lines (grants, requests) as channels.
struct OAuthServers {
    _processes: (Child, Child),
    as_url: String,
    mcp_url: String,
    grants: std::sync::mpsc::Receiver<String>,
    requests: std::sync::mpsc::Receiver<String>,
}

fn oauth_servers(ttl: Duration) -> OAuthServers {
    let (as_port, rs_port) = (free_port(), free_port());
    let as_url = format!("http://127.0.0.1:{as_port}");
    let mcp_url = format!("http://127.0.0.1:{rs_port}/mcp");
    let (auth, grants) = start(
        "as.mjs",
        &[
            ("AS_PORT", as_port.to_string()),
            ("RESOURCE", mcp_url.clone()),
            ("AT_TTL", ttl.as_secs().to_string()),
        ],
    );
    let (resource, requests) = start(
        "rs.mjs",
        &[("RS_PORT", rs_port.to_string()), ("AS_URL", as_url.clone())],
    );
    OAuthServers {
        _processes: (auth, resource),
        as_url,
        mcp_url,
        grants,
        requests,
    }
}

/// The browser: Chromium, driven through the login and consent pages.
fn browser(url: &str) -> outpost_mcp::Result<()> {
    let child = Command::new("node")
        .arg(oauth_dir().join("browser.mjs"))
        .arg(url)
        .current_dir(oauth_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node browser.mjs");
    // Reaped in the background: the sign-in waits for the redirect, not for this.
    std::thread::spawn(move || {
        let out = child.wait_with_output().unwrap();
        eprintln!(
            "browser: {} {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    });
    Ok(())
}

/// The authorization server's next `grant …` line (its other notices skipped).
fn next_grant(lines: &std::sync::mpsc::Receiver<String>) -> String {
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(10))
            .expect("a grant at the authorization server");
        if line.starts_with("grant ") {
            return line;
        }
    }
}

fn stored(secrets: &Arc<dyn SecretStore>) -> Value {
    serde_json::from_str(
        &secrets
            .get(&oauth::credentials_entry("web"))
            .unwrap()
            .expect("credentials stored"),
    )
    .unwrap()
}

fn token(stored: &Value, which: &str) -> String {
    stored["token_response"][which]
        .as_str()
        .unwrap_or_else(|| panic!("no {which} in the stored credentials"))
        .to_owned()
}

/// Revokes `token` at the authorization server (as the user would from its account page).
async fn revoke_at(as_url: &str, token: &str, client_id: &str) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let answer = reqwest::Client::new()
        .post(format!("{as_url}/token/revocation"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}&client_id={client_id}"))
        .send()
        .await
        .unwrap();
    assert!(
        answer.status().is_success(),
        "revocation: {}",
        answer.status()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_through_a_real_browser_then_refresh_then_sign_in_again_after_revocation() {
    let servers = oauth_servers(TOKEN_TTL);
    let (as_url, mcp_url) = (servers.as_url.clone(), servers.mcp_url.clone());
    let (grants, requests) = (&servers.grants, &servers.requests);
    let secrets = MemorySecrets::shared();
    let logs = tempfile::tempdir().unwrap();
    let opts = connect_options(logs.path());

    // Before a sign-in: the server's 401 is a clear "sign in", not an HTTP error.
    let config = ServerConfig::http(&mcp_url);
    let Err(err) = outpost_mcp::Connection::open("web", &config, &secrets, &opts).await else {
        panic!("connected without a sign-in");
    };
    assert!(
        matches!(err, McpError::SignIn { again: false, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("outpost mcp login web"), "{err}");

    // The sign-in: discovery, registration, PKCE, the browser, the redirect, the tokens.
    let done = oauth::sign_in(
        "web",
        &mcp_url,
        secrets.clone(),
        browser,
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    assert_eq!(done.authorization_server, as_url);
    assert!(done.scopes.iter().any(|s| s == "mcp:tools"), "{done:?}");
    let first = stored(&secrets);
    let client_id = first["client_id"].as_str().unwrap().to_owned();
    let (access, refresh) = (
        token(&first, "access_token"),
        token(&first, "refresh_token"),
    );
    assert_eq!(next_grant(grants), "grant authorization_code");

    // Tools listed and called with the token.
    let mut host_opts = outpost_mcp::HostOptions::new(opts.clone(), secrets.clone());
    host_opts.backoff_initial = Duration::from_millis(200);
    let host = outpost_mcp::McpHost::new(host_opts, vec![]);
    host.start("web", config.clone()).unwrap();
    host.wait_running("web", START).await.unwrap();
    let names: Vec<String> = host.snapshot()["web"]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(names.contains(&"whoami".to_owned()), "{names:?}");
    assert!(
        host.snapshot()["web"].sign_in == Some(SignInState::SignedIn),
        "runs with the stored sign-in"
    );
    let who = host
        .call("web", "whoami", None, CallOptions::with_timeout(CALL))
        .await
        .unwrap();
    assert_eq!(who.result["text"], json!(format!("client {client_id}")));

    // Past the access token's lifetime: rmcp refreshes it and the keyring gets the new one.
    tokio::time::sleep(TOKEN_TTL + Duration::from_secs(1)).await;
    let echo = host
        .call(
            "web",
            "echo",
            args(json!({"message": "after expiry"})),
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    assert_eq!(echo.result["text"], json!("Echo: after expiry"));
    assert_eq!(next_grant(grants), "grant refresh_token");
    let second = stored(&secrets);
    assert_ne!(token(&second, "access_token"), access, "a new access token");
    assert_ne!(
        token(&second, "refresh_token"),
        refresh,
        "refresh tokens rotate"
    );

    // The user revokes the grant at the authorization server: the next call fails saying
    // to sign in again, and so does the server's state (its restarts fail the same way).
    revoke_at(&as_url, &token(&second, "refresh_token"), &client_id).await;
    revoke_at(&as_url, &token(&second, "access_token"), &client_id).await;
    let Err(err) = host
        .call(
            "web",
            "echo",
            args(json!({"message": "revoked"})),
            CallOptions::with_timeout(CALL),
        )
        .await
    else {
        panic!("a call went through after revocation");
    };
    assert!(matches!(err, McpError::SignIn { again: true, .. }), "{err}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let state = host.snapshot()["web"].clone();
        let said = state.last_error.clone().unwrap_or_default();
        if state.status != ServerStatus::Running
            && state.sign_in == Some(SignInState::Again)
            && said.contains("sign in again")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the host never said to sign in again: {:?} {said}; the authorization server: {:?}; the MCP server: {:?}",
            state.status,
            grants.try_iter().collect::<Vec<_>>(),
            requests.try_iter().collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    host.shutdown();

    // No token byte in the server logs Outpost keeps.
    for entry in std::fs::read_dir(logs.path()).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
        for t in [&access, &refresh] {
            assert!(!text.contains(t.as_str()), "a token in a log");
        }
    }

    // Sign-out: the tokens are revoked (already, here: the server still answers 200, as
    // RFC 7009 asks) and deleted.
    let out = oauth::sign_out("web", &mcp_url, &secrets).await.unwrap();
    assert_eq!(
        out,
        SignedOut::Deleted {
            revoked: true,
            note: None
        }
    );
    assert!(!oauth::signed_in("web", secrets.as_ref()).unwrap());
    assert_eq!(
        oauth::sign_out("web", &mcp_url, &secrets).await.unwrap(),
        SignedOut::NotSignedIn
    );
}

/// A sign-in nobody completes ends at its deadline with a clear error, and stores nothing.
#[tokio::test]
async fn a_sign_in_nobody_completes_times_out_and_stores_nothing() {
    let servers = oauth_servers(Duration::from_secs(60));
    let mcp_url = servers.mcp_url.clone();
    let secrets = MemorySecrets::shared();
    let opened = Arc::new(std::sync::Mutex::new(String::new()));
    let seen = opened.clone();
    let err = oauth::sign_in(
        "web",
        &mcp_url,
        secrets.clone(),
        move |url| {
            *seen.lock().unwrap() = url.to_owned();
            Ok(())
        },
        Duration::from_secs(2),
    )
    .await
    .expect_err("no browser answered");
    assert!(
        err.to_string().contains("no answer from the browser"),
        "{err}"
    );
    // The authorization URL had PKCE (S256) and the resource indicator.
    let url = opened.lock().unwrap().clone();
    assert!(url.contains("code_challenge_method=S256"), "{url}");
    assert!(url.contains("resource="), "{url}");
    assert!(!oauth::signed_in("web", secrets.as_ref()).unwrap());
}

/// A server with no OAuth (no metadata anywhere): the sign-in says so.
#[tokio::test]
async fn a_server_without_oauth_cannot_be_signed_in_to() {
    let (_server, url) = everything_http().await;
    let err = oauth::sign_in(
        "plain",
        &url,
        MemorySecrets::shared(),
        |_| panic!("no browser for a server without OAuth"),
        Duration::from_secs(5),
    )
    .await
    .expect_err("nothing to sign in to");
    assert!(matches!(err, McpError::SignIn { .. }), "{err}");
}
