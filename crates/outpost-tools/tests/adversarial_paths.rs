//! The adversarial path corpus: every hostile path is answered (0 hangs) and none reads
//! anything outside the allowed folder or on the secrets list (0 escapes). No consent UI is
//! attached there, so anything that would need the user's permission is denied.
//!
//! Then existence probes: for every path-taking tool, a path that does not exist is answered
//! exactly as one that exists until the policy (or the user) allowed the call, so the
//! assistant cannot learn whether a protected or out-of-scope path exists.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use outpost_policy::{CompiledPolicy, Decision, Policy, PolicyContext};
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
    // A hard link to a secret inside the allowed folder is not even described (size,
    // times) without asking: with no one to ask, that is a refusal.
    h.send(
        "info-hl",
        "file_info",
        json!({"path": "~/docs/notes-hardlink.txt"}),
    );
    let r = h.result("info-hl").await;
    assert!(
        !r.success,
        "file_info described a hard-linked secret: {r:?}"
    );
    assert_eq!(code(&r), "permission_denied", "{r:?}");
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
        progress: Default::default(),
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

/// Issue 17, finding 2, one step at a time: every path tool is prepared (the policy would
/// judge `docs/sub/...`), then `docs/sub` is exchanged with a symlink to the secrets folder
/// before the job runs. No job may report the secret folder: each refuses, and nothing is
/// launched.
#[test]
fn a_folder_exchanged_for_a_symlink_after_the_check_misleads_no_tool() {
    let (_dir, home) = home_dir();
    std::fs::create_dir_all(home.join("docs/sub")).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/a.txt"), SECRET).unwrap();
    std::fs::write(home.join("docs/sub/a.txt"), INSIDE).unwrap();
    std::os::unix::fs::symlink(home.join(".ssh"), home.join("docs/lnk")).unwrap();
    let launcher = std::sync::Arc::new(FakeLauncher::default());
    let env = ToolEnv {
        home: home.clone(),
        launcher: launcher.clone(),
    };
    let registry = outpost_tools::builtin_registry().unwrap();
    let cases: [(&str, Value); 6] = [
        ("read_local_file", json!({"filePath": "~/docs/sub/a.txt"})),
        ("file_info", json!({"path": "~/docs/sub/a.txt"})),
        ("open_path", json!({"path": "~/docs/sub/a.txt"})),
        ("list_directory", json!({"path": "~/docs/sub"})),
        ("search_files", json!({"root": "~/docs/sub"})),
        (
            "search_files",
            json!({"root": "~/docs/sub", "contains": "KEY"}),
        ),
    ];
    for (tool, params) in cases {
        let entry = registry.get(tool).unwrap();
        let prepared = entry.tool.prepare(map(params.clone()), &env).unwrap();
        assert!(
            prepared.access.paths[0].starts_with(home.join("docs/sub")),
            "{tool}: {:?}",
            prepared.access
        );
        let docs = std::fs::File::open(home.join("docs")).unwrap();
        let exchange = || {
            rustix::fs::renameat_with(
                &docs,
                "sub",
                &docs,
                "lnk",
                rustix::fs::RenameFlags::EXCHANGE,
            )
            .unwrap();
        };
        exchange();
        let got = (prepared.job)(&run_ctx(&home));
        exchange();
        let text = format!("{got:?}");
        assert!(!text.contains(SECRET), "{tool} {params}: {text}");
        assert!(
            matches!(got, Err(ToolError::Refused { .. })),
            "{tool} {params}: {text}"
        );
    }
    assert!(launcher.opened.lock().unwrap().is_empty(), "launched");
}

/// Issue 17, finding 3: a file in the allowed folder hard-linked to a protected file is
/// never written, whatever the user allowed, and the protected file is not touched (not
/// even truncated by "overwrite").
#[tokio::test]
async fn write_file_refuses_a_file_with_other_names() {
    let mut h = Harness::new(|home| {
        let mut p = docs_policy(home);
        p.tools
            .insert("write_file".into(), outpost_policy::Rule::Ask);
        p
    });
    let keys = h.write(
        ".ssh/authorized_keys",
        "ssh-ed25519 AAAA-the-user-s-own-key\n",
    );
    std::fs::create_dir_all(h.path("docs")).unwrap();
    std::fs::hard_link(&keys, h.path("docs/notes.txt")).unwrap();
    let mut ui = h.dispatcher.broker().attach();
    for (i, mode) in ["append", "overwrite"].into_iter().enumerate() {
        let id = format!("hl{i}");
        h.send(
            &id,
            "write_file",
            json!({"filePath": "~/docs/notes.txt", "content": "ssh-ed25519 EVIL\n", "mode": mode}),
        );
        let q = asked(&mut ui).await;
        ui.answer(&q.consent_id, Decision::AllowOnce).unwrap();
        let r = h.result(&id).await;
        assert_eq!(code(&r), "permission_denied", "{mode}: {r:?}");
        assert!(msg(&r).contains("hard links"), "{mode}: {r:?}");
        assert_eq!(
            std::fs::read_to_string(&keys).unwrap(),
            "ssh-ed25519 AAAA-the-user-s-own-key\n",
            "{mode} changed the linked file"
        );
    }
    // A file with one name is still written.
    h.write("docs/plain.txt", "a\n");
    h.send(
        "plain",
        "write_file",
        json!({"filePath": "~/docs/plain.txt", "content": "b\n", "mode": "overwrite"}),
    );
    let q = asked(&mut ui).await;
    ui.answer(&q.consent_id, Decision::AllowOnce).unwrap();
    assert!(h.result("plain").await.success);
    assert_eq!(
        std::fs::read_to_string(h.path("docs/plain.txt")).unwrap(),
        "b\n"
    );
}

// ---------------------------------------------------------------------------------------
// Existence probes

/// Every tool that takes a path, with write_file enabled by the probe policies.
const PATH_TOOLS: &[&str] = &[
    "read_local_file",
    "list_directory",
    "file_info",
    "search_files",
    "open_path",
    "write_file",
];

fn path_params(tool: &str, path: &str) -> Value {
    match tool {
        "read_local_file" => json!({"filePath": path}),
        "write_file" => json!({"filePath": path, "content": "x", "mode": "overwrite"}),
        "search_files" => json!({"root": path}),
        _ => json!({"path": path}),
    }
}

/// Whether `tool` works on a folder (else on a file).
fn takes_folder(tool: &str) -> bool {
    matches!(tool, "list_directory" | "search_files")
}

/// The part of a result the assistant sees, without the request id.
fn answer(r: &outpost_protocol::ToolUseResult) -> (bool, String, String) {
    (r.success, code(r).to_owned(), msg(r).to_owned())
}

/// Sends `tool` on `path` and returns the answer.
async fn probe(h: &mut Harness, id: &str, tool: &str, path: &str) -> (bool, String, String) {
    h.send(id, tool, path_params(tool, path));
    let r = h.result(id).await;
    answer(&r)
}

/// docs/ allowed, write_file enabled (it asks every time), ~/private denied.
fn probe_policy_with_private(home: &Path) -> Policy {
    let mut p = policy(home);
    p.tools
        .insert("write_file".into(), outpost_policy::Rule::Ask);
    p.folders.push(outpost_policy::FolderRule {
        path: home.join("private").to_string_lossy().into_owned(),
        access: outpost_policy::FolderAccess::Deny,
        tools: None,
    });
    p
}

fn no_question_for(h: &Harness, id: &str) -> bool {
    !h.events.iter().any(|e| {
        matches!(e, outpost_tools::DispatchEvent::Progress(p)
            if p.id == id && p.state == outpost_protocol::ProgressState::AwaitingConsent)
    })
}

/// ~/.ssh/id_rsa present, then only ~/.ssh, then neither: every spelling of it (directly,
/// through a symlinked folder, through a dangling link, through `..` after a missing
/// folder) gets the same denial from the secrets list, from every tool.
#[tokio::test]
async fn a_missing_secret_is_denied_exactly_like_an_existing_one() {
    let mut h = Harness::new(probe_policy_with_private);
    h.write("docs/a.txt", INSIDE);
    let docs = h.path("docs");
    std::os::unix::fs::symlink(h.path(".ssh"), docs.join("dir_ssh")).unwrap();
    std::os::unix::fs::symlink("../.ssh/id_rsa", docs.join("link_ssh")).unwrap();
    let spellings = [
        "~/.ssh/id_rsa",
        "~/.ssh/./id_rsa",
        "~/docs/dir_ssh/id_rsa",
        "~/docs/link_ssh",
        "~/docs/nope/../../.ssh/id_rsa",
    ];
    let expected = format!(
        "to allow {} add it under [[exceptions]]",
        h.path(".ssh/id_rsa").display()
    );
    let mut n = 0;
    let mut first: std::collections::HashMap<(&str, &str), (bool, String, String)> =
        std::collections::HashMap::new();
    for state in ["present", "only the folder", "absent"] {
        match state {
            "present" => {
                h.write(".ssh/id_rsa", SECRET);
            }
            "only the folder" => std::fs::remove_file(h.path(".ssh/id_rsa")).unwrap(),
            _ => std::fs::remove_dir(h.path(".ssh")).unwrap(),
        }
        for tool in PATH_TOOLS {
            for path in spellings {
                n += 1;
                let a = probe(&mut h, &format!("s{n}"), tool, path).await;
                assert_eq!(a.1, "permission_denied", "{tool} {path} ({state}): {a:?}");
                // write_file does not follow a link in the last component: it judges the
                // link itself (in docs/, where it asks) and refuses links when it runs.
                if !(*tool == "write_file" && path.ends_with("link_ssh")) {
                    assert!(
                        a.2.starts_with("Permission denied by the built-in secrets list: ")
                            && a.2.contains(&expected),
                        "{tool} {path} ({state}): {a:?}"
                    );
                }
                let seen = first.entry((*tool, path)).or_insert_with(|| a.clone());
                assert_eq!(*seen, a, "{tool} {path}: answer changed when {state}");
            }
        }
    }
    assert!(h.launcher.opened.lock().unwrap().is_empty());
}

/// Outside the allowed folders (no consent UI, so "ask" means deny): a file, a folder and
/// nothing at all get the same denial from every tool, and so does a path under a symlinked
/// folder that leads into a denied folder, present or not.
#[tokio::test]
async fn a_missing_path_outside_scope_or_in_a_denied_folder_is_denied_like_an_existing_one() {
    let mut h = Harness::new(probe_policy_with_private);
    std::fs::create_dir_all(h.path("docs")).unwrap();
    std::os::unix::fs::symlink(h.path("private"), h.path("docs/to_private")).unwrap();
    let denied_folder = format!(
        "Permission denied by your policy: {} is denied in the policy file",
        h.path("private").display()
    );
    let no_ui = "Permission denied by Outpost: this call needs the user's permission and no \
                 consent prompt is available";
    let cases: [(&str, &str); 3] = [
        ("~/elsewhere/x", no_ui),
        ("~/docs/to_private/x", denied_folder.as_str()),
        ("~/docs/to_private/sub/../x", denied_folder.as_str()),
    ];
    let mut n = 0;
    let mut first: std::collections::HashMap<(&str, &str), (bool, String, String)> =
        std::collections::HashMap::new();
    for state in ["a file", "a folder", "only the parent", "nothing"] {
        for dir in ["elsewhere", "private"] {
            let _ = std::fs::remove_dir_all(h.path(dir));
            match state {
                "a file" => {
                    h.write(&format!("{dir}/x"), OUTSIDE);
                }
                "a folder" => std::fs::create_dir_all(h.path(&format!("{dir}/x/sub"))).unwrap(),
                "only the parent" => std::fs::create_dir_all(h.path(dir)).unwrap(),
                _ => {}
            }
        }
        for tool in PATH_TOOLS {
            for (path, expected) in cases {
                n += 1;
                let a = probe(&mut h, &format!("o{n}"), tool, path).await;
                assert_eq!(
                    (a.1.as_str(), a.2.as_str()),
                    ("permission_denied", expected),
                    "{tool} {path} ({state})"
                );
                let seen = first.entry((*tool, path)).or_insert_with(|| a.clone());
                assert_eq!(*seen, a, "{tool} {path}: answer changed with {state}");
            }
        }
        if state == "a file" {
            for dir in ["elsewhere", "private"] {
                let now = std::fs::read_to_string(h.path(&format!("{dir}/x"))).unwrap();
                assert_eq!(now, OUTSIDE, "write_file changed {dir}/x");
            }
        }
    }
    assert!(h.launcher.opened.lock().unwrap().is_empty());
}

/// Inside the allowed folder a missing path is "not found": at once for the read-only tools
/// (no question), and only after the user allowed it for those that ask every time.
#[tokio::test]
async fn a_missing_path_inside_an_allowed_folder_is_not_found_once_allowed() {
    let mut h = Harness::new(probe_policy_with_private);
    std::fs::create_dir_all(h.path("docs")).unwrap();
    let mut ui = h.dispatcher.broker().attach();
    for (i, tool) in PATH_TOOLS.iter().enumerate() {
        let id = format!("m{i}");
        h.send(&id, tool, path_params(tool, "~/docs/nope/x"));
        if matches!(*tool, "open_path" | "write_file") {
            let q = asked(&mut ui).await;
            assert_eq!(q.paths, [h.path("docs/nope/x")], "{tool}");
            ui.answer(&q.consent_id, Decision::AllowOnce).unwrap();
        }
        let r = h.result(&id).await;
        // write_file names the folder it cannot create the file in.
        let missing = if *tool == "write_file" {
            h.path("docs/nope")
        } else {
            h.path("docs/nope/x")
        };
        assert_eq!(
            answer(&r),
            (
                false,
                "execution_error".to_owned(),
                format!("File not found: {}", missing.display())
            ),
            "{tool}"
        );
        if !matches!(*tool, "open_path" | "write_file") {
            assert!(no_question_for(&h, &id), "{tool} asked for an allowed path");
        }
    }
    assert!(h.launcher.opened.lock().unwrap().is_empty());
    assert!(!h.path("docs/nope").exists());
}

/// Under an "ask" rule the user is asked the same question whether the path exists or not;
/// only once they allow does the answer say it is not there.
#[tokio::test]
async fn a_missing_path_under_an_ask_rule_asks_first_then_says_not_found() {
    let mut h = Harness::new(|home| {
        let mut p = docs_policy(home);
        for tool in PATH_TOOLS {
            p.tools
                .insert((*tool).to_owned(), outpost_policy::Rule::Ask);
        }
        p
    });
    let mut ui = h.dispatcher.broker().attach();
    let question = |q: &outpost_policy::ConsentRequest| {
        (
            q.tool.clone(),
            q.parameters.clone(),
            q.summary.clone(),
            q.paths.clone(),
            q.folder.clone(),
            q.reason.clone(),
            q.destructive,
            q.options.clone(),
        )
    };
    for (i, tool) in PATH_TOOLS.iter().enumerate() {
        for place in ["docs", "elsewhere"] {
            let rel = format!("{place}/t-{tool}");
            if takes_folder(tool) {
                std::fs::create_dir_all(h.path(&rel)).unwrap();
            } else {
                h.write(&rel, INSIDE);
            }
            let path = format!("~/{rel}");
            // Present: asked, declined.
            let id = format!("a{i}-{place}-present");
            h.send(&id, tool, path_params(tool, &path));
            let q_present = asked(&mut ui).await;
            ui.answer(&q_present.consent_id, Decision::DenyOnce)
                .unwrap();
            assert_eq!(code(&h.result(&id).await), "permission_denied");
            // Absent: the same question, and "not found" only after it was allowed.
            if takes_folder(tool) {
                std::fs::remove_dir(h.path(&rel)).unwrap();
            } else {
                std::fs::remove_file(h.path(&rel)).unwrap();
            }
            let id = format!("a{i}-{place}-absent");
            h.send(&id, tool, path_params(tool, &path));
            let q_absent = asked(&mut ui).await;
            assert_eq!(
                question(&q_absent),
                question(&q_present),
                "{tool} in {place}"
            );
            assert!(
                h.results_for(&id).is_empty(),
                "{tool}: answered before consent"
            );
            ui.answer(&q_absent.consent_id, Decision::AllowOnce)
                .unwrap();
            let r = h.result(&id).await;
            let expected = if *tool == "write_file" {
                // Writing creates the file: with consent it now exists.
                (true, String::new(), String::new())
            } else {
                (
                    false,
                    "execution_error".to_owned(),
                    format!("File not found: {}", h.path(&rel).display()),
                )
            };
            assert_eq!(answer(&r), expected, "{tool} in {place}");
            let progress: Vec<_> = h
                .events
                .iter()
                .filter_map(|e| match e {
                    outpost_tools::DispatchEvent::Progress(p) if p.id == id => Some(p.state),
                    _ => None,
                })
                .collect();
            assert_eq!(
                progress,
                [
                    outpost_protocol::ProgressState::AwaitingConsent,
                    outpost_protocol::ProgressState::Running
                ],
                "{tool} in {place}"
            );
        }
    }
    assert!(h.launcher.opened.lock().unwrap().is_empty());
}

/// `..` after a protected folder: the answer is the same whether that folder exists or not.
#[tokio::test]
async fn dotdot_after_a_secret_folder_does_not_tell_whether_it_exists() {
    let mut h = Harness::new(policy);
    h.write("docs/a.txt", INSIDE);
    let path = "~/docs/../.ssh/../docs/a.txt";
    let mut answers = Vec::new();
    for (i, present) in [true, false].into_iter().enumerate() {
        if present {
            h.write(".ssh/id_rsa", SECRET);
        } else {
            std::fs::remove_dir_all(h.path(".ssh")).unwrap();
        }
        let id = format!("r{i}");
        h.send(&id, "read_local_file", json!({"filePath": path}));
        let r = h.result(&id).await;
        assert_eq!(content(&r), INSIDE, "{r:?}");
        let id = format!("i{i}");
        h.send(&id, "file_info", json!({"path": path}));
        let r = h.result(&id).await;
        assert!(r.success, "{r:?}");
        answers.push((
            field(&r, "resolvedPath").clone(),
            field(&r, "isSymlink").clone(),
            field(&r, "kind").clone(),
        ));
    }
    assert_eq!(answers[0], answers[1]);
}
