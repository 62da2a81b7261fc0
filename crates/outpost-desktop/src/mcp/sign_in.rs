//! OAuth sign-in of HTTP servers from the app: whether tokens are stored, signing in in
//! the user's browser, signing out and revoking before a removal.

use super::*;

/// How long `mcp_servers_sign_in` waits for the user's login in the browser.
pub const SIGN_IN_WAIT: Duration = Duration::from_secs(300);

/// Whether each HTTP server has a stored sign-in, read from the keyring once per server
/// (then kept up to date by this app's own sign-ins, sign-outs and removals), and the
/// sign-ins waiting for the browser, which the user may cancel.
#[derive(Debug, Default)]
pub struct SignIns {
    stored: Mutex<HashMap<String, bool>>,
    waiting: Mutex<HashMap<String, (u64, oneshot::Sender<()>)>>,
    next: AtomicU64,
}

/// A sign-in under way; it leaves the waiting list when dropped.
#[derive(Debug)]
pub struct Waiting<'a> {
    sign_ins: &'a SignIns,
    name: String,
    id: u64,
    /// Fires when the user cancels (or a newer sign-in of the same server replaces it).
    pub cancelled: oneshot::Receiver<()>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut waiting = lock(&self.sign_ins.waiting);
        if waiting
            .get(&self.name)
            .is_some_and(|(id, _)| *id == self.id)
        {
            waiting.remove(&self.name);
        }
    }
}

impl SignIns {
    /// What is known of `name`, reading the keyring the first time.
    pub fn stored(&self, name: &str, secrets: &dyn outpost_mcp::SecretStore) -> bool {
        if let Some(known) = lock(&self.stored).get(name) {
            return *known;
        }
        // No keyring to ask: nothing stored that Outpost could use.
        let found = outpost_mcp::oauth::signed_in(name, secrets).unwrap_or(false);
        lock(&self.stored).insert(name.to_owned(), found);
        found
    }

    /// A sign-in (`true`) or sign-out (`false`) just happened here.
    pub fn set(&self, name: &str, signed_in: bool) {
        lock(&self.stored).insert(name.to_owned(), signed_in);
    }

    /// A sign-in of `name` begins; one already waiting for the same server is cancelled
    /// (its login page would never be answered).
    pub fn begin(&self, name: &str) -> Waiting<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, cancelled) = oneshot::channel();
        if let Some((_, older)) = lock(&self.waiting).insert(name.to_owned(), (id, tx)) {
            let _ = older.send(());
        }
        Waiting {
            sign_ins: self,
            name: name.to_owned(),
            id,
            cancelled,
        }
    }

    /// Cancels the sign-in of `name` waiting for the browser; whether there was one.
    pub fn cancel(&self, name: &str) -> bool {
        match lock(&self.waiting).remove(name) {
            Some((_, tx)) => {
                let _ = tx.send(());
                true
            }
            None => false,
        }
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
/// (`outpost_mcp::oauth::sign_in`, waiting up to `within`, or until the user cancels it:
/// then its loopback listener closes and nothing is stored); in a live session the server
/// then starts again with the new tokens.
pub async fn sign_in(
    paths: &Paths,
    host: Option<&McpHost>,
    secrets: std::sync::Arc<dyn outpost_mcp::SecretStore>,
    sign_ins: &SignIns,
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
    let mut waiting = sign_ins.begin(name);
    let signing_in = outpost_mcp::oauth::sign_in(
        name,
        &url,
        secrets,
        outpost_mcp::oauth::open_in_browser,
        within,
    );
    tokio::select! {
        done = signing_in => {
            done.map_err(mcp_err)?;
        }
        _ = &mut waiting.cancelled => {
            return Err(DesktopError::Cancelled(format!(
                "The sign-in to {name} was cancelled; nothing was stored."
            )));
        }
    }
    drop(waiting);
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
