//! One app per user session (Linux), decided before any window exists.
//!
//! The first instance owns the D-Bus name `IDENTIFIER.SingleInstance` on the session bus and
//! serves `Activate` on it. A later start asks for the same name *in the queue*, then calls
//! `Activate`:
//!
//! - the running instance answers `true` (it focused its window, or is still starting and
//!   about to show one): the later start exits;
//! - it answers `false` (it is shutting down: it also gives the name up at that moment), or
//!   does not answer within [`ASK_PATIENCE`] (busy, hung, gone): the later start waits
//!   until the bus hands it the name (when the old instance releases it or its connection
//!   closes) and then starts normally. After [`WAIT_PATIENCE`] it starts anyway: a second
//!   window is better than none.
//!
//! So a start never ends without a window somewhere. Without a session bus the app starts
//! normally (there is no way to find another instance).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use zbus::blocking::Connection;
use zbus::fdo::RequestNameReply;

/// How long a later start waits for the running instance to answer `Activate`.
pub const ASK_PATIENCE: Duration = Duration::from_secs(5);
/// How long a later start waits for a departing instance to give the name up.
pub const WAIT_PATIENCE: Duration = Duration::from_secs(30);

// The phases; a new `State` is starting (0).
const RUNNING: u8 = 1;
const EXITING: u8 = 2;

/// What to do when another start asks this instance to come forward.
pub type Focus = Box<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct State {
    phase: AtomicU8,
    focus: std::sync::Mutex<Option<Focus>>,
}

struct Activation(Arc<State>);

#[zbus::interface(name = "dev.outpost.app.SingleInstance")]
impl Activation {
    /// Brings the window forward; `false` when this instance is on its way out.
    fn activate(&self, _argv: Vec<String>) -> bool {
        match self.0.phase.load(Ordering::Acquire) {
            EXITING => false,
            RUNNING => {
                if let Some(f) = self
                    .0
                    .focus
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                {
                    f();
                }
                true
            }
            // Still starting: its window shows up on its own.
            _ => true,
        }
    }
}

/// This instance's hold on the name. Keep it for the app's life; [`Instance::exiting`]
/// gives the name up as soon as the app starts to quit.
pub struct Instance {
    conn: Option<Connection>,
    name: String,
    state: Arc<State>,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("name", &self.name)
            .field("on_bus", &self.conn.is_some())
            .finish_non_exhaustive()
    }
}

/// The outcome of [`claim`].
#[derive(Debug)]
pub enum Claim {
    /// Go on starting: this is the one instance (or no bus could tell).
    Primary(Instance),
    /// The running instance came forward: exit now.
    Handed,
}

/// The D-Bus name for the app `identifier` (tauri.conf.json).
pub fn bus_name(identifier: &str) -> String {
    format!("{identifier}.SingleInstance")
}

fn object_path(name: &str) -> String {
    format!("/{}", name.replace('.', "/").replace('-', "_"))
}

/// Decides whether this start goes on (see the module documentation).
pub fn claim(identifier: &str) -> Claim {
    let name = bus_name(identifier);
    let state = Arc::new(State::default());
    let conn = match zbus::blocking::connection::Builder::session()
        .map(|b| b.method_timeout(ASK_PATIENCE))
        .and_then(zbus::blocking::connection::Builder::build)
    {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "no D-Bus session bus; not checking for another instance");
            return Claim::Primary(Instance {
                conn: None,
                name,
                state,
            });
        }
    };
    match hold(&conn, &name, &state) {
        Ok(claim) => claim,
        Err(e) => {
            tracing::warn!(error = %e, "single-instance check failed; starting anyway");
            Claim::Primary(Instance {
                conn: Some(conn),
                name,
                state,
            })
        }
    }
}

fn hold(conn: &Connection, name: &str, state: &Arc<State>) -> zbus::Result<Claim> {
    let path = object_path(name);
    // Served before the name is ours, so whoever finds us by the name can call it.
    conn.object_server()
        .at(path.as_str(), Activation(Arc::clone(state)))?;
    let primary = || {
        Claim::Primary(Instance {
            conn: Some(conn.clone()),
            name: name.to_owned(),
            state: Arc::clone(state),
        })
    };
    // No flags: never replace the owner, and wait in the queue if there is one.
    let reply = conn.request_name_with_flags(name, Default::default())?;
    if matches!(
        reply,
        RequestNameReply::PrimaryOwner | RequestNameReply::AlreadyOwner
    ) {
        return Ok(primary());
    }
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let answer: zbus::Result<bool> = conn
        .call_method(
            Some(name),
            path.as_str(),
            Some("dev.outpost.app.SingleInstance"),
            "Activate",
            &(argv,),
        )
        .and_then(|m| m.body().deserialize::<bool>());
    match answer {
        Ok(true) => {
            tracing::info!("Outpost is already running; brought its window forward");
            release(conn, name);
            return Ok(Claim::Handed);
        }
        Ok(false) => tracing::info!("the running Outpost is quitting; waiting for it"),
        Err(e) => tracing::warn!(error = %e, "the running Outpost does not answer; waiting for it"),
    }
    let dbus = zbus::blocking::fdo::DBusProxy::new(conn)?;
    let me = conn.unique_name().map(ToString::to_string);
    let deadline = Instant::now() + WAIT_PATIENCE;
    while Instant::now() < deadline {
        let owner = dbus
            .get_name_owner(name.try_into()?)
            .ok()
            .map(|o| o.to_string());
        if owner.is_some() && owner == me {
            return Ok(primary());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    tracing::warn!(
        "the other Outpost did not quit within {} s; starting a second window",
        WAIT_PATIENCE.as_secs()
    );
    Ok(primary())
}

fn release(conn: &Connection, name: &str) {
    if let Err(e) = conn.release_name(name) {
        tracing::debug!(error = %e, "releasing the single-instance name");
    }
}

impl Instance {
    /// The app is up: `focus` brings its window forward from now on.
    pub fn running(&self, focus: Focus) {
        *self.state.focus.lock().unwrap_or_else(|p| p.into_inner()) = Some(focus);
        self.state.phase.store(RUNNING, Ordering::Release);
    }

    /// The app is quitting: later starts are told so, and the name goes to the next in line.
    pub fn exiting(&self) {
        if self.state.phase.swap(EXITING, Ordering::AcqRel) == EXITING {
            return;
        }
        if let Some(conn) = &self.conn {
            release(conn, &self.name);
        }
    }
}
