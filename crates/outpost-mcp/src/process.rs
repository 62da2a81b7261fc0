//! Stdio servers as child processes: spawned directly (no shell), in their own process
//! group on Unix so everything they start is stopped with them; stderr appended to a
//! bounded per-server log; stdout watched for lines that are not JSON-RPC, so a server
//! that prints garbage is reported as such.
//!
//! A server must not outlive Outpost, however Outpost ends. An orderly stop kills the
//! group at once (not only through a task, which a runtime shutting down may never run).
//! When Outpost is killed, two things end the group: the server gets `SIGKILL` as its
//! parent dies (`PR_SET_PDEATHSIG` on Linux; the kernel ties it to the spawning thread,
//! which for the host is a runtime worker that lives as long as the runtime), and a
//! watchdog in the server's group (`/bin/sh` blocked reading a pipe whose other end only
//! Outpost holds) sees the pipe close when Outpost's process ends, for any reason, and
//! kills the whole group, helpers the server started included. The watchdog is in the
//! group, so an orderly stop ends it too, and while it lives the group's id cannot be
//! reused.

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::watch;

use crate::error::{McpError, Result};

/// Lines of stderr kept in memory for error messages.
const STDERR_TAIL: usize = 20;
/// Longest stderr line kept (in the log and in memory); the rest of a longer line is cut,
/// so a server that never ends a line costs this much, not all it writes.
pub(crate) const MAX_STDERR_LINE: usize = 16 * 1024;
/// How much of stderr is read at a time.
const STDERR_CHUNK: usize = 8 * 1024;
/// Longest stdout line quoted in an error message.
const QUOTE: usize = 200;

/// What the process left behind that explains a failure.
#[derive(Debug, Default)]
pub(crate) struct Evidence {
    /// The last lines of stderr.
    pub stderr_tail: VecDeque<String>,
    /// The first stdout line that is not a JSON-RPC message.
    pub garbage: Option<String>,
    /// The server sent a message (a stdout line) longer than this many bytes.
    pub oversized: Option<usize>,
}

impl Evidence {
    /// A sentence or two for an error message (empty when there is nothing to say).
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if let Some(max) = self.oversized {
            s.push_str(&format!(
                "; it sent a message longer than {max} bytes, which Outpost does not read"
            ));
        }
        if let Some(g) = &self.garbage {
            s.push_str(&format!(
                "; it wrote this on stdout, which is not MCP (JSON-RPC): '{g}'"
            ));
        }
        if !self.stderr_tail.is_empty() {
            let tail: Vec<&str> = self.stderr_tail.iter().map(String::as_str).collect();
            s.push_str(&format!("; its stderr ends with: {}", tail.join(" | ")));
        }
        s
    }
}

/// A running stdio server (its pipes are handed out separately by [`spawn`]).
pub(crate) struct ServerProcess {
    pub pid: Option<u32>,
    /// The sandboxed server's private temporary folder, removed with this.
    _temp: Option<tempfile_dir::TempDir>,
    /// `None` while running, then how it exited.
    pub exit: watch::Receiver<Option<String>>,
    pub evidence: Arc<Mutex<Evidence>>,
    kill: Option<tokio::sync::oneshot::Sender<()>>,
    /// The watchdog's pipe: open while Outpost runs (the module's doc).
    _watchdog: Option<tokio::process::ChildStdin>,
}

impl ServerProcess {
    /// Stops the process and its group: killed here and now (while it has not been seen
    /// to exit, its id is still its own), then reaped by its task.
    pub fn stop(&mut self) {
        if let Some(k) = self.kill.take() {
            if self.exit.borrow().is_none() {
                kill_group(self.pid);
            }
            let _ = k.send(());
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

pub(crate) struct SpawnSpec<'a> {
    pub server: &'a str,
    pub command: &'a str,
    pub args: &'a [String],
    pub env: &'a [(String, String)],
    pub cwd: Option<&'a Path>,
    pub log: Option<LogFile>,
    /// Longest message (stdout line) read from the server.
    pub max_message: usize,
    /// The sandbox the child applies to itself before exec (none: unsandboxed).
    pub sandbox: Option<Confinement>,
}

/// What a sandboxed child applies to itself ([`crate::sandbox`]).
#[cfg(target_os = "linux")]
pub(crate) type Confinement = crate::sandbox::enforce::Prepared;
/// No sandbox outside Linux: a server is refused or runs unsandboxed before this.
#[cfg(not(target_os = "linux"))]
pub(crate) type Confinement = std::convert::Infallible;

#[cfg(target_os = "linux")]
mod tempfile_dir {
    pub(crate) use tempfile::TempDir;
}

#[cfg(not(target_os = "linux"))]
mod tempfile_dir {
    /// No private temporary folder outside Linux (no sandbox).
    pub(crate) type TempDir = std::convert::Infallible;
}

/// The variables of Outpost's own environment a server inherits (the rest, such as the
/// LiveKit token or a model API key, is not its business); the config's `env` adds more.
#[cfg(unix)]
pub const INHERITED_ENV: &[&str] = &[
    "HOME",
    "LOGNAME",
    "USER",
    "PATH",
    "SHELL",
    "TERM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    // Where TLS trust lives when it is not the system's default (a company's own
    // authority): paths, never secrets; a sandboxed server may read them.
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
];

/// See the Unix list.
#[cfg(not(unix))]
pub const INHERITED_ENV: &[&str] = &[
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PATHEXT",
    "PROCESSOR_ARCHITECTURE",
    "PROGRAMFILES",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "USERNAME",
    "USERPROFILE",
    "COMSPEC",
];

/// Spawns the server. Its stdin/stdout carry MCP; stderr goes to the log.
pub(crate) fn spawn(spec: SpawnSpec<'_>) -> Result<(ServerProcess, SniffedStdout, ChildStdin)> {
    let mut cmd = Command::new(spec.command);
    cmd.env_clear();
    for k in INHERITED_ENV {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    cmd.args(spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = spec.cwd {
        cmd.current_dir(dir);
    }
    #[cfg(unix)]
    cmd.process_group(0);
    #[cfg(target_os = "linux")]
    die_with_parent(&mut cmd);
    let temp = spec
        .sandbox
        .map(|confinement| confine(&mut cmd, confinement));
    let mut child = cmd.spawn().map_err(|e| McpError::Start {
        server: spec.server.to_owned(),
        message: format!("cannot run '{}': {e}", spec.command),
    })?;
    let pid = child.id();
    let missing = |what: &str| McpError::Start {
        server: spec.server.to_owned(),
        message: format!("no {what} pipe to the process"),
    };
    let stdin = child.stdin.take().ok_or_else(|| missing("stdin"))?;
    let stdout = child.stdout.take().ok_or_else(|| missing("stdout"))?;
    let stderr = child.stderr.take().ok_or_else(|| missing("stderr"))?;
    let evidence = Arc::new(Mutex::new(Evidence::default()));

    let ev = evidence.clone();
    let mut log = spec.log;
    if let Some(l) = log.as_mut() {
        l.write_line(&format!(
            "--- started (pid {}): {} {}",
            pid.unwrap_or(0),
            spec.command,
            spec.args.join(" ")
        ));
    }
    let stderr_reader = tokio::spawn(async move {
        let mut stderr = stderr;
        let mut lines = StderrLines::default();
        let mut chunk = vec![0u8; STDERR_CHUNK];
        loop {
            let n = match stderr.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for line in lines.push(chunk.get(..n).unwrap_or_default()) {
                keep_line(&line, log.as_mut(), &ev);
            }
        }
        if let Some(line) = lines.finish() {
            keep_line(&line, log.as_mut(), &ev);
        }
    });

    let watchdog = watchdog(spec.server, pid);
    let (exit_tx, exit_rx) = watch::channel(None);
    let (kill_tx, kill_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(watch_exit(child, pid, kill_rx, exit_tx, stderr_reader));

    let stdout = SniffedStdout::new(stdout, evidence.clone(), spec.max_message);
    let process = ServerProcess {
        pid,
        _temp: temp,
        exit: exit_rx,
        evidence,
        kill: Some(kill_tx),
        _watchdog: watchdog,
    };
    Ok((process, stdout, stdin))
}

/// Writes one stderr line to the log and keeps it (quoted short) for error messages.
fn keep_line(line: &str, log: Option<&mut LogFile>, evidence: &Mutex<Evidence>) {
    if let Some(l) = log {
        l.write_line(line);
    }
    let mut e = outpost_sync::lock(evidence);
    if e.stderr_tail.len() >= STDERR_TAIL {
        e.stderr_tail.pop_front();
    }
    e.stderr_tail.push_back(truncate(line, QUOTE));
}

/// Splits stderr into lines of at most [`MAX_STDERR_LINE`] bytes, as it arrives: a longer
/// line is given once cut (marked), and the rest of it up to its newline is dropped.
#[derive(Debug, Default)]
struct StderrLines {
    line: Vec<u8>,
    /// In a line already given cut: its bytes are dropped until the newline.
    dropping: bool,
}

impl StderrLines {
    /// The lines `bytes` completes (or cuts).
    fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for part in bytes.split_inclusive(|&b| b == b'\n') {
            let (text, ends) = match part.strip_suffix(b"\n") {
                Some(t) => (t, true),
                None => (part, false),
            };
            if !self.dropping {
                let room = MAX_STDERR_LINE - self.line.len();
                if text.len() > room {
                    self.line
                        .extend_from_slice(text.get(..room).unwrap_or_default());
                    let mut cut = String::from_utf8_lossy(&self.line).into_owned();
                    cut.push_str(&format!(
                        " … [cut: the line is longer than {MAX_STDERR_LINE} bytes]"
                    ));
                    out.push(cut);
                    self.line.clear();
                    self.dropping = true;
                } else {
                    self.line.extend_from_slice(text);
                }
            }
            if ends {
                if !self.dropping {
                    out.push(String::from_utf8_lossy(&self.line).into_owned());
                }
                self.line.clear();
                self.dropping = false;
            }
        }
        out
    }

    /// The last line, when stderr ended without a newline.
    fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.line);
        (!rest.is_empty() && !self.dropping).then(|| String::from_utf8_lossy(&rest).into_owned())
    }
}

/// Has the child enter its sandbox (after the parent-death signal is set), with its
/// private temporary folder as `TMPDIR`. Returns that folder.
#[cfg(target_os = "linux")]
fn confine(cmd: &mut Command, confinement: Confinement) -> tempfile_dir::TempDir {
    let temp = confinement.temp.path().to_path_buf();
    for var in ["TMPDIR", "TMP", "TEMP"] {
        cmd.env(var, &temp);
    }
    confinement.install(cmd)
}

#[cfg(not(target_os = "linux"))]
fn confine(_cmd: &mut Command, confinement: Confinement) -> tempfile_dir::TempDir {
    match confinement {}
}

/// The child gets `SIGKILL` when the thread that spawned it ends (Outpost's process
/// ending included); if Outpost is already gone by then, it does not start.
#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the child between fork and exec, and makes only two
    // system calls (prctl, getppid), which are async-signal-safe; it allocates nothing and
    // takes no lock.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(std::io::Error::from)?;
            if rustix::process::getppid() != Some(parent) {
                return Err(std::io::Error::from(std::io::ErrorKind::Other));
            }
            Ok(())
        });
    }
}

/// Starts the watchdog of the group `pid` (the module's doc): `/bin/sh` in that group,
/// reading a pipe until Outpost closes it (or ends), then killing the group. Its pipe's
/// end is returned: keep it while the server runs. None (logged) when it cannot start;
/// the server then has only the parent-death signal.
#[cfg(unix)]
fn watchdog(server: &str, pid: Option<u32>) -> Option<tokio::process::ChildStdin> {
    let group = pid?;
    let mut cmd = Command::new("/bin/sh");
    cmd.env_clear()
        .arg("-c")
        .arg("read _; kill -9 -\"$0\" 2>/dev/null")
        .arg(group.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(i32::try_from(group).ok()?);
    match cmd.spawn() {
        // The child is reaped by tokio once its handle is dropped.
        Ok(mut child) => child.stdin.take(),
        Err(e) => {
            tracing::warn!(server, "no watchdog for the server's process group: {e}");
            None
        }
    }
}

#[cfg(not(unix))]
fn watchdog(_server: &str, _pid: Option<u32>) -> Option<tokio::process::ChildStdin> {
    None
}

async fn watch_exit(
    mut child: Child,
    pid: Option<u32>,
    kill: tokio::sync::oneshot::Receiver<()>,
    exit: watch::Sender<Option<String>>,
    stderr_reader: tokio::task::JoinHandle<()>,
) {
    let status = tokio::select! {
        s = child.wait() => s,
        _ = kill => {
            kill_group(pid);
            let _ = child.start_kill();
            child.wait().await
        }
    };
    // Whatever the server started in its group goes with it.
    kill_group(pid);
    // The exit is told only once what the process wrote on stderr is in the evidence (a
    // server that prints why and exits at once must be quoted); bounded in case something
    // outside the group still holds the pipe.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), stderr_reader).await;
    let text = match status {
        Ok(s) => describe_status(s),
        Err(e) => format!("waiting for the process failed: {e}"),
    };
    let _ = exit.send(Some(text));
}

#[cfg(unix)]
fn describe_status(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("the process exited with status {c}"),
        (None, Some(sig)) => format!("the process was killed by signal {sig}"),
        _ => format!("the process ended ({s})"),
    }
}

#[cfg(not(unix))]
fn describe_status(s: std::process::ExitStatus) -> String {
    match s.code() {
        Some(c) => format!("the process exited with status {c}"),
        None => format!("the process ended ({s})"),
    }
}

#[cfg(unix)]
fn kill_group(pid: Option<u32>) {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
        return;
    };
    if let Some(pgid) = rustix::process::Pid::from_raw(pid) {
        // The group may already be gone; nothing to do then.
        let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
    }
}

#[cfg(not(unix))]
fn kill_group(_pid: Option<u32>) {}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The server's stdout, passed through unchanged, remembering the first line that does
/// not start like a JSON-RPC message (`{`), and ending with an error at a line longer than
/// `max_message` bytes: the SDK reads a message whole, so a server that never ends a line
/// would otherwise make Outpost hold all of it.
pub(crate) struct SniffedStdout {
    inner: tokio::process::ChildStdout,
    evidence: Arc<Mutex<Evidence>>,
    line: Vec<u8>,
    done: bool,
    max_message: usize,
    /// Bytes since the last newline.
    open_line: usize,
}

impl SniffedStdout {
    fn new(
        inner: tokio::process::ChildStdout,
        evidence: Arc<Mutex<Evidence>>,
        max_message: usize,
    ) -> Self {
        Self {
            inner,
            evidence,
            line: Vec::new(),
            done: false,
            max_message,
            open_line: 0,
        }
    }

    fn look(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                self.finish_line();
            } else if self.line.len() < QUOTE {
                self.line.push(b);
            }
        }
    }

    fn finish_line(&mut self) {
        let text = String::from_utf8_lossy(&self.line);
        let trimmed = text.trim_start_matches('\u{feff}').trim();
        if !trimmed.is_empty() && !trimmed.starts_with('{') {
            let mut e = outpost_sync::lock(&self.evidence);
            if e.garbage.is_none() {
                e.garbage = Some(truncate(trimmed, QUOTE));
            }
            // One example is enough; stop looking.
            self.done = true;
        }
        self.line.clear();
    }
}

impl AsyncRead for SniffedStdout {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(poll, Poll::Ready(Ok(()))) {
            let new = &buf.filled()[before..];
            this.open_line = match new.iter().rposition(|&b| b == b'\n') {
                Some(i) => new.len() - i - 1,
                None => this.open_line.saturating_add(new.len()),
            };
            if this.open_line > this.max_message {
                outpost_sync::lock(&this.evidence).oversized = Some(this.max_message);
                return Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("a message longer than {} bytes", this.max_message),
                )));
            }
            if !this.done {
                let new = new.to_vec();
                this.look(&new);
            }
        }
        poll
    }
}

/// Options that create a log file readable by the user only.
fn log_options() -> std::fs::OpenOptions {
    let mut o = std::fs::OpenOptions::new();
    o.create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o
}

/// Gives `path` the permission bits `mode` (a file or folder made before, or under a loose
/// umask).
#[cfg(unix)]
fn private(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn private(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

/// A per-server stderr log, at most `limit` bytes: when full it becomes `NAME.log.1`
/// (replacing the previous one) and a new file starts.
pub(crate) struct LogFile {
    path: PathBuf,
    limit: u64,
    file: Option<std::fs::File>,
    size: u64,
}

impl LogFile {
    /// Opens (creates) `NAME.log` in `dir`. The folder is the user's only (0700) and so are
    /// the logs (0600): a server's stderr may hold what its environment held.
    pub fn open(dir: &Path, server: &str, limit: u64) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .map_err(|e| McpError::io(format!("creating {}", dir.display()), e))?;
        private(dir, 0o700)
            .map_err(|e| McpError::io(format!("restricting {}", dir.display()), e))?;
        let path = dir.join(format!("{server}.log"));
        let file = log_options()
            .append(true)
            .open(&path)
            .map_err(|e| McpError::io(format!("opening {}", path.display()), e))?;
        private(&path, 0o600)
            .map_err(|e| McpError::io(format!("restricting {}", path.display()), e))?;
        // An older rotated log, from before logs were private (none: nothing to do).
        let _ = private(&path.with_extension("log.1"), 0o600);
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Self {
            path,
            limit,
            file: Some(file),
            size,
        })
    }

    pub(crate) fn write_line(&mut self, line: &str) {
        let len = line.len() as u64 + 1;
        if self.size + len > self.limit && self.size > 0 {
            self.file = None;
            let _ = std::fs::rename(&self.path, self.path.with_extension("log.1"));
            self.file = log_options()
                .truncate(true)
                .write(true)
                .open(&self.path)
                .ok();
            self.size = 0;
        }
        if let Some(f) = self.file.as_mut()
            && writeln!(f, "{line}").is_ok()
        {
            self.size += len;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Issue 30, finding 7: a line that never ends is cut at the bound (once, marked), the
    /// lines after it are whole, and nothing past the bound is held.
    #[test]
    fn stderr_lines_are_cut_at_the_bound() {
        let mut lines = StderrLines::default();
        let mut got = Vec::new();
        got.extend(lines.push(b"first\nsecond "));
        for _ in 0..1000 {
            got.extend(lines.push(&[b'x'; 1000]));
            assert!(lines.line.len() <= MAX_STDERR_LINE);
        }
        got.extend(lines.push(b"yyy\nthird\nfour"));
        got.extend(lines.finish());
        assert_eq!(
            got.len(),
            4,
            "{:?}",
            got.iter().map(String::len).collect::<Vec<_>>()
        );
        assert_eq!(got[0], "first");
        assert!(
            got[1].starts_with("second xxx") && got[1].ends_with("bytes]"),
            "{}",
            &got[1][..20]
        );
        assert!(got[1].len() < MAX_STDERR_LINE + 100);
        assert_eq!(got[2..], ["third", "four"]);
    }

    #[test]
    fn log_file_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogFile::open(dir.path(), "s", 100).unwrap();
        for i in 0..50 {
            log.write_line(&format!("line {i:04}"));
        }
        let main = std::fs::metadata(dir.path().join("s.log")).unwrap().len();
        let old = std::fs::metadata(dir.path().join("s.log.1")).unwrap().len();
        assert!(main <= 100 && old <= 100, "{main} {old}");
        let text = std::fs::read_to_string(dir.path().join("s.log")).unwrap();
        assert!(text.contains("line 0049"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(dir.path()), 0o700);
            assert_eq!(mode(&dir.path().join("s.log")), 0o600);
            assert_eq!(mode(&dir.path().join("s.log.1")), 0o600);
        }
    }
}
