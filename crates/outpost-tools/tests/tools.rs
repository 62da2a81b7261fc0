//! The built-in tools through the dispatcher: results, parameter errors naming the field,
//! hello catalogue, and the consent rules of each tool.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use outpost_policy::{Decision, Policy, Rule};
use outpost_protocol::{ClientHello, Execution, Message, encode};
use outpost_tools::{DispatchEvent, Handled};

use serde_json::json;

#[tokio::test]
async fn catalogue_lists_every_builtin_with_schemas_and_fits_in_a_hello() {
    let h = Harness::new(docs_policy);
    let tools = h.dispatcher.catalogue();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "read_local_file",
            "list_directory",
            "search_files",
            "file_info",
            "write_file",
            "calculator",
            "system_info",
            "open_path",
            "open_url"
        ]
    );
    for t in &tools {
        assert_eq!(
            t.parameters.get("type"),
            Some(&json!("object")),
            "{}",
            t.name
        );
        assert!(t.result_schema.is_some());
        assert!(t.timeout_ms.is_some());
    }
    let read = &tools[0];
    assert!(read.read_only && !read.destructive);
    assert_eq!(read.parameters["required"], json!(["filePath"]));
    assert_eq!(read.parameters["additionalProperties"], json!(false));
    let write = &tools[4];
    assert!(write.destructive && !write.read_only);
    assert!(tools[8].open_world);
    let hello = ClientHello::new("Outpost", "0.1.0", tools);
    encode(&Message::ClientHello(hello)).unwrap();
}

#[tokio::test]
async fn read_local_file_reads_text_inside_a_scope_without_asking() {
    let mut h = Harness::new(docs_policy);
    let p = h.write("docs/notes.txt", "hello, world\n");
    h.send("r1", "read_local_file", json!({"filePath": p}));
    let r = h.result("r1").await;
    assert!(r.success, "{r:?}");
    assert_eq!(field(&r, "content"), &json!("hello, world\n"));
    assert_eq!(field(&r, "size"), &json!(13));
    assert_eq!(field(&r, "encoding"), &json!("utf-8"));
    assert_eq!(field(&r, "truncated"), &json!(false));
    assert_eq!(field(&r, "mimeType"), &json!("text/plain"));
    // No progress for a call allowed outright; audit has requested, decided, started, finished.
    assert!(
        !h.events
            .iter()
            .any(|e| matches!(e, DispatchEvent::Progress(_)))
    );
}

#[tokio::test]
async fn capped_reads_say_truncated_with_the_total_size() {
    let mut h = Harness::new(docs_policy);
    let p = h.write("docs/big.txt", "x".repeat(3000));
    h.send(
        "r1",
        "read_local_file",
        json!({"filePath": p, "maxBytes": 1000}),
    );
    let r = h.result("r1").await;
    assert_eq!(field(&r, "truncated"), &json!(true));
    assert_eq!(field(&r, "size"), &json!(3000));
    assert_eq!(field(&r, "bytesRead"), &json!(1000));
    h.send(
        "r2",
        "read_local_file",
        json!({"filePath": p, "offset": 2500, "maxBytes": 1000}),
    );
    let r = h.result("r2").await;
    assert_eq!(field(&r, "truncated"), &json!(false));
    assert_eq!(field(&r, "bytesRead"), &json!(500));
    // A cut through a multi-byte character returns whole characters and says truncated.
    let p = h.write("docs/utf.txt", "é".repeat(10));
    h.send(
        "r3",
        "read_local_file",
        json!({"filePath": p, "maxBytes": 5}),
    );
    let r = h.result("r3").await;
    assert_eq!(field(&r, "content"), &json!("éé"));
    assert_eq!(field(&r, "truncated"), &json!(true));
}

#[tokio::test]
async fn binary_files_come_back_as_base64() {
    let mut h = Harness::new(docs_policy);
    let p = h.write("docs/blob.bin", [0u8, 159, 146, 150, 255]);
    h.send("r1", "read_local_file", json!({"filePath": p}));
    let r = h.result("r1").await;
    assert_eq!(field(&r, "encoding"), &json!("base64"));
    assert_eq!(field(&r, "content"), &json!("AJ+Slv8="));
}

#[tokio::test]
async fn tilde_is_expanded_against_the_injected_home() {
    let mut h = Harness::new(docs_policy);
    h.write("docs/a.txt", "tilde");
    h.send("r1", "read_local_file", json!({"filePath": "~/docs/a.txt"}));
    let r = h.result("r1").await;
    assert_eq!(field(&r, "content"), &json!("tilde"), "{r:?}");
}

#[tokio::test]
async fn bad_parameters_are_answered_with_the_field_named() {
    let mut h = Harness::new(docs_policy);
    let cases = [
        ("read_local_file", json!({}), "filePath"),
        ("read_local_file", json!({"filePath": 5}), "filePath"),
        (
            "read_local_file",
            json!({"filePath": "/x", "maxBytes": "lots"}),
            "maxBytes",
        ),
        (
            "read_local_file",
            json!({"filePath": "/x", "maxBytes": 0}),
            "maxBytes",
        ),
        (
            "read_local_file",
            json!({"filePath": "/x", "colour": 1}),
            "colour",
        ),
        (
            "read_local_file",
            json!({"filePath": "notes.txt"}),
            "filePath",
        ),
        (
            "read_local_file",
            json!({"filePath": "/a\u{0}b"}),
            "filePath",
        ),
        (
            "write_file",
            json!({"filePath": "/x", "content": "", "mode": "shred"}),
            "mode",
        ),
        ("calculator", json!({"expression": ""}), "expression"),
        ("open_url", json!({"url": "file:///etc/passwd"}), "url"),
        (
            "list_directory",
            json!({"path": "/", "maxEntries": 10_000_000}),
            "maxEntries",
        ),
        ("search_files", json!({"root": "/", "glob": "a[" }), "glob"),
    ];
    for (i, (tool, params, field)) in cases.iter().enumerate() {
        let id = format!("bad{i}");
        h.send(&id, tool, params.clone());
        let r = h.result(&id).await;
        assert_eq!(code(&r), "invalid_parameters", "{tool} {params}: {r:?}");
        assert!(
            msg(&r).starts_with(&format!("Invalid parameters for tool '{tool}': ")),
            "{r:?}"
        );
        assert!(msg(&r).contains(field), "{tool} {params}: {}", msg(&r));
    }
}

/// The string `key` of each object in the result's list `list`.
fn column(r: &outpost_protocol::ToolUseResult, list: &str, key: &str) -> Vec<String> {
    field(r, list)
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[key].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn missing_files_are_execution_errors() {
    let mut h = Harness::new(docs_policy);
    h.send(
        "r1",
        "read_local_file",
        json!({"filePath": "~/docs/nope.txt"}),
    );
    let r = h.result("r1").await;
    assert_eq!(code(&r), "execution_error");
    assert!(msg(&r).starts_with("File not found: "), "{r:?}");
}

#[tokio::test]
async fn list_directory_lists_sorted_recursive_hidden_and_withholds_secrets() {
    let mut h = Harness::new(docs_policy);
    h.write("docs/b.txt", "bb");
    h.write("docs/a.txt", "a");
    h.write("docs/.hidden", "h");
    h.write("docs/.env", "TOKEN=1");
    h.write("docs/sub/c.txt", "ccc");
    h.write("docs/sub/server.key", "k");
    h.send("r1", "list_directory", json!({"path": "~/docs"}));
    let r = h.result("r1").await;
    let names = column(&r, "entries", "name");
    assert_eq!(names, ["a.txt", "b.txt", "sub"]);
    assert_eq!(field(&r, "entries")[2]["kind"], json!("directory"));
    assert_eq!(field(&r, "entries")[1]["size"], json!(2));
    assert!(field(&r, "entries")[0]["modified"].is_string());

    h.send(
        "r2",
        "list_directory",
        json!({"path": "~/docs", "recursive": true, "includeHidden": true}),
    );
    let r = h.result("r2").await;
    let names = column(&r, "entries", "name");
    assert_eq!(names, [".hidden", "a.txt", "b.txt", "sub", "sub/c.txt"]);
    assert_eq!(field(&r, "withheld"), &json!(2));

    h.send(
        "r3",
        "list_directory",
        json!({"path": "~/docs", "maxEntries": 2}),
    );
    let r = h.result("r3").await;
    assert_eq!(field(&r, "entries").as_array().unwrap().len(), 2);
    assert_eq!(field(&r, "truncated"), &json!(true));
}

#[tokio::test]
async fn search_files_globs_greps_honours_gitignore_and_skips_secrets() {
    let mut h = Harness::new(docs_policy);
    h.write("docs/readme.md", "The Needle is here\nand another needle\n");
    h.write("docs/src/lib.rs", "fn needle() {}\n");
    h.write("docs/src/other.rs", "nothing\n");
    h.write("docs/.gitignore", "ignored/\n");
    h.write("docs/ignored/x.md", "needle\n");
    h.write("docs/.env", "needle=secret\n");
    h.write("docs/keys/id_ed25519", "needle\n");
    h.send(
        "r1",
        "search_files",
        json!({"root": "~/docs", "glob": "*.rs"}),
    );
    let r = h.result("r1").await;
    let paths = column(&r, "results", "path");
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(sorted, ["src/lib.rs", "src/other.rs"]);

    h.send(
        "r2",
        "search_files",
        json!({"root": "~/docs", "contains": "NEEDLE"}),
    );
    let r = h.result("r2").await;
    let results = field(&r, "results").as_array().unwrap().clone();
    let mut paths = column(&r, "results", "path");
    paths.sort();
    assert_eq!(paths, ["readme.md", "src/lib.rs"], "{r:?}");
    let readme = results.iter().find(|e| e["path"] == "readme.md").unwrap();
    assert_eq!(readme["matches"][0]["line"], json!(1));
    assert_eq!(readme["matches"][1]["text"], json!("and another needle"));
    assert!(field(&r, "withheld").as_u64().unwrap() >= 1, "{r:?}");
    let text = serde_json::to_string(&r).unwrap();
    assert!(
        !text.contains("secret"),
        "a protected file was read: {text}"
    );
}

#[tokio::test]
async fn file_info_reports_symlinks_and_their_targets() {
    let mut h = Harness::new(docs_policy);
    let target = h.write("docs/real.txt", "12345");
    std::os::unix::fs::symlink(&target, h.path("docs/link.txt")).unwrap();
    h.send("r1", "file_info", json!({"path": "~/docs/link.txt"}));
    let r = h.result("r1").await;
    assert!(r.success, "{r:?}");
    assert_eq!(field(&r, "isSymlink"), &json!(true));
    assert_eq!(field(&r, "resolvedPath"), &json!(target));
    assert_eq!(field(&r, "size"), &json!(5));
    assert_eq!(field(&r, "kind"), &json!("file"));
    assert!(field(&r, "permissions").is_string());
}

#[tokio::test]
async fn calculator_and_system_info_run_without_asking() {
    let mut h = Harness::new(|_| Policy::default());
    h.send("r1", "calculator", json!({"expression": "2 + 2 * 3"}));
    let r = h.result("r1").await;
    assert_eq!(field(&r, "answer"), &json!(8));
    h.send(
        "r2",
        "calculator",
        json!({"expression": "math::sqrt(16.0) / 2"}),
    );
    assert_eq!(field(&h.result("r2").await, "answer"), &json!(2.0));
    h.send("r3", "calculator", json!({"expression": "1 / 0"}));
    assert_eq!(code(&h.result("r3").await), "execution_error");
    let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
    h.send("r4", "calculator", json!({"expression": deep}));
    let r = h.result("r4").await;
    assert_eq!(code(&r), "invalid_parameters");
    assert!(msg(&r).contains("expression"));

    h.send("r5", "system_info", json!({}));
    let r = h.result("r5").await;
    assert!(r.success, "{r:?}");
    assert_eq!(field(&r, "os"), &json!(std::env::consts::OS));
    assert_eq!(field(&r, "arch"), &json!(std::env::consts::ARCH));
    assert!(!field(&r, "hostname").as_str().unwrap().is_empty());
    let local = field(&r, "localTime").as_str().unwrap();
    assert!(local.len() >= 25 && local.contains('T'), "{local}");
}

#[tokio::test]
async fn write_file_is_off_by_default() {
    let mut h = Harness::new(docs_policy);
    let _ui = h.dispatcher.broker().attach();
    h.send(
        "w1",
        "write_file",
        json!({"filePath": "~/docs/new.txt", "content": "x", "mode": "create"}),
    );
    let r = h.result("w1").await;
    assert_eq!(code(&r), "permission_denied");
    assert!(
        msg(&r).starts_with("Permission denied by your policy: "),
        "{r:?}"
    );
    assert!(!h.path("docs/new.txt").exists());
}

#[tokio::test]
async fn write_file_when_enabled_asks_every_time_and_never_offers_always() {
    let mut h = Harness::new(|home| {
        let mut p = docs_policy(home);
        p.tools.insert("write_file".into(), Rule::Allow);
        p
    });
    std::fs::create_dir_all(h.path("docs")).unwrap();
    // No UI: ask means deny.
    h.send(
        "w0",
        "write_file",
        json!({"filePath": "~/docs/new.txt", "content": "x", "mode": "create"}),
    );
    let r = h.result("w0").await;
    assert_eq!(code(&r), "permission_denied");
    assert!(!h.path("docs/new.txt").exists());

    let mut ui = h.dispatcher.broker().attach();
    for (i, (mode, content)) in [("create", "one\n"), ("append", "two\n")]
        .iter()
        .enumerate()
    {
        let id = format!("w{}", i + 1);
        h.send(
            &id,
            "write_file",
            json!({"filePath": "~/docs/new.txt", "content": content, "mode": mode}),
        );
        let q = asked(&mut ui).await;
        assert!(q.destructive);
        assert_eq!(
            q.options,
            [
                Decision::AllowOnce,
                Decision::DenyOnce,
                Decision::AlwaysDeny
            ]
        );
        assert_eq!(
            q.parameters["content"],
            json!(content),
            "arguments are shown in full"
        );
        assert!(ui.answer(&q.consent_id, Decision::AlwaysAllow).is_err());
        ui.answer(&q.consent_id, Decision::AllowOnce).unwrap();
        let r = h.result(&id).await;
        assert!(r.success, "{r:?}");
    }
    assert_eq!(
        std::fs::read_to_string(h.path("docs/new.txt")).unwrap(),
        "one\ntwo\n"
    );
    h.send(
        "w3",
        "write_file",
        json!({"filePath": "~/docs/new.txt", "content": "x", "mode": "create"}),
    );
    // Whether the file exists is told only after the user allowed the call.
    let q = asked(&mut ui).await;
    ui.answer(&q.consent_id, Decision::AllowOnce).unwrap();
    let r = h.result("w3").await;
    assert_eq!(
        code(&r),
        "execution_error",
        "create must not replace: {r:?}"
    );
    assert!(msg(&r).ends_with("already exists; use mode overwrite or append"));
    assert_eq!(
        std::fs::read_to_string(h.path("docs/new.txt")).unwrap(),
        "one\ntwo\n"
    );
}

#[tokio::test]
async fn open_path_and_open_url_ask_every_time_and_launch_the_right_target() {
    let mut h = Harness::new(docs_policy);
    let p = h.write("docs/report.pdf", "%PDF");
    h.send(
        "o0",
        "open_url",
        json!({"url": "https://example.org/a?b=c"}),
    );
    assert_eq!(code(&h.result("o0").await), "permission_denied");
    assert!(
        h.launcher.opened.lock().unwrap().is_empty(),
        "launched without consent"
    );

    let mut ui = h.dispatcher.broker().attach();
    for round in 0..2 {
        let id = format!("o{round}p");
        h.send(&id, "open_path", json!({"path": "~/docs/report.pdf"}));
        let q = asked(&mut ui).await;
        assert!(!q.options.contains(&Decision::AlwaysAllow));
        ui.answer(&q.consent_id, Decision::AllowOnce).unwrap();
        assert!(h.result(&id).await.success);
    }
    h.send(
        "ou",
        "open_url",
        json!({"url": "https://example.org/a?b=c"}),
    );
    let q = asked(&mut ui).await;
    ui.answer(&q.consent_id, Decision::AllowOnce).unwrap();
    assert!(h.result("ou").await.success);
    h.send("od", "open_url", json!({"url": "https://example.org/deny"}));
    let q = asked(&mut ui).await;
    ui.answer(&q.consent_id, Decision::DenyOnce).unwrap();
    let r = h.result("od").await;
    assert_eq!(
        msg(&r),
        "Permission denied by the user: the user declined this call"
    );
    let opened = h.launcher.opened.lock().unwrap().clone();
    assert_eq!(
        opened,
        [
            p.clone().into_os_string(),
            p.into_os_string(),
            "https://example.org/a?b=c".into()
        ]
    );
}

/// Issue 30 ("also to check"): a `mailto:` link with `attach=` went to xdg-open, and mail
/// programs attach the file it names. The call is refused before anyone is asked.
#[tokio::test]
async fn open_url_refuses_a_mail_link_that_attaches_a_file() {
    let mut h = Harness::new(docs_policy);
    let _ui = h.dispatcher.broker().attach();
    h.send(
        "m1",
        "open_url",
        json!({"url": "mailto:x@example.org?subject=hi&attach=/home/u/.ssh/id_rsa"}),
    );
    let r = h.result("m1").await;
    assert_eq!(code(&r), "invalid_parameters");
    assert!(msg(&r).contains("\"attach\""), "{}", msg(&r));
    assert!(h.launcher.opened.lock().unwrap().is_empty());
}

#[tokio::test]
async fn unknown_tools_get_the_seed_text_and_server_requests_are_only_recorded() {
    let mut h = Harness::new(docs_policy);
    h.send("u1", "web_search", json!({"query": "x"}));
    let r = h.result("u1").await;
    assert_eq!(code(&r), "unknown_tool");
    assert_eq!(msg(&r), "Tool 'web_search' is not supported by this client");

    let handled = h.send_full(
        "c1",
        "s1",
        "read_local_file",
        Execution::Server,
        json!({"filePath": "/etc/passwd"}),
        None,
    );
    assert_eq!(handled, Handled::Recorded);
    h.drain(Duration::from_millis(100)).await;
    assert!(h.results_for("s1").is_empty());
    // Neither decided nor started: a server call is only remembered.
    assert!(!h.events.iter().any(|e| matches!(e,
        DispatchEvent::Started { request_id } | DispatchEvent::Decided { request_id, .. }
            if request_id == "s1")));
}

#[tokio::test]
async fn either_runs_when_permitted_and_otherwise_answers_unknown_tool_at_once() {
    let mut h = Harness::new(docs_policy);
    let p = h.write("docs/a.txt", "A");
    h.send_full(
        "c1",
        "e1",
        "read_local_file",
        Execution::Either,
        json!({"filePath": p}),
        None,
    );
    assert!(h.result("e1").await.success);
    // Not permitted (outside scope, no UI): unknown_tool so the server runs it.
    let q = h.write("elsewhere.txt", "B");
    h.send_full(
        "c1",
        "e2",
        "read_local_file",
        Execution::Either,
        json!({"filePath": q}),
        None,
    );
    let r = h.result("e2").await;
    assert_eq!(
        msg(&r),
        "Tool 'read_local_file' is not supported by this client"
    );
    h.send_full("c1", "e3", "web_search", Execution::Either, json!({}), None);
    assert_eq!(code(&h.result("e3").await), "unknown_tool");
    h.send_full(
        "c1",
        "e4",
        "read_local_file",
        Execution::Either,
        json!({"nope": 1}),
        None,
    );
    assert_eq!(code(&h.result("e4").await), "unknown_tool");
}
