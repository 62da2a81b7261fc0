//! End to end (issue 30): what a room participant other than the assistant can do to
//! Outpost's RPC methods, with the official LiveKit SDK (`tests/py/rpc_abuse.py`) against
//! the real `outpost connect` (the test binary `outpost_cli`) through `outpost-room`.
//!
//! The room server and the SDK participants run in the server namespace of an
//! [`outpost_tests::lkclient::Env`], `outpost connect` in the client namespace (`ip netns exec`, which
//! execs, so the child's pid is Outpost's and its `/proc` status is Outpost's memory).
//! Needs root, iproute2 and the venv (see `outpost_tests::python`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use outpost_store::{ExportScope, Store, TimelineItem};
use outpost_tests::cli::OutpostCli;
use outpost_tests::lkclient::Env;
use outpost_tests::proc::Proc;
use serde_json::Value;

const ROOM_BIN: &str = env!("CARGO_BIN_EXE_room_server");
const CLI_BIN: &str = env!("CARGO_BIN_EXE_outpost_cli");
const ROOM: &str = "rpc-abuse";
/// Generous: several Python processes with libwebrtc and Outpost share 2 busy cores.
const WAIT: Duration = Duration::from_secs(120);

/// `tests/py/rpc_abuse.py ROLE` as `identity` in the server namespace, with its stdout
/// lines; returns once it has joined.
fn participant(
    env: &Env,
    role: &str,
    identity: &str,
    vars: &[(&str, &str)],
) -> (Proc, Receiver<String>) {
    let mut cmd = env.py_peer("rpc_abuse.py", ROOM, identity, vars).unwrap();
    cmd.arg(role);
    Proc::spawn_ready(&format!("rpc_abuse {role} {identity}"), cmd, WAIT).unwrap()
}

/// The JSON line with `"event": event` the participant prints next.
fn event(p: &Proc, lines: &Receiver<String>, event: &str) -> Value {
    p.next_event(lines, event, WAIT).unwrap()
}

/// The history's protocol errors with code `rpc_refused`: (message, detail).
fn refusals(data_dir: &Path) -> Vec<(String, Option<String>)> {
    let store = Store::open_default(Some(data_dir)).unwrap();
    let doc = store.export_document(ExportScope::All).wait().unwrap();
    let attached = doc
        .conversations
        .into_iter()
        .flat_map(|t| t.items)
        .filter_map(|i| match i {
            TimelineItem::ProtocolError(e) => Some(e),
            _ => None,
        });
    attached
        .chain(doc.unattached_protocol_errors)
        .map(|e| e.logged)
        .filter(|e| e.code == "rpc_refused")
        .map(|e| (e.message, e.detail))
        .collect()
}

/// Issue 30, finding 1 (high): a participant opens an RPC version 2 request stream to
/// `outpost.list_tools` and writes 20 MiB into it without closing it. Outpost refuses
/// it at the header: its memory does not grow with what she writes (before the fix it
/// grew by all of it, 46 → 1,075 MiB for 1 GiB), and the refusal is in the history while
/// her stream is still open.
#[test]
fn a_participants_endless_request_stream_is_refused_at_its_header() {
    let env = Env::start(Path::new(ROOM_BIN)).expect("namespaces and room server");
    let outpost = OutpostCli::start(&env, Path::new(CLI_BIN), ROOM, &["--json"]).unwrap();
    // Outpost's memory once it has joined and settled.
    let (mallory, lines) = participant(&env, "flood", "mallory", &[("LK_MIB", "20")]);
    std::thread::sleep(Duration::from_secs(2));
    let before = outpost.rss().unwrap();
    let flooded = event(&mallory, &lines, "flooded");
    let after = outpost.rss().unwrap();
    eprintln!(
        "outpost connect RSS {:.1} MiB before, {:.1} MiB after {} bytes: {flooded}",
        before as f64 / 1048576.0,
        after as f64 / 1048576.0,
        flooded["bytes"]
    );
    // Her own call after the flood is refused as not coming from the assistant; the
    // channel is ordered, so Outpost had every flooded byte by then.
    let answer = &flooded["answer"];
    assert_eq!(answer["ok"], false, "{answer}");
    assert!(
        answer["data"]
            .as_str()
            .unwrap_or("")
            .contains("permission_denied"),
        "{answer}"
    );
    let grown = after.saturating_sub(before);
    assert!(
        grown < 8 << 20,
        "Outpost's memory grew by {} MiB while a participant wrote 20 MiB into a request \
         stream; stderr:\n{}",
        grown >> 20,
        outpost.stderr()
    );
    let data = outpost.data_dir();
    let (_, _dir) = outpost.finish().unwrap();
    let refused = refusals(&data);
    assert!(
        refused
            .iter()
            .any(|(m, _)| m.contains("mallory") && m.contains("outpost.list_tools")),
        "{refused:?}"
    );
    drop(mallory);
}

/// Issue 30, finding 2: four participants each hold sixteen request streams open (64,
/// Outpost's room-wide limit before the fix, which then answered every call of the agent
/// with "more than 64 RPC requests in progress"). The assistant's calls still get through.
#[test]
fn participants_holding_request_streams_do_not_lock_the_assistant_out() {
    let env = Env::start(Path::new(ROOM_BIN)).expect("namespaces and room server");
    let outpost = OutpostCli::start(&env, Path::new(CLI_BIN), ROOM, &["--json"]).unwrap();
    let holders: Vec<(Proc, Receiver<String>)> = (1..=4)
        .map(|i| participant(&env, "hold", &format!("holder{i}"), &[("LK_STREAMS", "16")]))
        .collect();
    for (p, lines) in &holders {
        assert_eq!(event(p, lines, "held")["n"], 16);
    }
    // Let the last headers reach Outpost before the assistant calls.
    std::thread::sleep(Duration::from_secs(2));
    let (agent, lines) = participant(&env, "call", "assistant", &[("LK_CALLS", "3")]);
    let called = event(&agent, &lines, "called");
    for r in called["results"].as_array().unwrap() {
        assert_eq!(
            r["ok"],
            true,
            "the assistant was locked out: {called}\n{}",
            outpost.stderr()
        );
        let page: Value = serde_json::from_str(r["payload"].as_str().unwrap()).unwrap();
        assert!(!page["tools"].as_array().unwrap().is_empty(), "{page}");
    }
    drop(holders);
    let data = outpost.data_dir();
    let (_, _dir) = outpost.finish().unwrap();
    // The holders' calls are in the history as refused.
    let refused = refusals(&data);
    assert!(
        refused.iter().any(|(m, _)| m.contains("holder1")),
        "{refused:?}"
    );
}

/// Issue 30, finding 13: a participant makes 300 calls (request streams), all refused.
/// They used to be 300 rows of the history (20,000 in 52 s in the review); now the first
/// is recorded and the rest counted in one record (here at the session's end, before
/// the minute's window closes).
#[test]
fn refused_calls_do_not_fill_the_history() {
    let env = Env::start(Path::new(ROOM_BIN)).expect("namespaces and room server");
    let outpost = OutpostCli::start(&env, Path::new(CLI_BIN), ROOM, &["--json"]).unwrap();
    let (spammer, lines) = participant(&env, "spam", "spammer", &[("LK_CALLS", "300")]);
    assert_eq!(event(&spammer, &lines, "spammed")["n"], 300);
    // Let the last ones reach Outpost.
    std::thread::sleep(Duration::from_secs(3));
    let data = outpost.data_dir();
    let (_, _dir) = outpost.finish().unwrap();
    let refused: Vec<String> = refusals(&data)
        .into_iter()
        .map(|(m, _)| m)
        .filter(|m| m.contains("spammer"))
        .collect();
    assert_eq!(refused.len(), 2, "{} records: {refused:?}", refused.len());
    assert!(
        refused[1].contains("spammer made 299 more calls"),
        "{refused:?}"
    );
    drop(spammer);
}
