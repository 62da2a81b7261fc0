//! One app per profile (its data folder), decided before Tauri builds anything.
//!
//! The running instance holds an exclusive lock on `instance.lock` in the data folder for
//! its whole life (the kernel drops it when the process ends, however it ends) and answers
//! on the Unix socket `instance.sock` beside it. A later start:
//!
//! - takes the lock if it is free: it is the one instance, and starts normally;
//! - otherwise connects to the socket and says `activate`. The running instance answers
//!   `shown` (it brought its window forward, or is still starting and about to show it):
//!   the later start exits, successfully, without a window of its own. It answers
//!   `exiting` when it is quitting (its window is gone or going);
//! - on `exiting`, or no answer within [`ASK_PATIENCE`] (busy, stopped, hung), it waits
//!   for the lock, i.e. for the old process to end, and then starts normally. After
//!   [`WAIT_PATIENCE`] it starts anyway: a second window is better than none.
//!
//! So a start never ends without a window somewhere. When the folder cannot be locked at
//! all (read-only, no support) the app starts without the check.
//!
//! (This replaced tauri-plugin-single-instance, whose second start exits as soon as the
//! old instance's D-Bus service takes the call, even while that instance is quitting.)

use std::fs::{File, TryLockError};
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a later start waits for the running instance to answer.
pub const ASK_PATIENCE: Duration = Duration::from_secs(5);
/// How long a later start waits for a departing instance to end.
pub const WAIT_PATIENCE: Duration = Duration::from_secs(30);
/// How often a waiting start tries the lock again.
const POLL: Duration = Duration::from_millis(50);

/// The lock file and the socket, in the data folder.
pub const LOCK_FILE: &str = "instance.lock";
/// See [`LOCK_FILE`].
pub const SOCKET_FILE: &str = "instance.sock";

// The running instance's phases; a new `Shared` is starting (0).
const RUNNING: u8 = 1;
const EXITING: u8 = 2;

/// Brings the window forward; `false` when there is no window (any more).
pub type Focus = Box<dyn Fn() -> bool + Send + Sync>;

#[derive(Default)]
struct Shared {
    phase: AtomicU8,
    focus: Mutex<Option<Focus>>,
}

impl Shared {
    fn answer(&self) -> &'static str {
        match self.phase.load(Ordering::Acquire) {
            EXITING => "exiting",
            RUNNING => {
                let focus = outpost_sync::lock(&self.focus);
                match focus.as_ref() {
                    Some(f) if f() => "shown",
                    Some(_) => "exiting",
                    None => "shown",
                }
            }
            // Still starting: its window shows up on its own.
            _ => "shown",
        }
    }
}

/// This instance's hold on the profile; keep it for the app's life.
pub struct Instance {
    /// `None` when the app started without the check (or after waiting in vain).
    _lock: Option<File>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("locked", &self._lock.is_some())
            .field("phase", &self.shared.phase.load(Ordering::Relaxed))
            .finish()
    }
}

impl Instance {
    fn unlocked() -> Self {
        Instance {
            _lock: None,
            shared: Arc::default(),
        }
    }

    /// The app is up: from now on a later start is answered by calling `focus`.
    pub fn running(&self, focus: Focus) {
        *outpost_sync::lock(&self.shared.focus) = Some(focus);
        // Never back from EXITING.
        let _ = self
            .shared
            .phase
            .compare_exchange(0, RUNNING, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The app is quitting: a later start waits for this process to end.
    pub fn exiting(&self) {
        self.shared.phase.store(EXITING, Ordering::Release);
    }
}

/// The outcome of [`claim`].
#[derive(Debug)]
pub enum Claim {
    /// Go on starting: this is the one instance (or nothing could tell).
    Primary(Instance),
    /// The running instance brought its window forward: exit now.
    Handed,
}

/// Decides whether this start goes on (see the module documentation). `dir` is the
/// profile's data folder.
pub fn claim(dir: &Path) -> Claim {
    let lock = match open_lock(dir) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(error = %e, dir = %dir.display(), "cannot open the instance lock; not checking for another instance");
            return Claim::Primary(Instance::unlocked());
        }
    };
    let socket = dir.join(SOCKET_FILE);
    match try_lock(&lock) {
        Ok(true) => return Claim::Primary(primary(lock, &socket)),
        Ok(false) => {}
        Err(e) => {
            tracing::warn!(error = %e, "cannot lock the instance lock; not checking for another instance");
            return Claim::Primary(Instance::unlocked());
        }
    }
    // Another process holds it. Ask it (it binds the socket right after locking, so
    // retry the connection for a moment), unless it ends meanwhile.
    let deadline = Instant::now() + ASK_PATIENCE;
    loop {
        match ask(&socket, deadline) {
            Ok(answer) if answer == "shown" => {
                tracing::info!("Outpost is already running; brought its window forward");
                return Claim::Handed;
            }
            Ok(answer) => {
                tracing::info!(%answer, "the running Outpost is quitting; waiting for it to end");
                break;
            }
            Err(e) => {
                if matches!(try_lock(&lock), Ok(true)) {
                    return Claim::Primary(primary(lock, &socket));
                }
                if Instant::now() >= deadline {
                    tracing::warn!(error = %e, "the running Outpost does not answer; waiting for it to end");
                    break;
                }
                std::thread::sleep(POLL);
            }
        }
    }
    let deadline = Instant::now() + WAIT_PATIENCE;
    while Instant::now() < deadline {
        if matches!(try_lock(&lock), Ok(true)) {
            tracing::info!("the previous Outpost has ended; starting");
            return Claim::Primary(primary(lock, &socket));
        }
        std::thread::sleep(POLL);
    }
    tracing::warn!(
        "the previous Outpost did not end within {} s; starting a second window",
        WAIT_PATIENCE.as_secs()
    );
    Claim::Primary(Instance::unlocked())
}

fn open_lock(dir: &Path) -> std::io::Result<File> {
    // The data folder is the user's alone (it may not exist yet: this runs first).
    outpost_desktop::paths::private_dir(dir).map_err(std::io::Error::other)?;
    let mut options = File::options();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(dir.join(LOCK_FILE))
}

/// `Ok(false)` when another process holds the lock.
fn try_lock(f: &File) -> std::io::Result<bool> {
    match f.try_lock() {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// Asks the running instance to come forward; its one-line answer.
fn ask(socket: &Path, deadline: Instant) -> std::io::Result<String> {
    let mut s = UnixStream::connect(socket)?;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(100));
    s.set_read_timeout(Some(left))?;
    s.set_write_timeout(Some(left))?;
    s.write_all(b"activate\n")?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line)?;
    let answer = line.trim().to_owned();
    if answer.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "no answer",
        ));
    }
    Ok(answer)
}

/// We hold the lock: serve the socket (a stale one from a crashed run is ours to replace).
fn primary(lock: File, socket: &PathBuf) -> Instance {
    let shared = Arc::new(Shared::default());
    let _ = std::fs::remove_file(socket);
    match UnixListener::bind(socket) {
        Ok(listener) => {
            let s = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name("single-instance".into())
                .spawn(move || serve(listener, &s));
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot serve the instance socket");
            }
        }
        // A later start then finds no one to ask and waits for this process to end.
        Err(e) => {
            tracing::warn!(error = %e, socket = %socket.display(), "cannot serve the instance socket")
        }
    }
    Instance {
        _lock: Some(lock),
        shared,
    }
}

fn serve(listener: UnixListener, shared: &Shared) {
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
        let mut line = String::new();
        let asked = conn
            .try_clone()
            .map(|c| BufReader::new(c).read_line(&mut line));
        if !matches!(asked, Ok(Ok(_))) || line.trim() != "activate" {
            continue;
        }
        let answer = shared.answer();
        tracing::info!(%answer, "another start asked for the window");
        let _ = conn.write_all(format!("{answer}\n").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_claim_is_handed_while_first_runs_and_waits_while_it_exits() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let Claim::Primary(first) = claim(dir.path()) else {
            panic!("the first claim must be primary")
        };
        // Starting: a later start is told the window is coming.
        assert!(matches!(claim(dir.path()), Claim::Handed));
        first.running(Box::new(|| true));
        assert!(matches!(claim(dir.path()), Claim::Handed));
        // Window gone: the later start waits for the process; here the holder ends soon.
        first.running(Box::new(|| false));
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            first.exiting();
            drop(first);
        });
        let t0 = Instant::now();
        let Claim::Primary(second) = claim(dir.path()) else {
            panic!("a start while the first quits must wait and become primary")
        };
        assert!(t0.elapsed() >= Duration::from_millis(250));
        assert!(second._lock.is_some());
        t.join().unwrap_or_else(|_| panic!("holder thread"));
    }
}
