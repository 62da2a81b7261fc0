//! OAuth 2.1 sign-in for Streamable HTTP servers (the MCP authorization spec), on rmcp's
//! `auth` client: discovery (protected resource metadata, then the authorization server's),
//! dynamic client registration, PKCE (S256), resource indicators, refresh.
//!
//! What Outpost adds around it:
//! - [`sign_in`]: the user's browser does the login; the redirect comes back to a listener
//!   on `127.0.0.1` (a port of its own per sign-in, RFC 8252's loopback redirect). Only
//!   `GET /callback` with the `state` this sign-in sent is taken; anything else gets a 400
//!   and the wait goes on, so another local process cannot end or hijack it.
//! - The credentials (client id, access and refresh token) live in the keyring, entry
//!   `mcp/<server>/oauth`, as rmcp's `StoredCredentials` in JSON; never in `mcp.toml` or a
//!   log (rmcp's own `Debug` redacts the tokens; nothing here prints them).
//! - [`Connection::open`](crate::Connection::open) uses them when present; rmcp refreshes
//!   the access token before it expires and saves the new one through the same entry. A
//!   refresh the server refuses, or a server that answers 401 with no credentials, becomes
//!   [`McpError::SignIn`]: "sign in" or "sign in again", never a bare HTTP error.
//! - [`sign_out`]: revokes the refresh and access tokens at the authorization server
//!   (RFC 7009) when it offers a revocation endpoint, then deletes the entry.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession, CredentialStore,
    StoredCredentials,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::error::{McpError, Result};
use crate::secrets::{SecretStore, entry_name};

/// The keyring key of a server's OAuth credentials (`mcp/<server>/oauth`).
pub const CREDENTIALS_KEY: &str = "oauth";

/// Longest request line and headers read from the browser's redirect.
const MAX_CALLBACK_REQUEST: usize = 16 * 1024;

/// The client name registered with authorization servers.
const CLIENT_NAME: &str = "Outpost";

/// The keyring entry holding `server`'s OAuth credentials.
pub fn credentials_entry(server: &str) -> String {
    entry_name(server, CREDENTIALS_KEY)
}

/// Whether credentials for `server` are stored (a sign-in happened and was not undone).
pub fn signed_in(server: &str, secrets: &dyn SecretStore) -> Result<bool> {
    Ok(secrets.get(&credentials_entry(server))?.is_some())
}

/// Where an HTTP server's sign-in stands, as its last start or call found it
/// ([`crate::ServerState::sign_in`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInState {
    /// It runs with a stored sign-in.
    SignedIn,
    /// It answered 401 and no sign-in is stored.
    Needed,
    /// The stored sign-in no longer works (refused refresh, revoked).
    Again,
}

/// rmcp's credential store over one keyring entry.
#[derive(Debug, Clone)]
pub(crate) struct KeyringCredentials {
    entry: String,
    secrets: Arc<dyn SecretStore>,
}

impl KeyringCredentials {
    pub(crate) fn new(server: &str, secrets: Arc<dyn SecretStore>) -> Self {
        Self {
            entry: credentials_entry(server),
            secrets,
        }
    }
}

fn store_error(e: impl std::fmt::Display) -> AuthError {
    AuthError::CredentialStoreError(e.to_string())
}

#[async_trait::async_trait]
impl CredentialStore for KeyringCredentials {
    async fn load(&self) -> std::result::Result<Option<StoredCredentials>, AuthError> {
        match self.secrets.get(&self.entry).map_err(store_error)? {
            None => Ok(None),
            // Unreadable credentials are as good as none: sign in again.
            Some(json) => Ok(serde_json::from_str(&json).ok()),
        }
    }

    async fn save(&self, credentials: StoredCredentials) -> std::result::Result<(), AuthError> {
        let json = serde_json::to_string(&credentials).map_err(store_error)?;
        self.secrets.set(&self.entry, &json).map_err(store_error)
    }

    async fn clear(&self) -> std::result::Result<(), AuthError> {
        self.secrets.delete(&self.entry).map_err(store_error)
    }
}

/// What to tell the user about an rmcp authorization error, without any token in it.
fn describe(e: &AuthError) -> String {
    match e {
        AuthError::AuthorizationRequired => "the server wants a sign-in".into(),
        AuthError::TokenRefreshRejected(_) => {
            "the authorization server no longer accepts this sign-in".into()
        }
        other => other.to_string(),
    }
}

/// The sign-in error for `server`.
pub(crate) fn sign_in_error(server: &str, again: bool, why: impl Into<String>) -> McpError {
    McpError::SignIn {
        server: server.to_owned(),
        again,
        message: why.into(),
    }
}

/// An rmcp `AuthorizationManager` for `url` with `server`'s stored credentials loaded;
/// `None` when none are stored (or the stored ones are for another authorization server).
pub(crate) async fn stored_manager(
    server: &str,
    url: &str,
    secrets: &Arc<dyn SecretStore>,
) -> Result<Option<AuthorizationManager>> {
    match signed_in(server, secrets.as_ref()) {
        Ok(true) => {}
        Ok(false) => return Ok(None),
        // No keyring here: nothing can have been stored in it, and a server that needs
        // no sign-in must still start. One that does says so with its 401.
        Err(e) => {
            tracing::debug!(server, "no OAuth sign-in looked up: {e}");
            return Ok(None);
        }
    }
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| McpError::Start {
            server: server.to_owned(),
            message: format!("its OAuth client could not be made: {}", describe(&e)),
        })?;
    manager.set_credential_store(KeyringCredentials::new(server, secrets.clone()));
    match manager.initialize_from_store().await {
        Ok(true) => Ok(Some(manager)),
        Ok(false) => Ok(None),
        Err(AuthError::CredentialStoreError(e)) => Err(McpError::Keyring(e)),
        Err(e) => Err(McpError::Start {
            server: server.to_owned(),
            message: format!(
                "its authorization server could not be reached: {}",
                describe(&e)
            ),
        }),
    }
}

/// Opens `url` in the user's browser: the program `$OUTPOST_BROWSER` names (given the URL
/// as its one argument), else `xdg-open`. It is not waited for.
pub fn open_in_browser(url: &str) -> Result<()> {
    let program = std::env::var("OUTPOST_BROWSER").unwrap_or_else(|_| "xdg-open".into());
    let mut child = std::process::Command::new(&program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(|e| McpError::invalid("browser", format!("cannot run {program}: {e}")))?;
    // Reaped when it ends, so no zombie is left behind.
    std::thread::spawn(move || child.wait());
    Ok(())
}

/// What a sign-in did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    /// The authorization server (its issuer, or its authorization endpoint).
    pub authorization_server: String,
    /// The scopes granted.
    pub scopes: Vec<String>,
}

/// Signs in to the Streamable HTTP server `server` at `url`: discovery, registration,
/// then `open_browser` is given the authorization URL (the user logs in there) and the
/// redirect is awaited for at most `within`. The credentials are stored in `secrets`.
pub async fn sign_in(
    server: &str,
    url: &str,
    secrets: Arc<dyn SecretStore>,
    open_browser: impl FnOnce(&str) -> Result<()>,
    within: Duration,
) -> Result<SignedIn> {
    crate::tls::ensure_crypto_provider();
    let fail = |why: String| sign_in_error(server, false, why);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| McpError::io("listen for the sign-in's redirect on 127.0.0.1", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| McpError::io("the redirect listener's port", e))?
        .port();
    let redirect = format!("http://127.0.0.1:{port}/callback");

    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| fail(describe(&e)))?;
    manager.set_credential_store(KeyringCredentials::new(server, secrets.clone()));
    let resolution = manager.resolve_metadata().await.map_err(|e| {
        fail(format!(
            "no OAuth authorization server was found for {url}: {}",
            describe(&e)
        ))
    })?;
    let authorization_server = resolution
        .metadata
        .issuer
        .clone()
        .unwrap_or_else(|| resolution.metadata.authorization_endpoint.clone());
    manager.set_metadata(resolution.metadata);
    let request = AuthorizationRequest::new(redirect.clone()).with_client_name(CLIENT_NAME);
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| fail(describe(&e)))?;
    let state = query_pairs(&session.auth_url)
        .remove("state")
        .ok_or_else(|| fail("the authorization URL has no state".into()))?;

    open_browser(&session.auth_url)?;

    let callback = tokio::time::timeout(within, wait_for_redirect(&listener, &state))
        .await
        .map_err(|_| {
            fail(format!(
                "no answer from the browser within {} s",
                within.as_secs()
            ))
        })??;
    let params = query_pairs(&callback);
    if let Some(error) = params.get("error") {
        let detail = params
            .get("error_description")
            .map(|d| format!(": {}", shown(d, 300)))
            .unwrap_or_default();
        return Err(fail(format!(
            "the authorization server refused ({}){detail}",
            shown(error, 100)
        )));
    }
    session
        .handle_callback_url(&format!("http://127.0.0.1:{port}{callback}"))
        .await
        .map_err(|e| fail(describe(&e)))?;
    let scopes = KeyringCredentials::new(server, secrets)
        .load()
        .await
        .ok()
        .flatten()
        .map(|c| c.granted_scopes)
        .unwrap_or_default();
    Ok(SignedIn {
        authorization_server,
        scopes,
    })
}

/// Text from the authorization server's redirect, for a message: control characters
/// dropped, at most `max` bytes.
fn shown(s: &str, max: usize) -> String {
    let mut s: String = s.chars().filter(|c| !c.is_control()).collect();
    crate::text::cut(&mut s, max);
    s
}

/// The query of a URL or of a request target (`/callback?…`), decoded.
fn query_pairs(url_or_target: &str) -> HashMap<String, String> {
    let query = url_or_target.split_once('?').map(|(_, q)| q).unwrap_or("");
    url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}

/// Accepts connections on the redirect listener until one is `GET /callback?…` with
/// `state`; returns its request target. Everything else is answered 400 (or 404) and
/// closed.
async fn wait_for_redirect(listener: &tokio::net::TcpListener, state: &str) -> Result<String> {
    loop {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|e| McpError::io("accept the sign-in's redirect", e))?;
        let Some(target) = read_request_target(&mut stream).await else {
            let _ = respond(&mut stream, "400 Bad Request", "Not a sign-in redirect.").await;
            continue;
        };
        if !target.starts_with("/callback?") {
            let _ = respond(&mut stream, "404 Not Found", "Not here.").await;
            continue;
        }
        if query_pairs(&target).get("state").map(String::as_str) != Some(state) {
            let _ = respond(
                &mut stream,
                "400 Bad Request",
                "This is not the sign-in Outpost started.",
            )
            .await;
            continue;
        }
        let _ = respond(
            &mut stream,
            "200 OK",
            "Outpost has your sign-in. You can close this tab.",
        )
        .await;
        return Ok(target);
    }
}

/// The target of a `GET` request, read with a bounded buffer and time; `None` for
/// anything else.
async fn read_request_target(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let read = async {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 || buf.len() + n > MAX_CALLBACK_REQUEST {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        Some(())
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .ok()??;
    let head = std::str::from_utf8(&buf).ok()?;
    let line = head.lines().next()?;
    let mut parts = line.split(' ');
    match (parts.next(), parts.next()) {
        (Some("GET"), Some(target)) => Some(target.to_owned()),
        _ => None,
    }
}

async fn respond(
    stream: &mut tokio::net::TcpStream,
    status: &str,
    text: &str,
) -> std::io::Result<()> {
    let body = format!("<!doctype html><meta charset=utf-8><title>Outpost</title><p>{text}</p>");
    let reply = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\ncache-control: no-store\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(reply.as_bytes()).await?;
    stream.shutdown().await
}

/// What [`sign_out`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignedOut {
    /// No credentials were stored.
    NotSignedIn,
    /// The credentials were deleted; `revoked` says whether the authorization server
    /// confirmed revoking the tokens (`false`: it offers no revocation endpoint, or the
    /// request failed, with the reason in `note`).
    Deleted {
        /// The server revoked the tokens.
        revoked: bool,
        /// Why not, when not.
        note: Option<String>,
    },
}

/// Signs out of `server`: revokes its tokens where the authorization server allows it
/// (RFC 7009) and deletes the stored credentials. The credentials are deleted even when
/// revocation fails.
pub async fn sign_out(
    server: &str,
    url: &str,
    secrets: &Arc<dyn SecretStore>,
) -> Result<SignedOut> {
    let entry = credentials_entry(server);
    let Some(json) = secrets.get(&entry)? else {
        return Ok(SignedOut::NotSignedIn);
    };
    let outcome = revoke(url, &json).await;
    secrets.delete(&entry)?;
    Ok(match outcome {
        Ok(()) => SignedOut::Deleted {
            revoked: true,
            note: None,
        },
        Err(note) => SignedOut::Deleted {
            revoked: false,
            note: Some(note),
        },
    })
}

/// Revokes the refresh token, then the access token, of stored credentials `json`.
async fn revoke(url: &str, json: &str) -> std::result::Result<(), String> {
    crate::tls::ensure_crypto_provider();
    let stored: serde_json::Value = serde_json::from_str(json)
        .map_err(|_| "the stored credentials were unreadable".to_owned())?;
    let client_id = stored["client_id"].as_str().unwrap_or_default().to_owned();
    let tokens = &stored["token_response"];
    let manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| describe(&e))?;
    let metadata = manager
        .resolve_metadata()
        .await
        .map_err(|e| {
            format!(
                "its authorization server could not be reached: {}",
                describe(&e)
            )
        })?
        .metadata;
    let Some(endpoint) = metadata
        .additional_fields
        .get("revocation_endpoint")
        .and_then(|v| v.as_str())
    else {
        return Err("its authorization server offers no revocation".into());
    };
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())?;
    for hint in ["refresh_token", "access_token"] {
        let Some(token) = tokens[hint].as_str() else {
            continue;
        };
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", hint)
            .append_pair("client_id", &client_id)
            .finish();
        let answer = client
            .post(endpoint)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            // reqwest's error names the URL, never the body.
            .map_err(|e| format!("revocation failed: {e}"))?;
        if !answer.status().is_success() {
            return Err(format!("revocation answered {}", answer.status()));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::secrets::MemorySecrets;

    #[test]
    fn query_pairs_decode_and_ignore_junk() {
        let q = query_pairs("/callback?code=a%2Bb&state=s1&iss=http%3A%2F%2Fh&&=x");
        assert_eq!(q["code"], "a+b");
        assert_eq!(q["state"], "s1");
        assert_eq!(q["iss"], "http://h");
        assert!(query_pairs("/callback").is_empty());
    }

    async fn redirect_with(request: &[u8]) -> (Option<String>, String) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let request = request.to_vec();
        let client = tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(&request).await.unwrap();
            let mut answer = String::new();
            let _ = s.read_to_string(&mut answer).await;
            answer
        });
        let got = tokio::time::timeout(
            Duration::from_millis(500),
            wait_for_redirect(&listener, "right"),
        )
        .await
        .ok()
        .map(|r| r.unwrap());
        (got, client.await.unwrap())
    }

    #[tokio::test]
    async fn only_the_callback_with_our_state_is_taken() {
        let (got, answer) =
            redirect_with(b"GET /callback?code=c&state=right HTTP/1.1\r\n\r\n").await;
        assert_eq!(got.as_deref(), Some("/callback?code=c&state=right"));
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

        for (request, status) in [
            (
                &b"GET /callback?code=c&state=wrong HTTP/1.1\r\n\r\n"[..],
                "400",
            ),
            (b"GET /callback?code=c HTTP/1.1\r\n\r\n", "400"),
            (b"GET /favicon.ico HTTP/1.1\r\n\r\n", "404"),
            (b"POST /callback?state=right HTTP/1.1\r\n\r\n", "400"),
            (b"\xff\xfe garbage\r\n\r\n", "400"),
        ] {
            let (got, answer) = redirect_with(request).await;
            assert_eq!(got, None, "{}", String::from_utf8_lossy(request));
            assert!(
                answer.starts_with(&format!("HTTP/1.1 {status}")),
                "{answer}"
            );
        }
    }

    #[tokio::test]
    async fn an_endless_request_is_cut_off() {
        let mut request = b"GET /callback?state=right".to_vec();
        request.extend(std::iter::repeat_n(b'a', MAX_CALLBACK_REQUEST + 10));
        let (got, answer) = redirect_with(&request).await;
        assert_eq!(got, None);
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    }

    /// A keyring that cannot be reached (no Secret Service on this machine).
    #[derive(Debug)]
    struct NoKeyring;

    impl SecretStore for NoKeyring {
        fn get(&self, _: &str) -> Result<Option<String>> {
            Err(McpError::Keyring("no Secret Service".into()))
        }
        fn set(&self, _: &str, _: &str) -> Result<()> {
            Err(McpError::Keyring("no Secret Service".into()))
        }
        fn delete(&self, _: &str) -> Result<()> {
            Err(McpError::Keyring("no Secret Service".into()))
        }
        fn persistent(&self) -> bool {
            true
        }
    }

    #[tokio::test]
    async fn without_a_keyring_a_server_starts_as_never_signed_in() {
        let secrets: Arc<dyn SecretStore> = Arc::new(NoKeyring);
        let found = stored_manager("s", "http://127.0.0.1:1/mcp", &secrets).await;
        assert!(
            matches!(found, Ok(None)),
            "{:?}",
            found.map(|m| m.is_some())
        );
    }

    #[tokio::test]
    async fn credentials_round_trip_through_the_store_and_junk_reads_as_none() {
        let secrets: Arc<dyn SecretStore> = Arc::new(MemorySecrets::default());
        let store = KeyringCredentials::new("s", secrets.clone());
        assert!(store.load().await.unwrap().is_none());
        store
            .save(StoredCredentials::new(
                "client-1".into(),
                None,
                vec!["mcp".into()],
                Some(5),
            ))
            .await
            .unwrap();
        assert!(signed_in("s", secrets.as_ref()).unwrap());
        let back = store.load().await.unwrap().unwrap();
        assert_eq!(back.client_id, "client-1");
        secrets.set(&credentials_entry("s"), "{not json").unwrap();
        assert!(store.load().await.unwrap().is_none());
        store.clear().await.unwrap();
        assert!(!signed_in("s", secrets.as_ref()).unwrap());
    }
}
