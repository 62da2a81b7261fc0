//! The system-wide shortcut through the desktop portal's GlobalShortcuts interface
//! (`org.freedesktop.portal.GlobalShortcuts` on the session bus), the way a Wayland
//! desktop lets an application have a key in every window: the compositor owns the keys
//! and the portal reports `Activated` (key down) and `Deactivated` (key up) on the
//! session this module opened.
//!
//! Spoken with zbus directly rather than the `ashpd` crate: KDE Plasma before 6.2 (Debian
//! 12's and Ubuntu 24.04's 5.27, the only backend that runs here) binds the shortcuts it
//! is handed in `CreateSession`'s options and ignores `BindShortcuts`' list, and it names
//! its shortcut group after the session token, so the token must stay the same from one
//! run to the next (a new group cannot take a key an old one still has on record). ashpd
//! (0.9 to 0.13) sends neither, so its sessions get no key on those desktops. The
//! shortcuts go in both calls: the standard `BindShortcuts` serves GNOME 48+ and Plasma
//! 6.2+.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt as _;
use outpost_desktop::Desktop;
use serde::Serialize;
use tauri::{AppHandle, Runtime};
use zbus::message::Type as MessageType;
use zbus::{
    Connection, DeserializeDict, MatchRule, MessageStream, OwnedObjectPath, OwnedVariant,
    SerializeDict, Type,
};

use super::Keys;

const DESTINATION: &str = "org.freedesktop.portal.Desktop";
const PATH: &str = "/org/freedesktop/portal/desktop";
const INTERFACE: &str = "org.freedesktop.portal.GlobalShortcuts";
/// The one shortcut's id within the session (what the desktop's settings list).
const SHORTCUT_ID: &str = "outpost";
/// How long the portal may take to open a session: it answers at once unless it hangs.
/// Binding has no limit, since a desktop may ask the user first.
const CREATE_TIMEOUT: Duration = Duration::from_secs(15);

/// Why the portal gave no shortcut.
#[derive(Debug, thiserror::Error)]
pub enum PortalError {
    #[error("{0} cannot be said in the portal's shortcut notation")]
    Notation(String),
    #[error("D-Bus: {0}")]
    Bus(#[from] zbus::Error),
    #[error("the desktop portal did not open a session in {}s", CREATE_TIMEOUT.as_secs())]
    Timeout,
    #[error("the desktop portal refused {what} (response {code})")]
    Refused { what: &'static str, code: u32 },
    #[error("the desktop portal answered {what} without {field}")]
    Incomplete {
        what: &'static str,
        field: &'static str,
    },
}

/// The bind now in force: its number (a bind `stop` or a newer `start` made stale does not
/// fall back or report) and what ends its session. One lock, so two overlapping starts
/// cannot leave the older one's session in place of the newer.
struct Running {
    generation: u64,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

static RUNNING: Mutex<Running> = Mutex::new(Running {
    generation: 0,
    stop: None,
});

fn running() -> std::sync::MutexGuard<'static, Running> {
    outpost_sync::lock(&RUNNING)
}

impl Running {
    /// Makes every bind so far stale and ends the running session; the new generation.
    fn end(&mut self) -> u64 {
        self.generation += 1;
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.generation
    }
}

/// Ends the current portal session, if any, and makes any bind still under way stale.
pub fn stop() {
    running().end();
}

/// Binds `accel` through the portal in the background. The outcome goes to the desktop's
/// settings (the receiver hears when it is there); if the portal is missing or refuses,
/// the X11 key grab is tried instead. A bind still waiting for the desktop (which may be
/// asking the user) ends when `stop` or a newer `start` comes.
pub fn start<R: Runtime>(
    app: AppHandle<R>,
    desktop: Desktop,
    accel: String,
) -> tokio::sync::oneshot::Receiver<()> {
    let (settled, on_settled) = tokio::sync::oneshot::channel();
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    let generation = {
        let mut r = running();
        let generation = r.end();
        r.stop = Some(tx);
        generation
    };
    desktop.set_shortcut_status(
        false,
        format!("Asking the desktop portal (GlobalShortcuts) for {accel}…"),
    );
    tauri::async_runtime::spawn(async move {
        let current = || running().generation == generation;
        // Dropping the bind drops its bus connection, which ends a half-made session.
        let bound = tokio::select! {
            b = Bound::bind(&accel) => b,
            _ = &mut rx => return,
        };
        match bound {
            Ok(bound) if current() => {
                report(&desktop, &accel, bound.trigger.as_deref());
                let _ = settled.send(());
                let stopped = bound.listen(&app, Keys::new(desktop.clone()), rx).await;
                if !stopped && current() {
                    desktop.set_shortcut_status(
                        false,
                        format!(
                            "The desktop portal's session for {accel} ended (its bus \
                             connection closed): save the shortcut in Settings to bind it again."
                        ),
                    );
                }
            }
            Ok(bound) => bound.close().await,
            Err(e) if current() => {
                tracing::warn!(error = %e, "no system-wide shortcut from the desktop portal");
                super::x11(&app, &desktop, &accel, Some(&e.to_string()));
                let _ = settled.send(());
            }
            Err(_) => {}
        }
    });
    on_settled
}

/// Settings → Voice's line for a bound session: the desktop may have assigned another
/// key than asked, or none yet (the user then sets one in the desktop's settings).
fn report(desktop: &Desktop, accel: &str, trigger: Option<&str>) {
    match trigger {
        Some(t) => desktop.set_shortcut_status(
            true,
            format!(
                "{accel} works in every window through the desktop portal (GlobalShortcuts); \
                 the desktop shows it as {t}."
            ),
        ),
        None => desktop.set_shortcut_status(
            false,
            format!(
                "The desktop portal (GlobalShortcuts) took the shortcut but assigned no key \
                 to it (another program may hold {accel}): set one for Outpost in the \
                 desktop's shortcut settings."
            ),
        ),
    }
}

/// An open portal session with the shortcut bound.
struct Bound {
    conn: Connection,
    session: OwnedObjectPath,
    /// Subscribed before binding, so no press is lost.
    signals: MessageStream,
    /// The key the desktop assigned, in its own words; none when it assigned none.
    trigger: Option<String>,
}

impl Bound {
    async fn bind(accel: &str) -> Result<Self, PortalError> {
        let trigger = xdg_trigger(accel).ok_or_else(|| PortalError::Notation(accel.into()))?;
        let conn = Connection::session().await?;
        let rule = MatchRule::builder()
            .msg_type(MessageType::Signal)
            .interface(INTERFACE)
            .path(PATH)
            .build()?;
        let signals = MessageStream::for_match_rule(rule, &conn, None).await?;
        let shortcuts = [NewShortcut(
            SHORTCUT_ID.into(),
            ShortcutSpec {
                description: "Outpost: hold to talk, or press to bring Outpost forward".into(),
                preferred_trigger: trigger.clone(),
            },
        )];
        let token = session_token(&trigger);
        let options = CreateOptions {
            handle_token: "outpost_create",
            session_handle_token: &token,
            shortcuts: &shortcuts,
        };
        let created = tokio::time::timeout(
            CREATE_TIMEOUT,
            request(&conn, "CreateSession", "outpost_create", &(options,)),
        )
        .await
        .map_err(|_| PortalError::Timeout)?
        .map_err(|e| e.during("CreateSession"))?;
        let session = created.session_handle.ok_or(PortalError::Incomplete {
            what: "CreateSession",
            field: "session_handle",
        })?;
        let session = OwnedObjectPath::try_from(session)?;
        let bind = BindOptions {
            handle_token: "outpost_bind",
        };
        let bound = request(
            &conn,
            "BindShortcuts",
            "outpost_bind",
            &(&session, &shortcuts[..], "", bind),
        )
        .await;
        let bound = match bound {
            Ok(b) => b,
            Err(e) => {
                close(&conn, &session).await;
                return Err(e.during("BindShortcuts"));
            }
        };
        let trigger = bound
            .shortcuts
            .unwrap_or_default()
            .into_iter()
            .find(|(id, _)| id == SHORTCUT_ID)
            .and_then(|(_, info)| info.trigger_description)
            .filter(|t| !t.trim().is_empty());
        tracing::info!(%session, ?trigger, "system-wide shortcut bound through the desktop portal");
        Ok(Self {
            conn,
            session,
            signals,
            trigger,
        })
    }

    /// Turns the session's `Activated`/`Deactivated` into key down/up until `stop` (or the
    /// bus connection ends), then closes the session. True when `stop` ended it.
    async fn listen<R: Runtime>(
        mut self,
        app: &AppHandle<R>,
        keys: Keys,
        mut stop: tokio::sync::oneshot::Receiver<()>,
    ) -> bool {
        let stopped = loop {
            let msg = tokio::select! {
                _ = &mut stop => break true,
                msg = self.signals.next() => msg,
            };
            let Some(Ok(msg)) = msg else { break false };
            let header = msg.header();
            let Some(member) = header.member().map(|m| m.as_str().to_owned()) else {
                continue;
            };
            let body = msg.body();
            let Ok((session, id, _, _)) =
                body.deserialize::<(OwnedObjectPath, String, u64, HashMap<String, OwnedVariant>)>()
            else {
                continue;
            };
            if session != self.session || id != SHORTCUT_ID {
                continue;
            }
            match member.as_str() {
                "Activated" => keys.down(app),
                "Deactivated" => keys.up(),
                _ => {}
            }
        };
        // A key still held when the session ends must not leave the microphone live.
        keys.up();
        self.close().await;
        stopped
    }

    async fn close(self) {
        close(&self.conn, &self.session).await;
    }
}

/// `org.freedesktop.portal.Session.Close`; a session already gone is fine.
async fn close(conn: &Connection, session: &OwnedObjectPath) {
    let _ = conn
        .call_method(
            Some(DESTINATION),
            session.as_ref(),
            Some("org.freedesktop.portal.Session"),
            "Close",
            &(),
        )
        .await;
}

/// Why one portal request failed, before it is said which.
enum RequestError {
    Bus(zbus::Error),
    Refused(u32),
}

impl RequestError {
    fn during(self, what: &'static str) -> PortalError {
        match self {
            Self::Bus(e) => PortalError::Bus(e),
            Self::Refused(code) => PortalError::Refused { what, code },
        }
    }
}

impl From<zbus::Error> for RequestError {
    fn from(e: zbus::Error) -> Self {
        Self::Bus(e)
    }
}

/// Calls `method` and waits for its `org.freedesktop.portal.Request.Response`. The request
/// object's path follows from our bus name and `token` (the portal's documented rule), so
/// the answer is subscribed to before the call and cannot be missed.
async fn request<B>(
    conn: &Connection,
    method: &str,
    token: &str,
    body: &B,
) -> Result<Results, RequestError>
where
    B: Serialize + zbus::DynamicType,
{
    let sender = conn
        .unique_name()
        .map(|n| n.as_str().trim_start_matches(':').replace('.', "_"))
        .unwrap_or_default();
    let path = format!("{PATH}/request/{sender}/{token}");
    let rule = MatchRule::builder()
        .msg_type(MessageType::Signal)
        .interface("org.freedesktop.portal.Request")
        .member("Response")
        .path(path.as_str())
        .build()?;
    let mut responses = MessageStream::for_match_rule(rule, conn, None).await?;
    conn.call_method(Some(DESTINATION), PATH, Some(INTERFACE), method, body)
        .await?;
    let msg = responses
        .next()
        .await
        .ok_or(zbus::Error::InputOutput(std::sync::Arc::new(
            std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
        )))??;
    let (code, results) = msg.body().deserialize::<(u32, Results)>()?;
    if code == 0 {
        Ok(results)
    } else {
        Err(RequestError::Refused(code))
    }
}

/// `CreateSession`'s options; `shortcuts` is what KDE Plasma before 6.2 binds.
#[derive(SerializeDict, Type)]
#[zbus(signature = "a{sv}")]
struct CreateOptions<'a> {
    handle_token: &'a str,
    session_handle_token: &'a str,
    shortcuts: &'a [NewShortcut],
}

/// `BindShortcuts`' options.
#[derive(SerializeDict, Type)]
#[zbus(signature = "a{sv}")]
struct BindOptions<'a> {
    handle_token: &'a str,
}

/// One shortcut asked for: `(id, {description, preferred_trigger})`.
#[derive(Serialize, Type)]
struct NewShortcut(String, ShortcutSpec);

#[derive(SerializeDict, Type)]
#[zbus(signature = "a{sv}")]
struct ShortcutSpec {
    description: String,
    preferred_trigger: String,
}

/// A request's results (the keys of both calls; others are ignored).
#[derive(DeserializeDict, Type, Default)]
#[zbus(signature = "a{sv}")]
struct Results {
    session_handle: Option<String>,
    shortcuts: Option<Vec<(String, ShortcutInfo)>>,
}

/// A bound shortcut as the portal describes it.
#[derive(DeserializeDict, Type, Default)]
#[zbus(signature = "a{sv}")]
struct ShortcutInfo {
    trigger_description: Option<String>,
}

/// The session token, the same for the same key from run to run: KDE names the shortcut
/// group after it and keeps the group's key on record, and a new group may not take a
/// key an old one has (so a random token would get no key after the first run).
fn session_token(trigger: &str) -> String {
    let key: String = trigger
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("outpost_{key}")
}

/// `accel` (the accelerator notation of Settings, `Ctrl+Alt+Space`) in the portal's
/// shortcut notation (the XDG shortcuts spec: `CTRL+ALT+space`, modifiers then an XKB key
/// name). None when a part has no equivalent.
pub fn xdg_trigger(accel: &str) -> Option<String> {
    let parts: Vec<&str> = accel.split('+').map(str::trim).collect();
    let (key, modifiers) = parts.split_last()?;
    let mut out = Vec::with_capacity(parts.len());
    for m in modifiers {
        let m = match m.to_ascii_lowercase().as_str() {
            "ctrl" | "control" | "cmdorctrl" | "commandorcontrol" => "CTRL",
            "alt" | "option" => "ALT",
            "shift" => "SHIFT",
            "super" | "meta" | "cmd" | "command" | "logo" => "LOGO",
            _ => return None,
        };
        if !out.contains(&m) {
            out.push(m);
        }
    }
    let mut line = out.join("+");
    if !line.is_empty() {
        line.push('+');
    }
    line.push_str(&xkb_key(key)?);
    Some(line)
}

/// An accelerator's key as an XKB key name.
fn xkb_key(key: &str) -> Option<String> {
    let k = key
        .strip_prefix("Key")
        .or_else(|| key.strip_prefix("Digit"))
        .filter(|k| k.len() == 1)
        .unwrap_or(key);
    let mut chars = k.chars();
    if let (Some(c), None) = (chars.next(), chars.next())
        && c.is_ascii_alphanumeric()
    {
        return Some(c.to_ascii_lowercase().to_string());
    }
    if let Some(n) = k.strip_prefix(['F', 'f'])
        && n.parse::<u8>().is_ok_and(|n| (1..=24).contains(&n))
    {
        return Some(format!("F{n}"));
    }
    let name = match k.to_ascii_lowercase().as_str() {
        "space" => "space",
        "enter" | "return" => "Return",
        "tab" => "Tab",
        "escape" | "esc" => "Escape",
        "backspace" => "BackSpace",
        "delete" | "del" => "Delete",
        "insert" => "Insert",
        "home" => "Home",
        "end" => "End",
        "pageup" => "Page_Up",
        "pagedown" => "Page_Down",
        "up" | "arrowup" => "Up",
        "down" | "arrowdown" => "Down",
        "left" | "arrowleft" => "Left",
        "right" | "arrowright" => "Right",
        "pause" => "Pause",
        "printscreen" => "Print",
        "scrolllock" => "Scroll_Lock",
        _ => return None,
    };
    Some(name.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accelerators_become_the_portals_notation() {
        let cases = [
            ("Ctrl+Alt+Space", Some("CTRL+ALT+space")),
            ("CommandOrControl+Shift+KeyK", Some("CTRL+SHIFT+k")),
            ("Super+Digit5", Some("LOGO+5")),
            ("F9", Some("F9")),
            ("Alt+PageDown", Some("ALT+Page_Down")),
            ("Ctrl+Hyper+A", None),
            ("Ctrl+Alt+Nonsense", None),
            ("Ctrl+", None),
            ("", None),
        ];
        for (accel, want) in cases {
            assert_eq!(xdg_trigger(accel).as_deref(), want, "{accel:?}");
        }
    }

    #[test]
    fn the_session_token_is_stable_and_valid() {
        assert_eq!(session_token("CTRL+ALT+space"), "outpost_CTRL_ALT_space");
        // A D-Bus object path element: ASCII letters, digits and `_` only, whatever the key.
        for trigger in ["SHIFT+ä", "CTRL+minus", "LOGO+.", "F9"] {
            let token = session_token(trigger);
            assert!(
                token.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{trigger}: {token}"
            );
        }
    }
}
