//! The policy model's unit tests.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use std::path::{Path, PathBuf};

fn ctx() -> PolicyContext {
    PolicyContext {
        home: PathBuf::from("/home/u"),
        protected: vec![PathBuf::from("/home/u/.config/outpost")],
    }
}

fn eval(policy: &Policy, tool: &str, hints: ToolHints, path: Option<&str>) -> Verdict {
    let compiled = CompiledPolicy::new(policy.clone(), &ctx());
    let paths: Vec<PathBuf> = path.map(PathBuf::from).into_iter().collect();
    let folder = paths
        .first()
        .and_then(|p| p.parent())
        .map(Path::to_path_buf);
    compiled.evaluate(
        &AccessRequest {
            tool,
            server: None,
            hints,
            paths: &paths,
            folder: folder.as_deref(),
            force_ask: None,
        },
        &ConversationGrants::default(),
    )
}

/// What the policy says to read_local_file reading `path`.
fn read(policy: &Policy, path: &str) -> Verdict {
    eval(policy, "read_local_file", ToolHints::READ_ONLY, Some(path))
}

/// A folder rule for every tool.
fn folder(path: &str, access: FolderAccess) -> FolderRule {
    FolderRule {
        path: path.into(),
        access,
        tools: None,
    }
}

fn docs_policy() -> Policy {
    Policy {
        folders: vec![folder("~/docs", FolderAccess::Allow)],
        ..Policy::default()
    }
}

#[test]
fn read_only_tools_run_inside_scopes_and_ask_outside() {
    let p = docs_policy();
    let v = read(&p, "/home/u/docs/a.txt");
    assert!(
        matches!(v, Verdict::Allow(Allowance::Folder { .. })),
        "{v:?}"
    );
    let v = read(&p, "/home/u/docs-evil/a.txt");
    assert!(
        matches!(v, Verdict::Ask { .. }),
        "prefix trick must not match: {v:?}"
    );
    let v = read(&p, "/home/u/a.txt");
    match v {
        Verdict::Ask { options, .. } => assert!(options.contains(&Decision::AlwaysAllow)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn secrets_win_over_scopes_and_tool_allow_unless_excepted() {
    let mut p = docs_policy();
    p.folders.push(folder("~", FolderAccess::Allow));
    p.tools.insert("read_local_file".into(), Rule::Allow);
    for path in [
        "/home/u/.ssh/id_rsa",
        "/home/u/docs/.env",
        "/home/u/docs/x.pem",
    ] {
        let v = read(&p, path);
        match v {
            Verdict::Deny { by, .. } => assert_eq!(by, Decider::SecretsList),
            other => panic!("{path}: {other:?}"),
        }
    }
    p.exceptions.push(Exception {
        path: "~/docs/.env".into(),
    });
    let v = read(&p, "/home/u/docs/.env");
    assert!(matches!(v, Verdict::Allow(_)), "{v:?}");
    let v = read(&p, "/home/u/docs/.env.local");
    assert!(
        matches!(v, Verdict::Deny { .. }),
        "exception is per path: {v:?}"
    );
}

#[test]
fn widenings_name_what_allows_more_and_nothing_else() {
    let mut old = docs_policy();
    old.tools.insert("read_local_file".into(), Rule::Allow);
    old.tools.insert("web_fetch".into(), Rule::Ask);
    old.mcp_servers.insert("files".into(), Rule::Allow);
    old.folders
        .push(folder("~/docs/private", FolderAccess::Deny));
    assert!(old.widenings(&old).is_empty());
    let mut narrower = old.clone();
    narrower.tools.insert("read_local_file".into(), Rule::Ask);
    narrower.tools.insert("web_fetch".into(), Rule::Deny);
    narrower.mcp_servers.insert("files".into(), Rule::Deny);
    narrower.folders.retain(|f| f.access == FolderAccess::Deny);
    narrower.consent_timeout_secs = 5;
    assert!(
        old.widenings(&narrower).is_empty(),
        "{:?}",
        old.widenings(&narrower)
    );
    let mut wider = old.clone();
    wider.allow_system_paths = true;
    wider.tools.insert("write_file".into(), Rule::Ask);
    wider.tools.remove("web_fetch");
    wider.mcp_servers.insert("evil".into(), Rule::Allow);
    wider.folders.retain(|f| f.access == FolderAccess::Allow);
    wider.folders.push(folder("~", FolderAccess::Allow));
    wider.exceptions.push(Exception {
        path: "~/.ssh".into(),
    });
    let said = old.widenings(&wider).join("\n");
    for what in [
        "allow_system_paths",
        "\"write_file\": (no rule) → ask",
        "\"web_fetch\": ask → (no rule)",
        "[mcp_servers] \"evil\"",
        "a new allowed folder: ~",
        "no longer denied: ~/docs/private",
        "exception to the secrets list: ~/.ssh",
    ] {
        assert!(said.contains(what), "{what} missing:\n{said}");
    }
}

/// Issue 30, finding 3: Outpost's own settings and data are out of reach of every tool,
/// reads and writes, whatever the policy says (allowed folder, tool allowed, an
/// `[[exceptions]]` entry naming them).
#[test]
fn outpost_s_own_folders_are_denied_even_with_an_exception() {
    let mut p = docs_policy();
    p.folders.push(folder("~", FolderAccess::Allow));
    p.tools.insert("read_local_file".into(), Rule::Allow);
    p.tools.insert("write_file".into(), Rule::Ask);
    p.exceptions.push(Exception {
        path: "~/.config/outpost".into(),
    });
    let write = ToolHints {
        destructive: true,
        ..ToolHints::default()
    };
    for (tool, hints) in [
        ("read_local_file", ToolHints::READ_ONLY),
        ("write_file", write),
    ] {
        let v = eval(&p, tool, hints, Some("/home/u/.config/outpost/mcp.toml"));
        match v {
            Verdict::Deny { by, reason } => {
                assert_eq!(by, Decider::SecretsList);
                assert!(reason.contains("Outpost's own settings"), "{reason}");
            }
            other => panic!("{tool}: {other:?}"),
        }
    }
}

#[test]
fn deny_wins_over_allow() {
    let mut p = docs_policy();
    p.folders.push(folder("~/docs/private", FolderAccess::Deny));
    let v = read(&p, "/home/u/docs/private/a");
    assert!(matches!(v, Verdict::Deny { .. }), "{v:?}");
    p.tools.insert("read_local_file".into(), Rule::Deny);
    let v = read(&p, "/home/u/docs/a");
    assert!(matches!(v, Verdict::Deny { .. }), "{v:?}");
}

#[test]
fn destructive_tools_are_off_then_ask_every_time_without_always_allow() {
    let w = ToolHints {
        destructive: true,
        ..ToolHints::default()
    };
    let mut p = docs_policy();
    assert!(matches!(
        eval(&p, "write_file", w, Some("/home/u/docs/a")),
        Verdict::Deny { .. }
    ));
    p.tools.insert("write_file".into(), Rule::Allow);
    match eval(&p, "write_file", w, Some("/home/u/docs/a")) {
        Verdict::Ask { options, .. } => {
            assert!(!options.contains(&Decision::AlwaysAllow));
            assert!(!options.contains(&Decision::AllowForConversation));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn explicit_ask_always_asks_even_inside_scopes() {
    let mut p = docs_policy();
    p.tools.insert("read_local_file".into(), Rule::Ask);
    let v = read(&p, "/home/u/docs/a");
    assert!(matches!(v, Verdict::Ask { .. }), "{v:?}");
}

#[test]
fn system_dirs_are_refused_by_default() {
    let p = Policy {
        tools: [("read_local_file".to_owned(), Rule::Allow)].into(),
        ..Policy::default()
    };
    for path in ["/proc/self/environ", "/sys/kernel", "/dev/zero"] {
        assert!(matches!(read(&p, path), Verdict::Deny { .. }));
    }
}

#[test]
fn conversation_grants_cover_their_folder_only() {
    let compiled = CompiledPolicy::new(Policy::default(), &ctx());
    let mut grants = ConversationGrants::default();
    grants.grant("read_local_file", Some(Path::new("/home/u/notes")));
    let ask = |p: &str| {
        let paths = vec![PathBuf::from(p)];
        compiled.evaluate(
            &AccessRequest {
                tool: "read_local_file",
                server: None,
                hints: ToolHints::READ_ONLY,
                paths: &paths,
                folder: None,
                force_ask: None,
            },
            &grants,
        )
    };
    assert_eq!(
        ask("/home/u/notes/a"),
        Verdict::Allow(Allowance::Conversation)
    );
    assert!(matches!(ask("/home/u/notes2/a"), Verdict::Ask { .. }));
}

#[cfg(unix)]
#[test]
fn missing_paths_resolve_through_the_links_that_exist() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join("secret/sub")).unwrap();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("docs/a.txt"), "a").unwrap();
    symlink(root.join("secret"), root.join("docs/to_secret")).unwrap();
    symlink("../secret/key", root.join("docs/dangling")).unwrap();
    symlink("loop2", root.join("docs/loop1")).unwrap();
    symlink("loop1", root.join("docs/loop2")).unwrap();
    let c = |rel: &str| canonical_or_clean(&root.join(rel));
    // Existing paths: exactly canonicalize.
    assert_eq!(c("docs/to_secret/sub"), root.join("secret/sub"));
    // A missing file under a symlinked folder is where the link leads.
    assert_eq!(c("docs/to_secret/nope/x"), root.join("secret/nope/x"));
    // A dangling link is followed to where it would lead.
    assert_eq!(c("docs/dangling"), root.join("secret/key"));
    assert_eq!(c("docs/dangling/more"), root.join("secret/key/more"));
    // `..` after a folder that does not exist is lexical; through a link, it is real.
    assert_eq!(c("docs/nope/../a.txt"), root.join("docs/a.txt"));
    assert_eq!(c("docs/nope/../../secret/x"), root.join("secret/x"));
    assert_eq!(c("docs/to_secret/../x"), root.join("x"));
    // Below a file, and link loops, end without hanging.
    assert_eq!(c("docs/a.txt/x"), root.join("docs/a.txt/x"));
    assert!(c("docs/loop1").starts_with(root.join("docs")));
    // Relative paths are only cleaned.
    assert_eq!(
        canonical_or_clean(Path::new("a/./b/../c")),
        PathBuf::from("a/c")
    );
}

#[test]
fn check_names_the_bad_entry() {
    let mut p = Policy::default();
    p.folders.push(folder("relative/dir", FolderAccess::Allow));
    let e = p.check().unwrap_err();
    assert!(e.contains("folders[0].path"), "{e}");
    p.folders.clear();
    p.consent_timeout_secs = 0;
    assert!(p.check().unwrap_err().contains("consent_timeout_secs"));
}

fn eval_mcp(policy: &Policy, tool: &str, server: &str, grants: &ConversationGrants) -> Verdict {
    let compiled = CompiledPolicy::new(policy.clone(), &ctx());
    compiled.evaluate(
        &AccessRequest {
            tool,
            server: Some(server),
            // Whatever the server claims, the hints of an MCP tool change nothing.
            hints: ToolHints {
                read_only: true,
                destructive: true,
                open_world: false,
                asks_every_time: false,
            },
            paths: &[],
            folder: None,
            force_ask: None,
        },
        grants,
    )
}

#[test]
fn mcp_tools_ask_by_default_and_follow_tool_then_server_rules_with_deny_winning() {
    let none = ConversationGrants::default();
    let t = "mcp__time__now";
    let mut p = Policy::default();
    let v = eval_mcp(&p, t, "time", &none);
    assert!(
        matches!(&v, Verdict::Ask { options, reason } if options.contains(&Decision::AlwaysAllow) && reason.contains("'time'")),
        "{v:?}"
    );
    p.mcp_servers.insert("time".into(), Rule::Allow);
    assert_eq!(
        eval_mcp(&p, t, "time", &none),
        Verdict::Allow(Allowance::ToolRule)
    );
    // Another server's rule does not apply.
    assert!(matches!(
        eval_mcp(&p, "mcp__other__x", "other", &none),
        Verdict::Ask { .. }
    ));
    // The tool's own rule comes before its server's.
    p.tools.insert(t.into(), Rule::Ask);
    assert!(matches!(
        eval_mcp(&p, t, "time", &none),
        Verdict::Ask { .. }
    ));
    // Deny wins, whichever level says it.
    p.tools.insert(t.into(), Rule::Allow);
    p.mcp_servers.insert("time".into(), Rule::Deny);
    let v = eval_mcp(&p, t, "time", &none);
    assert!(
        matches!(&v, Verdict::Deny { reason, .. } if reason.contains("MCP server 'time'")),
        "{v:?}"
    );
    p.mcp_servers.insert("time".into(), Rule::Allow);
    p.tools.insert(t.into(), Rule::Deny);
    assert!(matches!(
        eval_mcp(&p, t, "time", &none),
        Verdict::Deny { .. }
    ));
    // A conversation grant covers the tool (no paths), not its neighbours.
    let mut grants = ConversationGrants::default();
    grants.grant("mcp__srv__a", None);
    let p = Policy::default();
    assert_eq!(
        eval_mcp(&p, "mcp__srv__a", "srv", &grants),
        Verdict::Allow(Allowance::Conversation)
    );
    assert!(matches!(
        eval_mcp(&p, "mcp__srv__b", "srv", &grants),
        Verdict::Ask { .. }
    ));
}

#[test]
fn the_effective_mcp_rule_is_what_evaluate_does_for_every_combination() {
    let none = ConversationGrants::default();
    let t = "mcp__srv__a";
    let levels = [None, Some(Rule::Allow), Some(Rule::Ask), Some(Rule::Deny)];
    for own in levels {
        for server in levels {
            let mut p = Policy::default();
            if let Some(r) = own {
                p.tools.insert(t.into(), r);
            }
            if let Some(r) = server {
                p.mcp_servers.insert("srv".into(), r);
            }
            let want = match eval_mcp(&p, t, "srv", &none) {
                Verdict::Allow(_) => Rule::Allow,
                Verdict::Ask { .. } => Rule::Ask,
                Verdict::Deny { .. } => Rule::Deny,
            };
            assert_eq!(p.mcp_tool_rule(t, "srv"), want, "{own:?} {server:?}");
        }
    }
}

#[test]
fn the_mcp_servers_table_reads_from_toml_and_rejects_empty_names() {
    let p: Policy = toml::from_str("[mcp_servers]\ntime = \"allow\"\nfs = \"deny\"\n").unwrap();
    assert_eq!(p.mcp_servers.get("time"), Some(&Rule::Allow));
    assert_eq!(p.mcp_servers.get("fs"), Some(&Rule::Deny));
    assert!(p.check().is_ok());
    let p: Policy = toml::from_str("[mcp_servers]\n\" \" = \"allow\"\n").unwrap();
    assert!(p.check().unwrap_err().contains("mcp_servers"));
    assert!(toml::from_str::<Policy>("[mcp_servers]\ntime = \"sometimes\"\n").is_err());
}
