//! The `outpost-room` program itself (the binary cargo builds for this test): the key pair
//! from the environment, and `serve --exit-on-stdin-close`, which the desktop app's local
//! demo relies on to never leave the server behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_outpost-room");

#[test]
fn token_reads_the_keys_from_the_environment() {
    let mint = |keys: Option<&str>| {
        let mut cmd = Command::new(BIN);
        cmd.args(["token", "--room", "r", "--identity", "me"]);
        if let Some(k) = keys {
            cmd.env("OUTPOST_ROOM_KEYS", k);
        }
        cmd.output().unwrap()
    };
    let dev = mint(None);
    let own = mint(Some("mykey:a-long-secret"));
    assert!(dev.status.success() && own.status.success());
    // Different keys, different signatures (and the key name is in the claims).
    assert_ne!(dev.stdout, own.stdout);
    let bad = mint(Some("no-colon"));
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("KEY:SECRET") || err.contains("no-colon"),
        "{err}"
    );
}

#[test]
fn serve_stops_when_its_standard_input_closes() {
    let mut child = Command::new(BIN)
        .args(["serve", "--bind", "127.0.0.1:0", "--exit-on-stdin-close"])
        .env("OUTPOST_ROOM_KEYS", "k:some-secret")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(
        line.starts_with("outpost-room listening on ws://127.0.0.1:"),
        "{line}"
    );
    // Running while the pipe is open.
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none());
    drop(child.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "still serving 15 s after stdin closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}
