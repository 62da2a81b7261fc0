//! Tidy: ARCHITECTURE.md's invariants that can be read off the source, checked on every
//! test run so they stay true. Every Rust file opens with a `//!` doc; the import rules
//! (who may name rmp_serde, livekit_protocol, webrtc/rtc, tauri, outpost_tools, and which crates
//! may depend on which); no crate lists a dependency it does not use; and the app's command
//! list has one source (src-tauri/commands.txt; build.rs makes the handler and the
//! permissions from it) and agrees with what still spells it (backend.ts's `Commands`,
//! ui/CONTRACT.md); only the core decides a tool call's status; and locks are taken through
//! the one helper, `outpost_sync`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The workspace members, relative to the repository.
fn members() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(repo().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    out.push(repo().join("src-tauri"));
    out.push(repo().join("tests"));
    out.sort();
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Rust sources of `member` under the given subfolders (and files).
fn sources(member: &Path, parts: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for part in parts {
        let p = member.join(part);
        if p.is_file() {
            out.push(p);
        } else {
            rust_files(&p, &mut out);
        }
    }
    out
}

fn rel(p: &Path) -> String {
    p.strip_prefix(repo()).unwrap().display().to_string()
}

/// Lines that are code, not comments (a rough cut: whole-line comments are dropped).
fn code(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `text` names the crate `ident` in a path, a `use` or a macro call.
fn names(text: &str, ident: &str) -> bool {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(i) = text[from..].find(ident) {
        let at = from + i;
        from = at + ident.len();
        let before_ok = at == 0 || {
            let b = bytes[at - 1];
            !(b.is_ascii_alphanumeric() || b == b'_' || b == b':')
        };
        // `webrtc` is not named by `webrtc_audio_processing`.
        let after_ok = bytes
            .get(from)
            .is_none_or(|b| !(b.is_ascii_alphanumeric() || *b == b'_'));
        if !before_ok || !after_ok {
            continue;
        }
        let rest = text[from..].trim_start();
        if rest.starts_with("::") || rest.starts_with('!') {
            return true;
        }
        let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
        let head = text[line_start..at].trim();
        if head.ends_with("use") || head.ends_with("extern crate") {
            return true;
        }
    }
    false
}

#[test]
fn every_rust_file_opens_with_a_doc_comment() {
    let mut bad = Vec::new();
    for m in members() {
        for f in sources(&m, &["src", "tests", "benches", "examples", "build.rs"]) {
            let text = fs::read_to_string(&f).unwrap();
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            if !first.starts_with("//!") {
                bad.push(rel(&f));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "files without a `//!` doc at the top: {bad:#?}"
    );
}

/// `(crate ident, where it may be named)`; a path ending in '/' allows a whole folder.
const IMPORT_RULES: &[(&str, &[&str])] = &[
    ("rmp_serde", &["crates/outpost-protocol/"]),
    ("rmp", &["crates/outpost-protocol/"]),
    (
        "livekit_protocol",
        &[
            "crates/outpost-livekit/src/proto.rs",
            // Decodes SignalResponse for the fuzzer only (doc-hidden).
            "crates/outpost-livekit/src/fuzzing.rs",
            "crates/outpost-room/src/proto.rs",
        ],
    ),
    // The WebRTC plumbing both LiveKit crates share; their wire.rs glue goes through it.
    ("webrtc", &["crates/outpost-webrtc/"]),
    ("rtc", &["crates/outpost-webrtc/"]),
    ("tauri", &["src-tauri/"]),
    // Audio devices: only outpost-audio (the core knows no device).
    ("cpal", &["crates/outpost-audio/"]),
    ("rubato", &["crates/outpost-audio/"]),
    ("webrtc_audio_processing", &["crates/outpost-audio/"]),
    (
        "outpost_tools",
        &[
            "crates/outpost-tools/",
            "crates/outpost-core/src/executor/",
            "tests/",
        ],
    ),
];

#[test]
fn crates_are_named_only_where_architecture_md_allows() {
    let mut bad = Vec::new();
    for m in members() {
        for f in sources(&m, &["src", "build.rs"]) {
            let r = rel(&f);
            let text = code(&fs::read_to_string(&f).unwrap());
            for (ident, allowed) in IMPORT_RULES {
                let ok = allowed.iter().any(|a| {
                    if a.ends_with('/') {
                        r.starts_with(a)
                    } else {
                        r == *a
                    }
                });
                if !ok && names(&text, ident) {
                    bad.push(format!("{r} names `{ident}`"));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

fn manifest(member: &Path) -> toml::Table {
    toml::from_str(&fs::read_to_string(member.join("Cargo.toml")).unwrap()).unwrap()
}

/// `(section, dependency name)` for every dependency a member lists, including
/// target-specific ones.
fn dependencies(man: &toml::Table) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut tables = vec![man.clone()];
    if let Some(toml::Value::Table(targets)) = man.get("target") {
        for t in targets.values() {
            if let toml::Value::Table(t) = t {
                tables.push(t.clone());
            }
        }
    }
    for t in tables {
        for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
            if let Some(toml::Value::Table(deps)) = t.get(section) {
                for name in deps.keys() {
                    out.push((section.to_owned(), name.clone()));
                }
            }
        }
    }
    out
}

#[test]
fn the_crate_graph_follows_architecture_md() {
    let deny: &[(&str, &str)] = &[
        // The agent only speaks the protocol.
        ("outpost-agent", "outpost-core"),
        ("outpost-agent", "outpost-tools"),
        // The store has its own record types.
        ("outpost-store", "outpost-protocol"),
        // Nothing but the shell knows Tauri.
        ("outpost-desktop", "tauri"),
        ("outpost-core", "tauri"),
    ];
    // The local demo's programs run beside the app as child processes; the app's binary
    // links neither (tests may still use them as libraries).
    let deny_linked: &[(&str, &str)] = &[
        ("outpost-desktop", "outpost-room"),
        ("outpost-desktop", "outpost-agent"),
        ("src-tauri", "outpost-room"),
        ("src-tauri", "outpost-agent"),
    ];
    let mut bad = Vec::new();
    for m in members() {
        let name = m.file_name().unwrap().to_string_lossy().into_owned();
        for (section, dep) in dependencies(&manifest(&m)) {
            let linked = section != "dev-dependencies";
            if deny.iter().any(|(c, d)| *c == name && *d == dep)
                || (linked && deny_linked.iter().any(|(c, d)| *c == name && *d == dep))
            {
                bad.push(format!("{name} depends on {dep} ({section})"));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Dependencies kept for their features or their build output rather than named in code.
const NOT_NAMED_IN_CODE: &[(&str, &str, &str)] = &[
    // tauri-build runs from build.rs; tauri's macros are named there.
    ("src-tauri", "tauri-build", "build.rs calls it"),
    // outpost_enum::closed_enum!'s `#[ts_if_feature]` derives ts-rs's TS in this crate, under
    // its `ts` feature.
    (
        "outpost-protocol",
        "ts-rs",
        "the closed enums' TypeScript, through closed_enum!",
    ),
    // rmcp's HTTP transport is reqwest; the crate picks its TLS features here.
    (
        "outpost-mcp",
        "reqwest",
        "selects rmcp's HTTP client's TLS features",
    ),
];

#[test]
fn no_crate_lists_a_dependency_it_does_not_use() {
    let mut bad = Vec::new();
    for m in members() {
        let name = m.file_name().unwrap().to_string_lossy().into_owned();
        let man = manifest(&m);
        for (section, dep) in dependencies(&man) {
            if NOT_NAMED_IN_CODE
                .iter()
                .any(|(c, d, _)| *c == name && *d == dep)
            {
                continue;
            }
            let parts: &[&str] = match section.as_str() {
                "dependencies" => &["src", "build.rs"],
                "build-dependencies" => &["build.rs"],
                _ => &["src", "tests", "benches", "examples"],
            };
            let ident = dep.replace('-', "_");
            let used = sources(&m, parts)
                .iter()
                .any(|f| names(&code(&fs::read_to_string(f).unwrap()), &ident));
            if !used {
                bad.push(format!("{name}: {section} `{dep}` is not used"));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn only_the_tauri_backend_imports_tauri_in_the_ui() {
    let mut files = Vec::new();
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p
                .extension()
                .is_some_and(|x| x == "ts" || x == "svelte" || x == "js")
            {
                out.push(p);
            }
        }
    }
    walk(&repo().join("ui/src"), &mut files);
    let bad: Vec<String> = files
        .iter()
        .filter(|f| rel(f) != "ui/src/lib/backend.ts")
        // Unit tests may mock the Tauri API.
        .filter(|f| !rel(f).contains(".test."))
        .filter(|f| fs::read_to_string(f).unwrap().contains("@tauri-apps/"))
        .map(|f| rel(f))
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

/// A tool call's status has one owner (ARCHITECTURE.md): only outpost-core's machine, and
/// nothing else (the store keeps the status it decided), turns a result into a status
/// (`ToolCallStatus::of_result`); the app, the CLI and the UI copy it and never spell the
/// failure code that decides one (the UI's `words.ts` puts codes into plain words, and the
/// mock backend stands in for the core).
#[test]
fn only_the_core_decides_a_tool_calls_status() {
    let decides = |r: &str| r.starts_with("crates/outpost-core/src/");
    let mut rust = Vec::new();
    for m in members() {
        rust_files(&m.join("src"), &mut rust);
    }
    let bad: Vec<String> = rust
        .iter()
        .filter(|f| !decides(&rel(f)))
        .filter(|f| code(&fs::read_to_string(f).unwrap()).contains("of_result("))
        .map(|f| rel(f))
        .collect();
    assert!(
        bad.is_empty(),
        "a status worked out outside the core: {bad:#?}"
    );

    let front_ends = ["crates/outpost-desktop", "crates/outpost-cli", "src-tauri"];
    let mut files = Vec::new();
    for fe in front_ends {
        rust_files(&repo().join(fe).join("src"), &mut files);
    }
    fn ui(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                ui(&p, out);
            } else if p.extension().is_some_and(|x| x == "ts" || x == "svelte") {
                out.push(p);
            }
        }
    }
    ui(&repo().join("ui/src"), &mut files);
    let bad: Vec<String> = files
        .iter()
        .filter(|f| {
            let r = rel(f);
            !r.contains(".test.")
                && !r.contains("/generated/")
                && !r.ends_with("/mock-backend.ts")
                && !r.ends_with("/demo.ts")
                && !r.ends_with("/util/words.ts")
        })
        .filter(|f| {
            // Deciding by the code: comparing with it, or matching it.
            let text = code(&fs::read_to_string(f).unwrap()).replace('"', "'");
            [
                "== 'permission_denied'",
                "case 'permission_denied'",
                "Some('permission_denied')",
            ]
            .iter()
            .any(|p| text.contains(p))
        })
        .map(|f| rel(f))
        .collect();
    assert!(
        bad.is_empty(),
        "a front end spells a failure code (copy the core's status instead): {bad:#?}"
    );
}

/// One lock helper: every program takes its `std::sync` locks through `outpost_sync`
/// (`lock`, `read`, `write`), which alone decides what a poisoned lock means. A lock taken
/// with `.unwrap()` in test code is fine: a test may panic.
#[test]
fn locks_are_taken_through_the_one_helper() {
    let mut bad = Vec::new();
    for m in members() {
        if m.ends_with("outpost-sync") {
            continue;
        }
        for f in sources(&m, &["src", "build.rs"]) {
            let flat: String = code(&fs::read_to_string(&f).unwrap())
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            for spelled in [
                "PoisonError",
                ".lock().unwrap_or_else(",
                ".read().unwrap_or_else(",
                ".write().unwrap_or_else(",
                "Err(poisoned)",
            ] {
                if flat.contains(spelled) {
                    bad.push(format!("{} spells `{spelled}`", rel(&f)));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "poison handled outside outpost_sync (use outpost_sync::lock/read/write): {bad:#?}"
    );
}

#[test]
fn the_name_matcher_sees_paths_uses_and_macros_but_not_lookalikes() {
    assert!(names("use serde::Serialize;", "serde"));
    assert!(names("let x = serde_json::json!({});", "serde_json"));
    assert!(names("tracing::info!(\"x\")", "tracing"));
    assert!(names("use thiserror;", "thiserror"));
    assert!(!names("let my_serde = 1;", "serde"));
    assert!(!names("crate::webrtc::x()", "webrtc"));
    assert!(names("rtc::ice::mdns::MulticastDnsMode", "rtc"));
    assert!(!names("webrtc::runtime::TokioRuntime", "rtc"));
    assert!(!names("\"livekit_token\"", "livekit_token"));
}

/// The text of `file` from the first `start` on to the first `end` after it.
fn between<'a>(file: &str, text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("{file}: no `{start}`"));
    let rest = &text[from + start.len()..];
    let to = rest
        .find(end)
        .unwrap_or_else(|| panic!("{file}: no `{end}` after `{start}`"));
    &rest[..to]
}

/// The app's commands: `src-tauri/commands.txt`, the one list, first; then the places that
/// still spell them beside it: backend.ts's typed `Commands` (the type checker also holds it
/// to the generated list) and ui/CONTRACT.md's sections. Each list in its own order. The
/// shell's handler, its permissions and the UI's `COMMAND_NAMES` are made from the list
/// (`the_command_list_has_one_source`).
fn command_lists() -> Vec<(String, Vec<String>)> {
    let read = |p: &str| fs::read_to_string(repo().join(p)).unwrap();
    let mut lists = Vec::new();

    let source: Vec<String> = read("src-tauri/commands.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    lists.push(("src-tauri/commands.txt".to_owned(), source));

    let ts = read("ui/src/lib/backend.ts");
    // The `Commands` interface types every `call` (all but session_subscribe, which
    // `subscribe` invokes by name).
    let iface = between("backend.ts", &ts, "export interface Commands {", "\n}");
    let mut typed: Vec<String> = iface
        .lines()
        .filter_map(|l| {
            let l = l.strip_prefix("  ")?;
            let (name, _) = l.split_once(": {")?;
            (!name.starts_with(' ')).then(|| name.to_owned())
        })
        .collect();
    assert!(
        ts.contains("invoke<SessionSnapshot>('session_subscribe'"),
        "backend.ts no longer invokes session_subscribe by name"
    );
    typed.insert(0, "session_subscribe".to_owned());
    lists.push((
        "ui/src/lib/backend.ts Commands + subscribe".to_owned(),
        typed,
    ));

    let md = read("ui/CONTRACT.md");
    let section = between("CONTRACT.md", &md, "\n## Commands\n", "\n## ");
    let documented: Vec<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("### `")?.strip_suffix('`'))
        .map(str::to_owned)
        .collect();
    lists.push(("ui/CONTRACT.md ## Commands".to_owned(), documented));
    lists
}

#[test]
fn the_command_lists_agree() {
    let lists = command_lists();
    let (first_name, first) = &lists[0];
    assert!(first.len() >= 20, "{first_name}: only {first:?}");
    let mut bad = Vec::new();
    for (name, list) in &lists {
        let mut sorted = list.clone();
        sorted.sort();
        if let Some(d) = sorted.windows(2).find(|w| w[0] == w[1]) {
            bad.push(format!("{name} lists `{}` twice", d[0]));
        }
        for c in first.iter().filter(|c| !list.contains(c)) {
            bad.push(format!("{name} lacks `{c}` (in {first_name})"));
        }
        for c in list.iter().filter(|c| !first.contains(c)) {
            bad.push(format!("{name} has `{c}`, {first_name} does not"));
        }
    }
    // Keep the others in the list's order too, for reading.
    for (name, list) in &lists[1..] {
        if bad.is_empty() && list != first {
            bad.push(format!("{name} is not in {first_name}'s order"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// The handler, the permissions and the UI's name list are made from commands.txt, not
/// written again: lib.rs includes the handler build.rs writes, build.rs reads the list, the
/// capability grants the set build.rs makes and no command by name, and the UI takes
/// `COMMAND_NAMES` from the generated contract.
#[test]
fn the_command_list_has_one_source() {
    let read = |p: &str| fs::read_to_string(repo().join(p)).unwrap();
    let lib = code(&read("src-tauri/src/lib.rs"));
    assert!(
        lib.contains(r#"include!(concat!(env!("OUT_DIR"), "/handler.rs"))"#)
            && !lib.contains("generate_handler!"),
        "lib.rs must include build.rs's handler, not list the commands"
    );
    let build = code(&read("src-tauri/build.rs"));
    assert!(
        build.contains(r#"include_str!("commands.txt")"#) && !build.contains("const COMMANDS"),
        "build.rs must read commands.txt"
    );
    let cap: serde_json::Value =
        serde_json::from_str(&read("src-tauri/capabilities/default.json")).unwrap();
    let granted: Vec<&str> = cap["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.as_str())
        .filter(|p| !p.contains(':'))
        .collect();
    assert_eq!(
        granted,
        ["app-commands"],
        "the capability grants the set only"
    );
    let ts = read("ui/src/lib/backend.ts");
    assert!(
        ts.contains("import { COMMAND_NAMES } from './generated/contract';")
            && !ts.contains("export const COMMAND_NAMES"),
        "backend.ts takes COMMAND_NAMES from the generated contract"
    );
}
