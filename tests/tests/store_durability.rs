//! Durability of the conversation store under `kill -9`.
//!
//! A child process (`src/bin/store_writer.rs`) logs messages and tool calls into a real
//! database file as fast as it can and prints the id of every write whose acknowledgement
//! arrived. The test kills it with SIGKILL mid-stream, several times over the same file,
//! then checks that SQLite's and FTS5's integrity checks pass and that every acknowledged
//! write is in the file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use outpost_store::{ConversationId, Location, Store, StoreConfig, TimelineItem, ToolCallState};

const WRITER: &str = env!("CARGO_BIN_EXE_store_writer");

/// Kills and reaps the child even when the test fails half-way.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the writer until it has acknowledged at least `min_acks` writes, SIGKILLs it, and
/// returns every acknowledged label ("message m12", "tool t8").
fn run_and_kill(dir: &Path, durability: &str, conversation: &str, min_acks: usize) -> Vec<String> {
    let child = Command::new(WRITER)
        .args([durability, conversation])
        .env("OUTPOST_DATA_DIR", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn store_writer");
    let mut child = KillOnDrop(child);
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    let mut acked = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked.len() < min_acks {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                if let Some(label) = line.strip_prefix("ACK ") {
                    acked.push(label.to_owned());
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if let Some(status) = child.0.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = child.0.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!(
                "store_writer exited early ({status}) after {} acks: {err}",
                acked.len()
            );
        }
        assert!(
            Instant::now() < deadline,
            "store_writer too slow: {} acks",
            acked.len()
        );
    }
    // SIGKILL while it keeps writing.
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    // Lines already in the pipe were printed after their acks: they count too.
    reader.join().unwrap();
    while let Ok(line) = rx.try_recv() {
        if let Some(label) = line.strip_prefix("ACK ") {
            acked.push(label.to_owned());
        }
    }
    acked
}

fn check(dir: &Path, conversation: &str, acked: &[String]) {
    let store = Store::open(StoreConfig::new(Location::Directory(dir.to_path_buf()))).unwrap();
    let problems = store.integrity_check().wait().unwrap();
    assert!(problems.is_empty(), "integrity check failed: {problems:?}");
    let timeline = store
        .timeline(ConversationId::from(conversation))
        .wait()
        .unwrap();
    let mut present = BTreeSet::new();
    for item in &timeline.items {
        match item {
            TimelineItem::Message(m) => {
                present.insert(format!("message {}", m.id));
            }
            TimelineItem::ToolCall(t) if t.state == ToolCallState::Completed => {
                present.insert(format!("tool {}", t.id));
            }
            _ => {}
        }
    }
    let missing: Vec<&String> = acked.iter().filter(|a| !present.contains(*a)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged writes missing after kill -9, e.g. {:?}",
        missing.len(),
        acked.len(),
        &missing[..missing.len().min(5)]
    );
    // The file holds at least what was acknowledged (usually a little more).
    assert!(present.len() >= acked.len());
}

#[test]
fn kill_9_never_loses_an_acknowledged_write_nor_corrupts_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let rounds = [
        ("full", 300),
        ("normal", 1500),
        ("full", 2500),
        ("normal", 800),
    ];
    for (i, (durability, min_acks)) in rounds.iter().enumerate() {
        let conversation = format!("round-{i}");
        let acked = run_and_kill(tmp.path(), durability, &conversation, *min_acks);
        assert!(acked.len() >= *min_acks);
        check(tmp.path(), &conversation, &acked);
    }
    // Earlier rounds' data survived the later kills and reopenings too.
    let store = Store::open(StoreConfig::new(Location::Directory(
        tmp.path().to_path_buf(),
    )))
    .unwrap();
    let page = store.list_conversations(0, None).wait().unwrap();
    assert_eq!(page.items.len(), rounds.len());
}

#[test]
fn writer_refuses_to_run_without_an_explicit_data_dir() {
    let out = Command::new(WRITER)
        .args(["full", "x"])
        .env_remove("OUTPOST_DATA_DIR")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("OUTPOST_DATA_DIR"), "{err}");
}
