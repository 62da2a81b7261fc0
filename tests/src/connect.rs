//! The real `outpost connect --json` as a child process (in a namespace), its stdout events
//! collected as they come: what the end-to-end tests of the headless client share.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::lkclient::{self, Env};
use crate::proc::Proc;
use crate::python;

/// A running `outpost connect --json`; killed on drop.
#[derive(Debug)]
pub struct Connect {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    stderr_path: PathBuf,
}

impl Connect {
    /// Runs `cli connect --json ARGS…` inside network namespace `ns` (`None`: here), with
    /// stdin piped and stderr written to `stderr_path`.
    pub fn spawn(
        ns: Option<&str>,
        cli: &str,
        args: &[String],
        env: &[(&str, &str)],
        stderr_path: PathBuf,
    ) -> anyhow::Result<Connect> {
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, cli]);
                c
            }
            None => Command::new(cli),
        };
        cmd.args(["connect", "--json"]).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Self::from_command(cmd, stderr_path)
    }

    /// Runs `cmd`, an `outpost connect --json …` its caller put together, with stdin and
    /// stdout piped and stderr written to `stderr_path`. `RUST_LOG` is this process's (or
    /// `warn`) unless `cmd` sets it.
    pub fn from_command(mut cmd: Command, stderr_path: PathBuf) -> anyhow::Result<Connect> {
        if !cmd.get_envs().any(|(k, _)| k == "RUST_LOG") {
            cmd.env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            );
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_path)?);
        let mut child = cmd.spawn()?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                outpost_sync::lock(&sink).push(line);
            }
        });
        Ok(Connect {
            child,
            lines,
            stderr_path,
        })
    }

    /// Types a line (a message to the assistant).
    pub fn say(&mut self, text: &str) -> anyhow::Result<()> {
        let stdin = self
            .child
            .stdin
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("stdin already closed"))?;
        writeln!(stdin, "{text}")?;
        stdin.flush()?;
        Ok(())
    }

    /// Every event printed so far. With `--json` stdout carries nothing else: a line that
    /// is not JSON is an error.
    pub fn events(&self) -> anyhow::Result<Vec<Value>> {
        self.raw_lines()
            .iter()
            .map(|l| serde_json::from_str(l).map_err(|e| anyhow::anyhow!("not JSON ({e}): {l}")))
            .collect()
    }

    /// Every stdout line so far.
    pub fn raw_lines(&self) -> Vec<String> {
        outpost_sync::lock(&self.lines).clone()
    }

    /// Waits until an event satisfies `pred`; fails with everything seen after `timeout`.
    pub fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = self.events()?.into_iter().find(&pred) {
                return Ok(v);
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "outpost connect never showed {what}; events:\n{}\nstderr:\n{}",
                    self.raw_lines().join("\n"),
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its exit status, if it has exited.
    pub fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        self.child.try_wait()
    }

    /// What it wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Closes stdin (end of input: it leaves) and waits up to `timeout` for its exit; the
    /// exit status and every event.
    pub fn finish(
        mut self,
        timeout: Duration,
    ) -> anyhow::Result<(std::process::ExitStatus, Vec<Value>)> {
        let status = self.leave(timeout)?;
        Ok((status, self.events()?))
    }

    /// [`Connect::finish`], and an error unless it exited with success.
    pub fn finish_ok(mut self, timeout: Duration) -> anyhow::Result<Vec<Value>> {
        let status = self.leave(timeout)?;
        if !status.success() {
            anyhow::bail!(
                "outpost connect exited with {status}; stderr:\n{}\nevents:\n{}",
                self.stderr(),
                self.raw_lines().join("\n")
            );
        }
        self.events()
    }

    /// Closes stdin and waits up to `timeout` for the exit, then a moment for the reader
    /// thread to take the last lines.
    fn leave(&mut self, timeout: Duration) -> anyhow::Result<std::process::ExitStatus> {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(st) = self.child.try_wait()? {
                break st;
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "outpost connect did not leave within {timeout:?} of the end of input; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        std::thread::sleep(Duration::from_millis(200));
        Ok(status)
    }
}

impl Drop for Connect {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The example assistant (`examples/python-agent/agent.py`, official LiveKit SDK) joining
/// `room` as `assistant` in `env`'s server namespace and running `steps` (written to
/// `dir/scenario.json`); it gives up after `timeout_secs`.
pub fn example_agent(
    env: &Env,
    room: &str,
    dir: &Path,
    steps: &Value,
    timeout_secs: u32,
) -> anyhow::Result<Proc> {
    let py = python::python()?;
    let scenario = dir.join("scenario.json");
    std::fs::write(&scenario, serde_json::to_vec_pretty(steps)?)?;
    let script = python::workspace_root().join("examples/python-agent/agent.py");
    let mut cmd = env.pair.server_command(&py);
    cmd.arg(script)
        .args([
            "--url",
            &env.server.url,
            "--room",
            room,
            "--identity",
            "assistant",
        ])
        .arg("--scenario")
        .arg(&scenario)
        .args(["--timeout", &timeout_secs.to_string()])
        .env("LK_API_KEY", lkclient::DEV_KEY)
        .env("LK_API_SECRET", lkclient::DEV_SECRET)
        .env("PYTHONWARNINGS", "ignore");
    Proc::spawn("python agent", cmd)
}
