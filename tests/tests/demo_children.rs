//! The desktop app's local demo runs `outpost-room` and `outpost-agent` as child processes
//! (`outpost_desktop::demo`). They must never outlive the app: not when the demo is
//! stopped, not when the app exits without stopping it, not when the app is killed.
//! `demo_parent` (src/bin) plays the app, with the real programs built from the same
//! crates (`room_server`, `agent_server`); the assistant joins the room over loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

const PARENT: &str = env!("CARGO_BIN_EXE_demo_parent");
const ROOM: &str = env!("CARGO_BIN_EXE_room_server");
const AGENT: &str = env!("CARGO_BIN_EXE_agent_server");

struct Parent {
    child: Child,
    stdin: Option<ChildStdin>,
    pids: Vec<u32>,
    _logs: tempfile::TempDir,
}

impl Drop for Parent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for pid in &self.pids {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// Starts `demo_parent` and waits for its `ready URL PID PID` line.
fn start() -> Parent {
    let logs = tempfile::tempdir().unwrap();
    let mut child = Command::new(PARENT)
        .args([ROOM, AGENT])
        .arg(logs.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let mut words = line.split_whitespace();
    assert_eq!(
        words.next(),
        Some("ready"),
        "demo_parent said {line:?}; room log: {}; agent log: {}",
        std::fs::read_to_string(logs.path().join("demo-room.log")).unwrap_or_default(),
        std::fs::read_to_string(logs.path().join("demo-agent.log")).unwrap_or_default()
    );
    assert!(
        words.next().unwrap().starts_with("ws://127.0.0.1:"),
        "{line}"
    );
    let pids: Vec<u32> = words.map(|w| w.parse().unwrap()).collect();
    assert_eq!(pids.len(), 2, "{line}");
    for pid in &pids {
        assert!(alive(*pid), "child {pid} is not running");
    }
    // The assistant really joined: its log says so.
    let agent_log = std::fs::read_to_string(logs.path().join("demo-agent.log")).unwrap();
    assert!(!agent_log.contains("ERROR"), "{agent_log}");
    Parent {
        child,
        stdin,
        pids,
        _logs: logs,
    }
}

/// Whether `pid` runs (a zombie does not count: whoever reaps it is not our concern).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        let state = s.rsplit(')').next().unwrap_or("").split_whitespace().next();
        state != Some("Z")
    })
}

fn wait_gone(pids: &[u32], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while pids.iter().any(|p| alive(*p)) {
        assert!(
            Instant::now() < deadline,
            "{what}: the demo's programs {pids:?} still run after 15 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn stopping_the_demo_ends_both_programs() {
    let mut p = start();
    let mut stdin = p.stdin.take().unwrap();
    stdin.write_all(b"stop\n").unwrap();
    drop(stdin);
    let status = p.child.wait().unwrap();
    assert!(status.success(), "{status}");
    wait_gone(&p.pids, "after Demo::stop");
}

#[test]
fn the_programs_leave_when_the_app_exits_without_stopping_them() {
    let mut p = start();
    drop(p.stdin.take());
    let status = p.child.wait().unwrap();
    assert!(status.success(), "{status}");
    wait_gone(&p.pids, "after the parent exited");
}

#[test]
fn the_programs_leave_when_the_app_is_killed() {
    let mut p = start();
    p.child.kill().unwrap(); // SIGKILL: no destructor, no handler runs in the parent.
    p.child.wait().unwrap();
    wait_gone(&p.pids, "after the parent was killed");
}
