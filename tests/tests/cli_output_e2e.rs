//! End to end (issue 30): what `outpost connect` prints of what others send, with
//! official-SDK participants (`tests/py/transcriber.py`) through `outpost-room`.
//!
//! `outpost connect` (the test binary `outpost_cli`) runs in the client namespace of an
//! [`outpost_tests::lkclient::Env`] in its readable text mode; the test keeps every byte
//! of its stdout. Needs root, iproute2 and the venv (see `outpost_tests::python`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::time::Duration;

use outpost_tests::cli::OutpostCli;
use outpost_tests::lkclient::Env;
use outpost_tests::proc::Proc;

const ROOM_BIN: &str = env!("CARGO_BIN_EXE_room_server");
const CLI_BIN: &str = env!("CARGO_BIN_EXE_outpost_cli");
const ROOM: &str = "cli-output";
const WAIT: Duration = Duration::from_secs(90);

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
    let outpost = OutpostCli::start(&env, Path::new(CLI_BIN), ROOM, &[]).unwrap();
    let segment = 256 * 1024;
    let agent = transcribe(&env, &[("LK_KIB", "256"), ("LK_PIECE", "1024")]);
    outpost.wait_for(&[b'x'; 4096], WAIT).unwrap();
    // Let everything that is coming arrive.
    std::thread::sleep(Duration::from_secs(3));
    let (out, _dir) = outpost.finish().unwrap();
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

/// Issue 30, finding 11: the assistant's words carry terminal escapes (an OSC 52
/// clipboard write, a screen clear, an OSC 8 link, an 8-bit CSI) and lines that pass for
/// Outpost's own (after a carriage return, after a line feed). `outpost connect` prints
/// them as visible characters, and every line of the message after the first indented.
#[test]
fn the_assistants_escape_sequences_are_shown_not_obeyed() {
    let env = Env::start(Path::new(ROOM_BIN)).expect("namespaces and room server");
    let outpost = OutpostCli::start(&env, Path::new(CLI_BIN), ROOM, &[]).unwrap();
    let hostile = "Here you go.\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}[2J\u{1b}[H\r* assistant is idle\n\
                   * ended: left the room\n\u{1b}]8;;https://evil.example\u{1b}\\click\u{1b}]8;;\u{1b}\\ \
                   \u{9b}31mred END";
    let agent = transcribe(&env, &[("LK_TEXT", hostile), ("LK_PIECE", "7")]);
    outpost.wait_for(b"red END", WAIT).unwrap();
    let (out, _dir) = outpost.finish().unwrap();
    let shown = String::from_utf8_lossy(&out);
    eprintln!("{shown}");
    for bad in ["\u{1b}", "\u{7}", "\r", "\u{9b}"] {
        assert!(!shown.contains(bad), "{bad:?} reached stdout");
    }
    assert!(shown.contains("assistant: Here you go.␛]52;c;ZXZpbA==␇␛[2J␛[H␍* assistant is idle\n  * ended: left the room\n  ␛]8;;"), "{shown}");
    assert_eq!(
        shown.lines().filter(|l| l.starts_with("* ended")).count(),
        1,
        "only Outpost's own end line starts a line: {shown}"
    );
    drop(agent);
}
