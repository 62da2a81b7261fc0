//! The local demo: the `outpost-room` server on a free loopback port and the reference
//! assistant (`outpost-agent`, the scripted brain unless `OUTPOST_BRAIN` and friends say
//! otherwise), each its own child process. Nothing leaves the machine.
//!
//! - **Where the programs are**: `OUTPOST_DEMO_BIN_DIR` if set and not empty (only there), else next to
//!   the running executable (how the packages install them: `/usr/bin`, like the app),
//!   else on `PATH`. Each is checked before use: an executable file whose `--version` is
//!   this app's version.
//! - **Keys**: a random API secret per demo, handed to both children through their
//!   environment (never the command line, which other users can read); the app's token is
//!   minted by `outpost-room token` with the same keys.
//! - **Lifetime**: both start with `--exit-on-stdin-close` and a pipe as standard input
//!   whose other end only this process holds (Rust opens pipes close-on-exec, so the web
//!   view's processes do not inherit it). When the app exits, normally or by a crash, the
//!   kernel closes that end and the children leave. [`Demo::stop`] closes it itself and
//!   waits; dropping a [`Demo`] kills them.
//! - **Logs**: `demo-room.log` and `demo-agent.log` in the folder given to
//!   [`Demo::start`] (the data directory's `logs/`), rewritten at each start.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

use crate::error::{DesktopError, Result};

/// The demo's room.
pub const DEMO_ROOM: &str = "outpost-demo";
/// The app's identity in the demo room.
pub const DEMO_IDENTITY: &str = "outpost-app";
/// A folder holding `outpost-room` and `outpost-agent`, for development builds whose
/// executables are not side by side (tests, `cargo run`).
pub const BIN_DIR_ENV: &str = "OUTPOST_DEMO_BIN_DIR";
/// The room server's program name.
pub const ROOM_BIN: &str = "outpost-room";
/// The assistant's program name.
pub const AGENT_BIN: &str = "outpost-agent";

/// How long the room server may take to listen, and the assistant to join.
const START_PATIENCE: Duration = Duration::from_secs(40);
/// How long [`Demo::stop`] waits for each child to leave before killing it.
const STOP_PATIENCE: Duration = Duration::from_secs(5);
/// The API key name of the demo's key pair (the secret is random).
const DEMO_KEY: &str = "outpost-demo";
/// The variable `outpost-room` reads `--keys` from (`outpost_room::cli::KEYS_ENV`; the app
/// does not link the room server, so it is spelled out here).
const ROOM_KEYS_ENV: &str = "OUTPOST_ROOM_KEYS";

/// A running demo: two child processes. [`Demo::stop`] ends them; dropping it kills them.
#[derive(Debug)]
pub struct Demo {
    room: Child,
    agent: Child,
    /// `ws://127.0.0.1:PORT`.
    pub url: String,
    /// The app's token for [`DEMO_ROOM`].
    pub token: String,
}

/// The two programs, found and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoPrograms {
    /// `outpost-room`.
    pub room: PathBuf,
    /// `outpost-agent`.
    pub agent: PathBuf,
}

impl DemoPrograms {
    /// Finds both programs (see the module documentation) and checks their version.
    pub async fn locate() -> Result<Self> {
        let dir = std::env::var_os(BIN_DIR_ENV)
            .filter(|d| !d.is_empty())
            .map(PathBuf::from);
        let exe_dir = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf));
        let path = std::env::var_os("PATH");
        let room = find(
            ROOM_BIN,
            dir.as_deref(),
            exe_dir.as_deref(),
            path.as_deref(),
        )?;
        let agent = find(
            AGENT_BIN,
            dir.as_deref(),
            exe_dir.as_deref(),
            path.as_deref(),
        )?;
        check_version(&room).await?;
        check_version(&agent).await?;
        Ok(Self { room, agent })
    }
}

/// Where `name` is: in `dir` only when given; else in `exe_dir`, else in `PATH`'s folders.
fn find(
    name: &str,
    dir: Option<&Path>,
    exe_dir: Option<&Path>,
    path: Option<&std::ffi::OsStr>,
) -> Result<PathBuf> {
    if let Some(dir) = dir {
        let p = dir.join(name);
        return if is_executable(&p) {
            Ok(p)
        } else {
            Err(DesktopError::Internal(format!(
                "The local demo needs {name}, but {} is not an executable file \
                 ({BIN_DIR_ENV} is set to {}).",
                p.display(),
                dir.display()
            )))
        };
    }
    let mut dirs: Vec<PathBuf> = exe_dir.map(Path::to_path_buf).into_iter().collect();
    dirs.extend(
        path.map(|p| std::env::split_paths(p).collect::<Vec<_>>())
            .unwrap_or_default(),
    );
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
        .ok_or_else(|| {
            DesktopError::Internal(format!(
                "The local demo needs {name}, which Outpost's packages install next to the \
                 app; it is neither next to {} nor on PATH. For a development build, run \
                 `cargo build -p outpost-room -p outpost-agent` (same profile as the app) or \
                 set {BIN_DIR_ENV}.",
                exe_dir.map_or_else(|| "the app".to_owned(), |d| d.display().to_string())
            ))
        })
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.is_file()
}

/// Runs `program --version` and checks it names this app's version: a stale development
/// build or a leftover of another install would speak another protocol version.
async fn check_version(program: &Path) -> Result<()> {
    let want = env!("CARGO_PKG_VERSION");
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        Command::new(program)
            .arg("--version")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| internal(program, "did not answer --version within 10 s"))?
    .map_err(|e| internal(program, &format!("could not be started: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.split_whitespace().nth(1).unwrap_or_default();
    if !out.status.success() || version != want {
        return Err(internal(
            program,
            &format!(
                "is version {:?}, but this app is {want}; install matching versions",
                text.trim()
            ),
        ));
    }
    Ok(())
}

fn internal(program: &Path, what: &str) -> DesktopError {
    DesktopError::Internal(format!("The demo program {} {what}.", program.display()))
}

impl Demo {
    /// Starts the room server on a free loopback port and the assistant in it; returns
    /// once the assistant has joined. `log_dir` receives both programs' logs.
    pub async fn start(log_dir: &Path) -> Result<Self> {
        let programs = DemoPrograms::locate().await?;
        Self::start_with(&programs, log_dir).await
    }

    /// [`Demo::start`] with programs found elsewhere.
    pub async fn start_with(programs: &DemoPrograms, log_dir: &Path) -> Result<Self> {
        crate::paths::private_dir(log_dir).map_err(|e| {
            DesktopError::Internal(format!(
                "Could not create the demo's log folder {}: {e}",
                log_dir.display()
            ))
        })?;
        let keys = format!("{DEMO_KEY}:{}", nanoid::nanoid!(32));

        // The room server: its first line on stdout names the URL it listens on.
        let room_log = log_dir.join("demo-room.log");
        let mut room = spawn(
            Command::new(&programs.room)
                .args(["serve", "--bind", "127.0.0.1:0", "--exit-on-stdin-close"])
                .env(ROOM_KEYS_ENV, &keys),
            &room_log,
        )?;
        let banner = first_line(
            &mut room,
            "outpost-room listening on ",
            &programs.room,
            &room_log,
        )
        .await?;
        let url = banner
            .split_whitespace()
            .next()
            .filter(|u| u.starts_with("ws://"))
            .ok_or_else(|| internal(&programs.room, &format!("printed {banner:?}")))?
            .to_owned();

        // The app's token, signed with the same keys.
        let token = mint_token(&programs.room, &keys).await?;

        // The assistant: it prints one line once it has joined.
        let agent_log = log_dir.join("demo-agent.log");
        let mut agent = spawn(
            Command::new(&programs.agent)
                .args(["--url", &url, "--room", DEMO_ROOM, "--exit-on-stdin-close"])
                .env("OUTPOST_KEYS", &keys)
                // A token meant for another room would win over the demo's keys.
                .env_remove("OUTPOST_AGENT_TOKEN"),
            &agent_log,
        )?;
        if let Err(e) = first_line(
            &mut agent,
            "outpost-agent: joined ",
            &programs.agent,
            &agent_log,
        )
        .await
        {
            let _ = room.start_kill();
            return Err(e);
        }
        Ok(Self {
            room,
            agent,
            url,
            token,
        })
    }

    /// The process ids of the room server and the assistant (while they run).
    pub fn pids(&self) -> Vec<u32> {
        [&self.room, &self.agent]
            .into_iter()
            .filter_map(Child::id)
            .collect()
    }

    /// Stops the assistant and the server: closes their standard input (they leave and
    /// exit), waits a little, then kills what is left.
    pub async fn stop(mut self) {
        for child in [&mut self.agent, &mut self.room] {
            drop(child.stdin.take());
            match tokio::time::timeout(STOP_PATIENCE, child.wait()).await {
                Ok(_) => {}
                Err(_) => {
                    tracing::warn!("a demo program did not stop in time; killing it");
                    let _ = child.kill().await;
                }
            }
        }
    }
}

/// Spawns `cmd` with a pipe as stdin (kept in the child handle: the tie), stdout piped,
/// stderr to `log`; killed when its handle is dropped.
fn spawn(cmd: &mut Command, log: &Path) -> Result<Child> {
    let program = PathBuf::from(cmd.as_std().get_program());
    let file = std::fs::File::create(log).map_err(|e| {
        DesktopError::Internal(format!("Could not create the log {}: {e}", log.display()))
    })?;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(file)
        .env("NO_COLOR", "1")
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| internal(&program, &format!("could not be started: {e}")))
}

/// Waits for the child's first stdout line starting with `prefix`; returns the rest.
/// Later lines are read and dropped, so the child never blocks on a full pipe.
async fn first_line(child: &mut Child, prefix: &str, program: &Path, log: &Path) -> Result<String> {
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| internal(program, "has no standard output"))?;
    let mut lines = BufReader::new(stdout).lines();
    let found = tokio::time::timeout(START_PATIENCE, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(rest) = line.strip_prefix(prefix) {
                return Some(rest.to_owned());
            }
        }
        None
    })
    .await;
    let why = match found {
        Ok(Some(rest)) => {
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            return Ok(rest);
        }
        Ok(None) => match child.wait().await {
            Ok(status) => format!("stopped ({status})"),
            Err(e) => format!("stopped ({e})"),
        },
        Err(_) => {
            let _ = child.start_kill();
            format!("was not ready within {} s", START_PATIENCE.as_secs())
        }
    };
    Err(internal(
        program,
        &format!("{why}; its log {} ends:\n{}", log.display(), log_tail(log)),
    ))
}

/// The last lines of a log, for error messages.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

/// `outpost-room token` for the app's identity, with the demo's keys in its environment.
async fn mint_token(room_program: &Path, keys: &str) -> Result<String> {
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        Command::new(room_program)
            .args(["token", "--room", DEMO_ROOM, "--identity", DEMO_IDENTITY])
            .args(["--ttl", "24h"])
            .env(ROOM_KEYS_ENV, keys)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| internal(room_program, "did not mint a token within 10 s"))?
    .map_err(|e| internal(room_program, &format!("could not be started: {e}")))?;
    let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || token.is_empty() {
        return Err(internal(
            room_program,
            &format!(
                "did not mint a token ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn touch(dir: &Path, name: &str, mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn found_next_to_the_app_before_path() {
        let t = tempfile::tempdir().unwrap();
        let (app, on_path) = (t.path().join("app"), t.path().join("bin"));
        std::fs::create_dir_all(&app).unwrap();
        std::fs::create_dir_all(&on_path).unwrap();
        let beside = touch(&app, ROOM_BIN, 0o755);
        let elsewhere = touch(&on_path, ROOM_BIN, 0o755);
        let path = std::env::join_paths([&on_path]).unwrap();
        assert_eq!(
            find(ROOM_BIN, None, Some(&app), Some(&path)).unwrap(),
            beside
        );
        std::fs::remove_file(&beside).unwrap();
        assert_eq!(
            find(ROOM_BIN, None, Some(&app), Some(&path)).unwrap(),
            elsewhere
        );
    }

    #[test]
    fn the_override_is_the_only_place_looked_at() {
        let t = tempfile::tempdir().unwrap();
        let (over, app) = (t.path().join("over"), t.path().join("app"));
        std::fs::create_dir_all(&over).unwrap();
        std::fs::create_dir_all(&app).unwrap();
        touch(&app, AGENT_BIN, 0o755);
        let err = find(AGENT_BIN, Some(&over), Some(&app), None).unwrap_err();
        assert!(err.to_string().contains(BIN_DIR_ENV), "{err}");
        let p = touch(&over, AGENT_BIN, 0o755);
        assert_eq!(find(AGENT_BIN, Some(&over), Some(&app), None).unwrap(), p);
    }

    #[test]
    fn a_file_that_is_not_executable_or_a_folder_is_not_taken() {
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), ROOM_BIN, 0o644);
        std::fs::create_dir_all(t.path().join(AGENT_BIN)).unwrap();
        for name in [ROOM_BIN, AGENT_BIN] {
            let err = find(name, None, Some(t.path()), None).unwrap_err();
            assert!(
                err.to_string().contains("cargo build -p outpost-room"),
                "{err}"
            );
        }
    }

    #[tokio::test]
    async fn a_program_of_another_version_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("outpost-room");
        std::fs::write(&p, "#!/bin/sh\necho 'outpost-room 0.0.1-old'\n").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = check_version(&p).await.unwrap_err();
        assert!(err.to_string().contains("0.0.1-old"), "{err}");
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\necho 'outpost-room {}'\n",
                env!("CARGO_PKG_VERSION")
            ),
        )
        .unwrap();
        check_version(&p).await.unwrap();
        std::fs::write(&p, "#!/bin/sh\nexit 3\n").unwrap();
        assert!(check_version(&p).await.is_err());
    }
}
