//! History export names: the conversation id is chosen by the assistant, so the export's
//! file name must stay one safe, readable name inside the folder the shell chose, whatever
//! the id holds (issue 17, finding 8).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Component, Path};
use std::sync::Arc;

use outpost_desktop::paths::Paths;
use outpost_desktop::secrets::MemorySecrets;
use outpost_desktop::{Desktop, Notifier};
use outpost_store::{ConversationId, NewConversation, now_ms};

#[derive(Debug, Default)]
struct Quiet;

impl Notifier for Quiet {
    fn notify(&self, _title: &str, _body: &str) {}
}

/// Every file under `root`, relative to it.
fn files_under(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_file_names_are_one_safe_component_whatever_the_id() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = Paths {
        config_dir: tmp.path().join("config"),
        data_dir: tmp.path().join("data"),
    };
    let desktop =
        Desktop::open(paths, Arc::new(MemorySecrets::default()), Arc::new(Quiet)).unwrap();
    // The export folder sits two levels down so that "../../x" would land in `tmp`.
    let out = tmp.path().join("downloads/exports");
    let long = "x".repeat(400);
    let long_slashes = "ab/".repeat(150);
    let cases: &[(&str, &str)] = &[
        ("../../x", "outpost-x-"),
        ("a/b", "outpost-a-b-"),
        ("..", "outpost-conversation-"),
        ("/", "outpost-conversation-"),
        ("../..", "outpost-conversation-"),
        ("\\..\\..\\evil", "outpost-evil-"),
        ("C:\\Windows\\x", "outpost-C-Windows-x-"),
        ("", "outpost-conversation-"),
        ("ünïcödé", "outpost-n-c-d-"),
        ("new\nline\u{202e}txt.exe", "outpost-new-line-txt.exe-"),
        ("conv 1: draft", "outpost-conv-1-draft-"),
        ("V1StGXR8_Z5jdHi6B-myT", "outpost-V1StGXR8_Z5jdHi6B-myT-"),
        (&long, "outpost-xxxxxxxx"),
        (&long_slashes, "outpost-ab-ab-"),
    ];
    for (id, prefix) in cases {
        desktop
            .core()
            .store()
            .begin_conversation(NewConversation {
                id: ConversationId((*id).to_owned()),
                title: Some("t".into()),
                room: None,
                assistant_identity: None,
                started_at: now_ms(),
            })
            .await
            .unwrap();
        let r = desktop
            .history_export(
                Some((*id).to_owned()),
                outpost_desktop::contract::ExportFormat::Json,
                &out,
            )
            .await
            .unwrap_or_else(|e| panic!("export of {id:?} failed: {e}"));
        let path = Path::new(&r.path);
        assert_eq!(path.parent(), Some(out.as_path()), "{id:?}: {}", r.path);
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with(prefix), "{id:?}: {name}");
        assert!(name.ends_with(".json"), "{id:?}: {name}");
        assert!(name.len() <= 120, "{id:?}: {} bytes", name.len());
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
            "{id:?}: {name}"
        );
        assert!(!name.contains(".."), "{id:?}: {name}");
        let components: Vec<_> = Path::new(name).components().collect();
        assert!(
            matches!(components.as_slice(), [Component::Normal(_)]),
            "{id:?}: {name}"
        );
        let text = std::fs::read_to_string(path).unwrap();
        assert!(
            text.contains("\"t\""),
            "{id:?}: the export holds the conversation"
        );
        std::fs::remove_file(path).unwrap();
    }
    // Nothing was written anywhere else.
    let stray: Vec<String> = files_under(tmp.path())
        .into_iter()
        .filter(|f| !f.starts_with("data") && !f.starts_with("config"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}
