//! `outpost history` on a real history file: conversation ids are NanoIDs, whose alphabet
//! has `-`, so an id may begin with one and must still be taken as the id, not as an option
//! (session_e2e met such an id: `history show` exited 2 with a usage error).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use outpost_store::{ConversationId, NewConversation, NewMessage, Role, Store};

fn cli(args: &[&str], data_dir: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_outpost"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .expect("run outpost");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A history with one conversation whose id begins with `-`.
fn history_with(dir: &Path, id: &str, text: &str) {
    let store = Store::open_default(Some(dir)).expect("open the store");
    let cid = ConversationId::from(id);
    store
        .begin_conversation(NewConversation {
            id: cid.clone(),
            title: None,
            room: Some("room".into()),
            assistant_identity: Some("assistant".into()),
            started_at: 1_700_000_000_000,
        })
        .wait()
        .expect("begin");
    store
        .log_message(NewMessage {
            conversation_id: cid,
            id: "m1".into(),
            role: Role::User,
            text: text.into(),
            created_at: 1_700_000_000_100,
            completed_at: Some(1_700_000_000_100),
        })
        .wait()
        .expect("message");
    store.flush().wait().expect("flush");
}

#[test]
fn ids_and_queries_that_begin_with_a_dash_are_taken_as_values() {
    let dir = tempfile::tempdir().unwrap();
    let id = "-k3Vd9_xQ2pLmN8rT5wYz";
    history_with(dir.path(), id, "hello from the dash conversation");

    let (code, out, err) = cli(&["history", "show", id], dir.path());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("hello from the dash conversation"), "{out}");

    let (code, out, err) = cli(&["history", "show", id, "--json"], dir.path());
    assert_eq!(code, 0, "{err}");
    assert!(out.trim_start().starts_with('{'), "{out}");

    let (code, out, err) = cli(
        &["history", "export", id, "--format", "markdown"],
        dir.path(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("hello from the dash conversation"), "{out}");

    let (code, _, err) = cli(&["history", "search", "-nothing"], dir.path());
    assert_eq!(code, 0, "{err}");

    // An unknown id that begins with `-` is reported as unknown, not as a bad option.
    let (code, _, err) = cli(&["history", "show", "-unknownId"], dir.path());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no conversation with id '-unknownId'"),
        "{err}"
    );
}
