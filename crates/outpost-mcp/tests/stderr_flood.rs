//! Issue 30, finding 7: a server that writes 60 MiB to stderr without a newline (the
//! review's 1.5 GiB, smaller) costs Outpost a bounded line, not the whole of it, and its
//! log stays within the 1 MiB cap. Alone in its binary, so the peak memory it reads is
//! this test's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use outpost_mcp::ServerConfig;

/// The process's peak resident memory (`VmHWM`), in KiB.
fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn a_stderr_line_without_end_is_cut_and_the_log_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path(), Vec::new(), None);
    let before = peak_kib();
    let server = ServerConfig::stdio(
        python().display().to_string(),
        vec![
            repo()
                .join("tests/mcp/hostile_server.py")
                .display()
                .to_string(),
            "--stderr-flood".into(),
            "60".into(),
        ],
    );
    host.start("noisy", server).unwrap();
    host.wait_running("noisy", START).await.unwrap();
    // The line after the flood reaches the log: the flood was read through.
    let log = dir.path().join("noisy.log");
    let deadline = std::time::Instant::now() + CALL;
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("STDERR-END")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "STDERR-END never logged"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let grew = peak_kib().saturating_sub(before);
    for f in [log.clone(), log.with_extension("log.1")] {
        let len = std::fs::metadata(&f).map(|m| m.len()).unwrap_or(0);
        assert!(len <= 1024 * 1024, "{} holds {len} bytes", f.display());
    }
    assert!(
        grew < 24 * 1024,
        "the peak memory grew by {grew} KiB for 60 MiB of stderr"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("[cut: the line is longer than"),
        "no cut marked"
    );
    host.shutdown();
}
