//! Child processes that are killed when the test is done with them (even on panic),
//! with their output kept in files for the failure message.

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

/// A running child, killed (SIGKILL) and reaped on drop. Its stderr goes to a file.
#[derive(Debug)]
pub struct Proc {
    child: Child,
    what: String,
    stderr_path: PathBuf,
}

fn log_path(what: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let safe: String = what
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(40)
        .collect();
    std::env::temp_dir().join(format!(
        "outpost-test-{}-{n}-{safe}.log",
        std::process::id()
    ))
}

impl Proc {
    /// Spawns `cmd` with piped stdout and stderr into a log file.
    pub fn spawn(what: &str, mut cmd: Command) -> anyhow::Result<Self> {
        let stderr_path = log_path(what);
        let stderr = std::fs::File::create(&stderr_path)?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("spawning {what}"))?;
        Ok(Self {
            child,
            what: what.to_owned(),
            stderr_path,
        })
    }

    /// Reads stdout lines until one contains `needle` (returned) or `timeout` passes.
    pub fn wait_for_line(&mut self, needle: &str, timeout: Duration) -> anyhow::Result<String> {
        let stdout = self.child.stdout.take().context("stdout already taken")?;
        let (tx, rx) = std::sync::mpsc::channel();
        let needle = needle.to_owned();
        std::thread::spawn(move || {
            // Keep draining after the match so the child never writes into a closed pipe.
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains(&needle) {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(line);
                    }
                }
            }
        });
        rx.recv_timeout(timeout).map_err(|_| {
            anyhow::anyhow!(
                "{} did not print the expected line in {timeout:?}; stderr:\n{}",
                self.what,
                self.stderr()
            )
        })
    }

    /// Hands every stdout line to the returned channel as it comes (for a child that
    /// reports progress in several lines); closed when stdout closes.
    pub fn stdout_lines(&mut self) -> anyhow::Result<std::sync::mpsc::Receiver<String>> {
        let stdout = self.child.stdout.take().context("stdout already taken")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    // Nobody listens; keep draining so the child never blocks.
                    continue;
                }
            }
        });
        Ok(rx)
    }

    /// Spawns `cmd`, a child that prints "ready" on stdout once it is up, and waits up to
    /// `timeout` for that line; the lines after it come on the returned channel.
    pub fn spawn_ready(
        what: &str,
        cmd: Command,
        timeout: Duration,
    ) -> anyhow::Result<(Self, std::sync::mpsc::Receiver<String>)> {
        let mut p = Self::spawn(what, cmd)?;
        let lines = p.stdout_lines()?;
        match lines.recv_timeout(timeout) {
            Ok(l) if l == "ready" => Ok((p, lines)),
            other => bail!(
                "{what} did not print \"ready\" ({other:?}); stderr:\n{}",
                p.stderr()
            ),
        }
    }

    /// The next line on `lines` (from [`Proc::stdout_lines`]) that is a JSON object with
    /// `"event": event`, waiting up to `timeout`; other lines are skipped.
    pub fn next_event(
        &self,
        lines: &std::sync::mpsc::Receiver<String>,
        event: &str,
        timeout: Duration,
    ) -> anyhow::Result<serde_json::Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = lines.recv_timeout(left) else {
                bail!(
                    "{} printed no {event:?} event; stderr:\n{}",
                    self.what,
                    self.stderr()
                );
            };
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                if v["event"] == event {
                    return Ok(v);
                }
            }
        }
    }

    /// Waits for exit up to `timeout`, then kills. Returns status, stdout and stderr.
    pub fn finish(mut self, timeout: Duration) -> anyhow::Result<(ExitStatus, String, String)> {
        let mut stdout = self.child.stdout.take();
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(out) = stdout.as_mut() {
                let _ = out.read_to_string(&mut s);
            }
            s
        });
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(st) = self.child.try_wait()? {
                break st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                bail!(
                    "{} timed out after {timeout:?}; stderr:\n{}",
                    self.what,
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let out = reader.join().unwrap_or_default();
        Ok((status, out, self.stderr()))
    }

    /// Process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// What the child wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::env::var_os("OUTPOST_TEST_KEEP_LOGS").is_none() {
            let _ = std::fs::remove_file(&self.stderr_path);
        } else {
            #[allow(clippy::print_stderr)]
            {
                eprintln!(
                    "kept the log of {}: {}",
                    self.what,
                    self.stderr_path.display()
                );
            }
        }
    }
}

/// Whether `name` has an owner on the session bus that `dbus_send` (a `dbus-send` command,
/// already given the bus's address or a namespace to run in) reaches. False when dbus-send
/// cannot run.
pub fn bus_name_owned(mut dbus_send: Command, name: &str) -> bool {
    dbus_send
        .args([
            "--session",
            "--print-reply",
            "--dest=org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus.NameHasOwner",
            &format!("string:{name}"),
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("boolean true"))
}
