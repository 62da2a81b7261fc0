//! The adversarial path corpus: every hostile path is answered (0 hangs) and none reads
//! anything outside the allowed folder or on the secrets list (0 escapes). No consent UI is
//! attached, so anything that would need the user's permission is denied.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use outpost_policy::{CompiledPolicy, Policy, PolicyContext};
use outpost_protocol::{Execution, Value};
use outpost_tools::{ReadLocalFile, RunContext, Tool, ToolEnv, ToolError};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const INSIDE: &str = "INSIDE-ALLOWED-CONTENT";
const OUTSIDE: &str = "OUTSIDE-CONTENT";
const SECRET: &str = "SECRET-KEY-MATERIAL";

fn mkfifo(p: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        p,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}

/// Lays out home: docs/ (allowed), docs-evil/, .ssh/, outside.txt, and hostile links.
fn corpus(h: &Harness) -> Vec<(String, String)> {
    let home = &h.home;
    h.write("docs/a.txt", INSIDE);
    h.write("docs/sub/b.txt", INSIDE);
    h.write("outside.txt", OUTSIDE);
    h.write("docs-evil/x.txt", OUTSIDE);
    h.write(".ssh/id_rsa", SECRET);
    h.write("docs/.env", SECRET);
    h.write("docs/tls/server.pem", SECRET);
    let docs = home.join("docs");
    std::os::unix::fs::symlink("../outside.txt", docs.join("link_out")).unwrap();
    std::os::unix::fs::symlink("../.ssh/id_rsa", docs.join("link_ssh")).unwrap();
    std::os::unix::fs::symlink(home.join(".ssh"), docs.join("dir_ssh")).unwrap();
    std::os::unix::fs::symlink("/", docs.join("root")).unwrap();
    std::os::unix::fs::symlink("loop2", docs.join("loop1")).unwrap();
    std::os::unix::fs::symlink("loop1", docs.join("loop2")).unwrap();
    std::os::unix::fs::symlink(".", docs.join("self")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", docs.join("zero")).unwrap();
    mkfifo(&docs.join("fifo"));
    std::os::unix::net::UnixListener::bind(docs.join("sock")).unwrap();
    // A hard link to the secret placed inside the allowed folder.
    std::fs::hard_link(home.join(".ssh/id_rsa"), docs.join("notes-hardlink.txt")).unwrap();
    // Unicode: the allowed folder is "café" (NFC); its NFD twin lives outside.
    h.write("café/ok.txt", INSIDE);
    h.write("cafe\u{301}/x.txt", OUTSIDE);

    let d = docs.display().to_string();
    let hm = home.display().to_string();
    let mut paths = vec![
        format!("{d}/../outside.txt"),
        format!("{d}/sub/../../outside.txt"),
        format!("{d}/{}outside.txt", "../".repeat(40)),
        format!("{d}/link_out"),
        format!("{d}/link_ssh"),
        format!("{d}/dir_ssh/id_rsa"),
        format!("{d}/root{hm}/outside.txt"),
        format!("{d}/root{hm}/.ssh/id_rsa"),
        format!("{d}/loop1"),
        format!("{d}/self/self/self/../../outside.txt"),
        format!("{hm}/docs-evil/x.txt"),
        format!("{d}-evil/x.txt"),
        "~/docs/../docs-evil/x.txt".to_owned(),
        "~/.ssh/id_rsa".to_owned(),
        "~//.ssh/./id_rsa".to_owned(),
        format!("{d}/.env"),
        format!("{d}/tls/server.pem"),
        format!("{d}/notes-hardlink.txt"),
        format!("{hm}/cafe\u{301}/x.txt"),
        format!("{d}/zero"),
        "/dev/zero".to_owned(),
        "/dev/urandom".to_owned(),
        format!("{d}/fifo"),
        format!("{d}/sock"),
        "/proc/self/environ".to_owned(),
        "/proc/self/mem".to_owned(),
        format!("/proc/self/root{hm}/outside.txt"),
        format!("/proc/self/root{hm}/.ssh/id_rsa"),
        format!("/proc/self/cwd/{hm}/outside.txt"),
        "/sys/kernel/notes".to_owned(),
        format!("{d}/{}", "a".repeat(300)),
        format!("/{}", "a/".repeat(2100)),
        format!("{d}/a\u{0}.txt"),
        format!("{d}/a.txt\u{0}/../../outside.txt"),
        "~root/.ssh/id_rsa".to_owned(),
        "docs/a.txt".to_owned(),
        "".to_owned(),
    ];
    // Allowed ones must still work (they prove the corpus is not denying everything).
    paths.push(format!("{d}/a.txt"));
    paths.push(format!("{d}/self/self/sub/b.txt"));
    paths.push(format!("{d}/sub/../a.txt"));
    paths.push(format!("/proc/self/root{d}/a.txt"));
    paths.push(format!("{hm}/café/ok.txt"));
    paths.into_iter().map(|p| (p.clone(), p)).collect()
}

fn policy(home: &Path) -> Policy {
    let mut p = docs_policy(home);
    p.folders.push(outpost_policy::FolderRule {
        path: home.join("café").to_string_lossy().into_owned(),
        access: outpost_policy::FolderAccess::Allow,
        tools: None,
    });
    p
}

fn content(r: &outpost_protocol::ToolUseResult) -> String {
    r.result
        .as_ref()
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

#[tokio::test]
async fn hostile_paths_never_escape_and_never_hang() {
    let mut h = Harness::new(policy);
    let cases = corpus(&h);
    let mut allowed = 0;
    for (i, (label, path)) in cases.iter().enumerate() {
        let id = format!("adv{i}");
        h.send_full(
            "c1",
            &id,
            "read_local_file",
            Execution::Client,
            json!({"filePath": path, "maxBytes": 4096}),
            Some(3000),
        );
        let r = tokio::time::timeout(Duration::from_secs(5), h.result(&id))
            .await
            .unwrap_or_else(|_| panic!("hang on {label:?}"));
        let text = serde_json::to_string(&r).unwrap();
        assert!(
            !text.contains(OUTSIDE),
            "escape to outside via {label:?}: {text}"
        );
        assert!(!text.contains(SECRET), "secret read via {label:?}: {text}");
        assert_ne!(
            code(&r),
            "timeout",
            "{label:?} ran into the timeout: {text}"
        );
        if r.success {
            assert_eq!(content(&r), INSIDE, "{label:?}");
            allowed += 1;
        }
    }
    assert_eq!(allowed, 5, "the five legitimate paths must be readable");
}

#[tokio::test]
async fn other_path_tools_do_not_escape_either() {
    let mut h = Harness::new(policy);
    let cases = corpus(&h);
    for (i, (label, path)) in cases.iter().enumerate() {
        for tool in ["list_directory", "file_info", "search_files", "open_path"] {
            let key = if tool == "search_files" {
                "root"
            } else {
                "path"
            };
            let id = format!("{tool}{i}");
            h.send(&id, tool, json!({key: path}));
            let r = tokio::time::timeout(Duration::from_secs(5), h.result(&id))
                .await
                .unwrap_or_else(|_| panic!("{tool} hangs on {label:?}"));
            let text = serde_json::to_string(&r).unwrap();
            assert!(
                !text.contains(SECRET),
                "{tool} read a secret via {label:?}: {text}"
            );
            if r.success && tool == "file_info" {
                let resolved = PathBuf::from(field(&r, "resolvedPath").as_str().unwrap());
                assert!(
                    resolved.starts_with(h.home.join("docs"))
                        || resolved.starts_with(h.home.join("café")),
                    "{tool} reached {resolved:?} via {label:?}"
                );
            }
        }
    }
    // search_files over the whole allowed folder never reports secret content and counts
    // what it withheld (the .pem and the hard link; the hidden .env is skipped by the walk).
    h.send(
        "s-all",
        "search_files",
        json!({"root": "~/docs", "contains": "KEY"}),
    );
    let r = h.result("s-all").await;
    assert!(r.success, "{r:?}");
    assert_eq!(field(&r, "results"), &json!([]));
    assert_eq!(field(&r, "withheld"), &json!(2), "{r:?}");
    assert!(
        h.launcher.opened.lock().unwrap().is_empty(),
        "nothing may be launched without consent"
    );
}

#[tokio::test]
async fn devices_and_fifos_are_refused_even_when_system_paths_are_allowed() {
    let mut h = Harness::new(|home| {
        let mut p = docs_policy(home);
        p.allow_system_paths = true;
        p.tools
            .insert("read_local_file".into(), outpost_policy::Rule::Allow);
        p
    });
    mkfifo(&h.path("docs-fifo"));
    for (i, path) in [
        "/dev/zero".to_owned(),
        h.path("docs-fifo").display().to_string(),
    ]
    .iter()
    .enumerate()
    {
        let id = format!("d{i}");
        h.send_full(
            "c1",
            &id,
            "read_local_file",
            Execution::Client,
            json!({"filePath": path}),
            Some(2000),
        );
        let r = tokio::time::timeout(Duration::from_secs(5), h.result(&id))
            .await
            .expect("hang");
        assert_eq!(code(&r), "permission_denied", "{path}: {r:?}");
        assert!(
            msg(&r).contains("device") || msg(&r).contains("FIFO"),
            "{r:?}"
        );
    }
}

fn run_ctx(home: &Path) -> RunContext {
    let ctx = PolicyContext::new(home, vec![]);
    RunContext {
        cancel: CancellationToken::new(),
        policy: std::sync::Arc::new(CompiledPolicy::new(Policy::default(), &ctx)),
        tool: "read_local_file".into(),
    }
}

/// The path is checked, then an attacker swaps the file for a symlink to a secret before
/// the read: the read refuses instead of following it.
#[test]
fn a_file_swapped_for_a_symlink_after_the_check_is_not_followed() {
    let (_dir, home) = home_dir();
    std::fs::create_dir_all(home.join("docs")).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), SECRET).unwrap();
    std::fs::write(home.join("docs/a.txt"), INSIDE).unwrap();
    let env = ToolEnv {
        home: home.clone(),
        launcher: std::sync::Arc::new(FakeLauncher::default()),
    };
    let prepared = ReadLocalFile
        .prepare(map(json!({"filePath": "~/docs/a.txt"})), &env)
        .unwrap();
    assert_eq!(prepared.access.paths, [home.join("docs/a.txt")]);
    std::fs::remove_file(home.join("docs/a.txt")).unwrap();
    std::os::unix::fs::symlink(home.join(".ssh/id_rsa"), home.join("docs/a.txt")).unwrap();
    let err = (prepared.job)(&run_ctx(&home)).unwrap_err();
    assert!(matches!(err, ToolError::Refused { .. }), "{err:?}");
}

/// Same, with a directory component swapped for a symlink to the secrets folder.
#[test]
fn a_folder_swapped_for_a_symlink_after_the_check_is_not_followed() {
    let (_dir, home) = home_dir();
    std::fs::create_dir_all(home.join("docs/sub")).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/a.txt"), SECRET).unwrap();
    std::fs::write(home.join("docs/sub/a.txt"), INSIDE).unwrap();
    let env = ToolEnv {
        home: home.clone(),
        launcher: std::sync::Arc::new(FakeLauncher::default()),
    };
    let prepared = ReadLocalFile
        .prepare(map(json!({"filePath": "~/docs/sub/a.txt"})), &env)
        .unwrap();
    std::fs::rename(home.join("docs/sub"), home.join("docs/old")).unwrap();
    std::os::unix::fs::symlink(home.join(".ssh"), home.join("docs/sub")).unwrap();
    let err = (prepared.job)(&run_ctx(&home)).unwrap_err();
    assert!(matches!(err, ToolError::Refused { .. }), "{err:?}");
}
