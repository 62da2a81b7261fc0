//! OAuth sign-in of HTTP servers from the app: whether tokens are stored, signing in in
//! the user's browser, signing out and revoking before a removal.

use super::*;

/// How long `mcp_servers_sign_in` waits for the user's login in the browser.
pub const SIGN_IN_WAIT: Duration = Duration::from_secs(300);

/// Whether each HTTP server has a stored sign-in, read from the keyring once per server
/// (then kept up to date by this app's own sign-ins, sign-outs and removals).
#[derive(Debug, Default)]
pub struct SignIns(Mutex<HashMap<String, bool>>);

impl SignIns {
    /// What is known of `name`, reading the keyring the first time.
    pub fn stored(&self, name: &str, secrets: &dyn outpost_mcp::SecretStore) -> bool {
        if let Some(known) = lock(&self.0).get(name) {
            return *known;
        }
        // No keyring to ask: nothing stored that Outpost could use.
        let found = outpost_mcp::oauth::signed_in(name, secrets).unwrap_or(false);
        lock(&self.0).insert(name.to_owned(), found);
        found
    }

    /// A sign-in (`true`) or sign-out (`false`) just happened here.
    pub fn set(&self, name: &str, signed_in: bool) {
        lock(&self.0).insert(name.to_owned(), signed_in);
    }
}

/// An HTTP server's sign-in (`None` for stdio): what the live session found at its last
/// start or call, else whether tokens are stored.
pub fn sign_in_of(
    name: &str,
    server: &ServerConfig,
    host: Option<&McpHost>,
    stored: impl FnOnce() -> bool,
) -> Option<McpSignIn> {
    if !matches!(server.transport, Transport::Http { .. }) {
        return None;
    }
    use outpost_mcp::oauth::SignInState;
    let found = host.and_then(|h| h.snapshot().get(name).and_then(|s| s.sign_in));
    Some(match found {
        Some(SignInState::Again) => McpSignIn::Again,
        Some(SignInState::Needed) => McpSignIn::Needed,
        Some(SignInState::SignedIn) => McpSignIn::SignedIn,
        None if stored() => McpSignIn::SignedIn,
        None => McpSignIn::NotSignedIn,
    })
}

/// The URL of the HTTP server `name`; `invalid_argument` for a stdio one.
fn http_url(paths: &Paths, name: &str) -> Result<String> {
    load(paths)?
        .http_url(name)
        .map(str::to_owned)
        .map_err(mcp_err)
}

/// `mcp_servers_sign_in`: the OAuth sign-in of an HTTP server in the user's browser
/// (`outpost_mcp::oauth::sign_in`, waiting up to `within`); in a live session the server
/// then starts again with the new tokens.
pub async fn sign_in(
    paths: &Paths,
    host: Option<&McpHost>,
    secrets: std::sync::Arc<dyn outpost_mcp::SecretStore>,
    name: &str,
    within: std::time::Duration,
) -> Result<McpServerInfo> {
    let url = http_url(paths, name)?;
    if !secrets.persistent() {
        return Err(DesktopError::invalid(
            "name",
            "there is no keyring to keep the sign-in in",
        ));
    }
    outpost_mcp::oauth::sign_in(
        name,
        &url,
        secrets,
        outpost_mcp::oauth::open_in_browser,
        within,
    )
    .await
    .map_err(mcp_err)?;
    restart_if_running(paths, host, name)
}

/// `mcp_servers_sign_out`: revokes the server's tokens where its authorization server
/// allows it and deletes them; in a live session the server starts again without them.
pub async fn sign_out(
    paths: &Paths,
    host: Option<&McpHost>,
    secrets: &std::sync::Arc<dyn outpost_mcp::SecretStore>,
    name: &str,
) -> Result<McpServerInfo> {
    let url = http_url(paths, name)?;
    match outpost_mcp::oauth::sign_out(name, &url, secrets).await {
        Ok(outpost_mcp::oauth::SignedOut::Deleted {
            revoked: false,
            note,
        }) => {
            tracing::warn!(server = %name, "signed out without revoking: {}", note.unwrap_or_default())
        }
        Ok(_) => {}
        Err(e) => return Err(mcp_err(e)),
    }
    restart_if_running(paths, host, name)
}

/// Before a removal: revokes an HTTP server's OAuth tokens where its authorization server
/// allows it (best effort; `remove` deletes them either way).
pub async fn revoke_sign_in(
    paths: &Paths,
    secrets: &std::sync::Arc<dyn outpost_mcp::SecretStore>,
    name: &str,
) {
    let Ok(url) = http_url(paths, name) else {
        return;
    };
    if let Err(e) = outpost_mcp::oauth::sign_out(name, &url, secrets).await {
        tracing::warn!(server = %name, "could not sign out before removing: {e}");
    }
}
