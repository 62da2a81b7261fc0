//! `outpost connect` as a child process in a test's client namespace, with a throw-away
//! profile (policy, data and config folders), no MCP servers, and every byte of its
//! stdout kept: for tests that judge what it prints or how much memory it holds. Also
//! [`run`]: one `outpost` command on a data folder, to completion.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use crate::lkclient::Env;

/// A running `outpost connect`, killed on drop.
#[derive(Debug)]
pub struct OutpostCli {
    child: Child,
    out: Arc<Mutex<Vec<u8>>>,
    dir: tempfile::TempDir,
}

impl OutpostCli {
    /// Starts `cli connect` in `room` (see [`Env::outpost_connect`]) with `args` added
    /// (`--json`, for one), an empty policy, and a data and config folder of its own.
    pub fn start(env: &Env, cli: &Path, room: &str, args: &[&str]) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("policy.toml"), "[tools]\n")?;
        let mut child = env
            .outpost_connect(cli, room)?
            .args(args)
            .arg("--no-mcp")
            .arg("--policy")
            .arg(dir.path().join("policy.toml"))
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .env("RUST_LOG", "warn")
            .env("OUTPOST_CONFIG_DIR", dir.path().join("config"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("stderr"))?)
            .spawn()
            .context("spawning outpost connect")?;
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&out);
        let mut stdout = child.stdout.take().context("stdout")?;
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                outpost_sync::lock(&sink).extend_from_slice(&buf[..n]);
            }
        });
        Ok(Self { child, out, dir })
    }

    /// Its data folder (the history).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Resident memory now, in bytes (`ip netns exec` execs, so the child is Outpost).
    pub fn rss(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .context("outpost connect is not running")?;
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .context("no VmRSS in /proc/PID/status")?;
        Ok(kib * 1024)
    }

    /// What it wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    /// A copy of what it printed so far.
    pub fn stdout(&self) -> Vec<u8> {
        outpost_sync::lock(&self.out).clone()
    }

    /// Waits up to `timeout` until stdout holds `needle`.
    pub fn wait_for(&self, needle: &[u8], timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        while !self.stdout().windows(needle.len()).any(|w| w == needle) {
            if Instant::now() > deadline {
                bail!(
                    "outpost connect never printed {:?}; stderr:\n{}",
                    String::from_utf8_lossy(needle),
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Closes stdin (end of input: it leaves) and waits for the exit, so the history is
    /// complete. Returns everything it printed, and its profile folder.
    pub fn finish(mut self) -> anyhow::Result<(Vec<u8>, tempfile::TempDir)> {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                bail!("outpost connect did not leave; stderr:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Let the reader thread take the last bytes.
        std::thread::sleep(Duration::from_millis(200));
        let out = std::mem::take(&mut *outpost_sync::lock(&self.out));
        Ok((out, std::mem::replace(&mut self.dir, tempfile::tempdir()?)))
    }
}

impl Drop for OutpostCli {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `cli ARGS… --data-dir DATA_DIR` to its end: its exit code (-1 when a signal ended
/// it), stdout and stderr.
pub fn run(cli: &str, args: &[&str], data_dir: &Path) -> anyhow::Result<(i32, String, String)> {
    let out = Command::new(cli)
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .with_context(|| format!("running {cli}"))?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}
