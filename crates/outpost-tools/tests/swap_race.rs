//! A folder swapped under running calls (issue 17, finding 2): `docs/sub` is exchanged
//! atomically (renameat2 RENAME_EXCHANGE) with `docs/lnk`, a symlink to a fake `~/.ssh`,
//! by a thread that never stops, while the dispatcher runs the path tools on
//! `docs/sub/...` hundreds of times. Whatever the timing, no answer may carry the secret
//! folder's content, names or metadata: each call either works on the real `docs/sub`, is
//! denied (it was judged where the link leads), or is refused (the swap was noticed).
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use common::*;
use outpost_protocol::{ToolUseResult, Value};
use serde_json::json;

const INSIDE: &str = "INSIDE-ALLOWED-CONTENT\n";
/// Longer than INSIDE, so a size in an answer tells which file it describes.
const SECRET: &str = "SECRET-KEY-MATERIAL: Host prod\n  IdentityFile ~/.ssh/prod-key\n";
/// A name only the secret folder holds.
const SECRET_ONLY: &str = "only-in-ssh";
/// The secret folder's modification time (2001-09-09), which the real one never has.
const SECRET_MTIME: u64 = 1_000_000_000;

/// One call and what would betray the secret folder in its answer.
fn leaks(tool: &str, r: &ToolUseResult) -> Option<String> {
    let text = serde_json::to_string(r).unwrap();
    if text.contains("SECRET-KEY") || text.contains(SECRET_ONLY) || text.contains("2001-09-09") {
        return Some(format!("{tool}: {text}"));
    }
    if !r.success {
        return None;
    }
    let secret_len = SECRET.len() as u64;
    let sizes: Vec<u64> = match tool {
        "read_local_file" | "file_info" => vec![field(r, "size").as_u64().unwrap()],
        "list_directory" => field(r, "entries")
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e.get("size").and_then(Value::as_u64))
            .collect(),
        _ => field(r, "results")
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e.get("size").and_then(Value::as_u64))
            .collect(),
    };
    if sizes.contains(&secret_len) {
        return Some(format!("{tool} reported the secret's size: {text}"));
    }
    if tool == "file_info" && field(r, "permissions") == &json!("600") {
        return Some(format!("{tool} reported the secret's permissions: {text}"));
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_swapped_during_calls_never_leaks_the_secret_folder() {
    let mut h = Harness::new(docs_policy);
    let inside = h.write("docs/sub/config", INSIDE);
    h.write("docs/sub/notes.txt", INSIDE);
    std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o644)).unwrap();
    let secret = h.write(".ssh/config", SECRET);
    h.write(&format!(".ssh/{SECRET_ONLY}"), SECRET);
    for p in [&secret, &h.path(&format!(".ssh/{SECRET_ONLY}"))] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let f = std::fs::File::options().write(true).open(p).unwrap();
        f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(SECRET_MTIME))
            .unwrap();
    }
    std::os::unix::fs::symlink(h.path(".ssh"), h.path("docs/lnk")).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let racer = {
        let docs = std::fs::File::open(h.path("docs")).unwrap();
        let (stop, swaps) = (stop.clone(), swaps.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    &docs,
                    "sub",
                    &docs,
                    "lnk",
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .expect("renameat2 RENAME_EXCHANGE");
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    let calls: [(&str, Value); 6] = [
        ("read_local_file", json!({"filePath": "~/docs/sub/config"})),
        ("file_info", json!({"path": "~/docs/sub/config"})),
        ("list_directory", json!({"path": "~/docs/sub"})),
        ("search_files", json!({"root": "~/docs/sub"})),
        ("search_files", json!({"root": "~/docs", "contains": "KEY"})),
        (
            "search_files",
            json!({"root": "~/docs/sub", "contains": "Host"}),
        ),
    ];
    let rounds = 250;
    let mut found = Vec::new();
    let mut worked = std::collections::HashMap::<&str, u32>::new();
    for round in 0..rounds {
        for (i, (tool, params)) in calls.iter().enumerate() {
            let id = format!("r{round}-{i}");
            h.send(&id, tool, params.clone());
            let r = h.result(&id).await;
            if let Some(leak) = leaks(tool, &r) {
                found.push((*tool, leak));
            }
            if r.success {
                *worked.entry(tool).or_default() += 1;
            }
        }
        // Only the newest events matter; keep memory flat over the run.
        h.events.clear();
    }
    stop.store(true, Ordering::Relaxed);
    racer.join().unwrap();

    let total = rounds * calls.len();
    let mut by_tool = std::collections::BTreeMap::<&str, u32>::new();
    for (tool, _) in &found {
        *by_tool.entry(tool).or_default() += 1;
    }
    assert!(
        found.is_empty(),
        "{} leaks in {total} calls ({} swaps), by tool {by_tool:?}, first: {}",
        found.len(),
        swaps.load(Ordering::Relaxed),
        found[0].1
    );
    assert!(
        swaps.load(Ordering::Relaxed) > 10_000,
        "the racer hardly ran"
    );
    // The swap does not stop the tools from working on the real folder at other times.
    for tool in [
        "read_local_file",
        "file_info",
        "list_directory",
        "search_files",
    ] {
        assert!(
            worked.get(tool).copied().unwrap_or(0) > 0,
            "{tool} never worked: {worked:?}"
        );
    }
}
