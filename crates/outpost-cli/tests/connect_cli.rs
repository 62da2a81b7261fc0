//! `outpost connect` failing before it can talk to anyone, as a user sees it: the exit
//! status and one line on stderr that names each cause once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};

/// Runs `outpost connect --url URL` with a throw-away data directory; returns the exit
/// status and stderr.
fn connect(url: &str) -> (Option<i32>, String) {
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_outpost"))
        .args([
            "connect",
            "--url",
            url,
            "--token",
            "any-token",
            "--data-dir",
        ])
        .arg(data.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_refused_connection_exits_1_and_names_each_cause_once() {
    // A port nobody listens on: bind one, then let it go.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("ws://127.0.0.1:{port}");
    let (code, err) = connect(&url);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.starts_with("error: connecting: could not join the room: "),
        "{err}"
    );
    assert_eq!(
        err.matches(&format!("cannot reach LiveKit server at {url}"))
            .count(),
        1,
        "{err}"
    );
    assert_eq!(err.matches("Connection refused").count(), 1, "{err}");
}

#[test]
fn a_malformed_url_exits_2_and_names_each_cause_once() {
    let (code, err) = connect("ws://[::1");
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("error: connecting: "), "{err}");
    assert_eq!(err.matches("bad server URL").count(), 1, "{err}");
    assert_eq!(err.matches("ws://[::1").count(), 1, "{err}");
}

#[test]
fn help_says_what_each_exit_status_means() {
    let out = Command::new(env!("CARGO_BIN_EXE_outpost"))
        .args(["connect", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for needle in [
        "Exit status:",
        "0  left the room as asked",
        "1  could not join",
        "2  invalid input",
    ] {
        assert!(text.contains(needle), "{needle:?} missing in:\n{text}");
    }
}
