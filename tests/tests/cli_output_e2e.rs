//! End to end (issue 30): what `outpost connect` prints of what others send, with
//! official-SDK participants (`tests/py/transcriber.py`) through `outpost-room`.
//!
//! `outpost connect` (the test binary `outpost_cli`) runs in the client namespace of an
//! [`outpost_tests::lkclient::Env`] in its readable text mode; the test keeps every byte
//! of its stdout. Needs root, iproute2 and the venv (see `outpost_tests::python`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::Read as _;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use outpost_tests::lkclient::Env;
use outpost_tests::proc::Proc;

const ROOM_BIN: &str = env!("CARGO_BIN_EXE_room_server");
const CLI_BIN: &str = env!("CARGO_BIN_EXE_outpost_cli");
const ROOM: &str = "cli-output";
const WAIT: Duration = Duration::from_secs(90);

/// `outpost connect` in text mode with a throw-away profile; stdout kept byte for byte.
struct Outpost {
    child: Child,
    out: Arc<Mutex<Vec<u8>>>,
    dir: tempfile::TempDir,
}

impl Outpost {
    fn start(env: &Env) -> Outpost {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("policy.toml"), "[tools]\n").unwrap();
        let mut child = env
            .outpost_connect(Path::new(CLI_BIN), ROOM)
            .unwrap()
            .arg("--no-mcp")
            .arg("--policy")
            .arg(dir.path().join("policy.toml"))
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .env("RUST_LOG", "warn")
            .env("OUTPOST_CONFIG_DIR", dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap())
            .spawn()
            .expect("spawning outpost connect");
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&out);
        let mut stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Outpost { child, out, dir }
    }

    /// Waits until stdout holds `needle`.
    fn wait_for(&self, needle: &[u8]) {
        let deadline = Instant::now() + WAIT;
        while !self
            .out
            .lock()
            .unwrap()
            .windows(needle.len())
            .any(|w| w == needle)
        {
            assert!(
                Instant::now() < deadline,
                "outpost connect never printed {:?}; stderr:\n{}",
                String::from_utf8_lossy(needle),
                std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Closes stdin (EOF = leave), waits for the exit, and returns all of stdout.
    fn finish(mut self) -> Vec<u8> {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "outpost connect did not leave");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(200));
        std::mem::take(&mut *self.out.lock().unwrap())
    }
}

impl Drop for Outpost {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tests/py/transcriber.py` as the assistant, sending with `vars`; returns once sent.
fn transcribe(env: &Env, vars: &[(&str, &str)]) -> Proc {
    let cmd = env
        .py_peer("transcriber.py", ROOM, "assistant", vars)
        .unwrap();
    let (p, lines) = Proc::spawn_ready("transcriber", cmd, WAIT).unwrap();
    p.next_event(&lines, "sent", WAIT).unwrap();
    p
}

/// Issue 30, finding 9: the assistant streams one 256 KiB transcription segment in
/// 1 KiB pieces. Each piece used to be shown (and printed) with the whole text so far:
/// 32 MiB of output for 256 KiB of text (2 GiB for the review's 2 MiB). Now what is
/// printed grows with the text, not its square.
#[test]
fn a_long_transcript_in_small_pieces_prints_what_it_says_once() {
    let env = Env::start(Path::new(ROOM_BIN)).expect("namespaces and room server");
    let outpost = Outpost::start(&env);
    let segment = 256 * 1024;
    let agent = transcribe(&env, &[("LK_KIB", "256"), ("LK_PIECE", "1024")]);
    outpost.wait_for(&[b'x'; 4096]);
    // Let everything that is coming arrive.
    std::thread::sleep(Duration::from_secs(3));
    let out = outpost.finish();
    let xs = out.iter().filter(|b| **b == b'x').count();
    eprintln!("{} bytes printed, {xs} of them the segment's", out.len());
    for l in String::from_utf8_lossy(&out).lines() {
        eprintln!(
            "LINE {} {:?}",
            l.len(),
            l.chars().take(80).collect::<String>()
        );
    }
    assert!(xs >= segment, "the segment was printed: {xs} bytes of it");
    assert!(
        out.len() <= 2 * segment,
        "{} bytes printed for a {segment}-byte segment",
        out.len()
    );
    drop(agent);
}
