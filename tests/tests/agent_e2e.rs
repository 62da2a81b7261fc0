//! End to end: `outpost-room`, `outpost-agent` (scripted brain) and an app stand-in on the
//! official LiveKit Python SDK (`tests/py/agent_client.py`, msgpack) in one network
//! namespace. The Python client drives a whole conversation: hello/welcome, a client
//! tool answered with a file's content, `either` declined and run by the agent, a server
//! tool, a denial, a consent-paused timeout ending in ToolUseCancel, a message typed
//! ahead (answered after the first, nothing cancelled), an interrupt by a new hello,
//! messages above 15 000 bytes as byte streams both ways, and a conversation the agent
//! never held continued under its id with the hello's `history` as memory, and an
//! attachment (type 13) the agent's model is told about.
//! Needs root, iproute2 and the venv (see `outpost_tests::python`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use outpost_tests::netns::NetNs;
use outpost_tests::proc::Proc;
use outpost_tests::room::{RoomProcess, run_script};

const ROOM_BIN: &str = env!("CARGO_BIN_EXE_room_server");
const AGENT_BIN: &str = env!("CARGO_BIN_EXE_agent_server");

#[test]
fn scripted_agent_serves_the_whole_protocol_to_an_sdk_client() {
    let ns = NetNs::create().expect("network namespace");
    let server = RoomProcess::start(&ns, Path::new(ROOM_BIN), &[]).expect("room server");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("notes.txt");
    // One long word: the delta and the final message exceed 15 000 bytes.
    let content = format!("hello from the e2e file\n{}\n", "x".repeat(20_000));
    std::fs::write(&file, &content).expect("write the file");

    let mut cmd = ns.command(AGENT_BIN);
    cmd.args([
        "--url",
        &server.url,
        "--room",
        "e2e",
        "--scripted-delay-ms",
        "1",
        "--result-grace-ms",
        "1500",
    ]);
    let mut agent = Proc::spawn("outpost-agent", cmd).expect("agent");
    let line = agent
        .wait_for_line("outpost-agent: joined", Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e:#}\n--- room ---\n{}", server.proc.stderr()));
    assert!(line.contains("not an AI"), "{line}");

    let out = run_script(
        &ns,
        &server,
        "agent_client.py",
        &[
            ("LK_ROOM", "e2e"),
            ("AGENT", "outpost-agent"),
            ("E2E_FILE", file.to_str().expect("utf-8 path")),
            ("GRACE_S", "1.5"),
        ],
        Duration::from_secs(90),
    )
    .unwrap_or_else(|e| panic!("{e:#}\n--- agent log ---\n{}", agent.stderr()));
    let r = &out[0];
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["assistant_name"], "Outpost demo (scripted, not an AI)");
    assert!(r["read"]["text_len"].as_u64().unwrap() > 20_000, "{r}");
    assert!(r["read"]["streams_in"].as_u64().unwrap() >= 1, "{r}");
    assert!(r["either"].as_str().unwrap().contains("= 42"), "{r}");
    assert!(r["server"].as_str().unwrap().contains("= 5"), "{r}");
    assert!(
        r["timeout"]["text"].as_str().unwrap().contains("timed out"),
        "{r}"
    );
    assert_eq!(r["timeout"]["reason"], "no result within 1 ms", "{r}");
    assert_eq!(r["queue"], serde_json::json!(["u6", "u7"]), "{r}");
    assert_eq!(r["interrupt"]["reason"], "the app said hello again", "{r}");
    assert!(
        r["continued"]
            .as_str()
            .unwrap()
            .contains("“remember the otter”"),
        "{r}"
    );
    assert!(
        r["attachment"]
            .as_str()
            .unwrap()
            .contains("You gave me: otter.txt, text/plain"),
        "{r}"
    );
    drop(agent);
    drop(server);
}
