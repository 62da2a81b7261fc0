//! Fuzzes path resolution and the policy together, the way the dispatcher runs them: a
//! fuzzer-chosen path goes into a file tool's parameters, `prepare` expands and resolves it
//! (`outpost_tools::paths`), and the policy evaluates what `prepare` says the call touches.
//!
//! The invariant: the policy never permits a call outside the allowed folders or inside
//! the secrets list. Whenever the verdict is "allow", every path the call touches must be
//! inside a folder the rule that allowed it covers (or the conversation grant's folder),
//! outside the denied folder, and not a secret; and so must the place the raw path really
//! leads to (`std::fs::canonicalize`), so a resolution that disagrees with the file system
//! is caught too. A read through a hard link to a secret file must not be allowed either.
//!
//! The home is a fixed folder under the temporary directory, made once per process (and
//! reused if present), with an allowed folder `work`, a denied `work/private`, secrets
//! (`.ssh`, `.aws`, Outpost's own config), and symlinks and a hard link leading out of
//! `work` into them. Input: byte 0 picks the tool, byte 1 the policy variant and whether
//! a conversation grant (read_local_file in `~/outside`) exists, the rest is the path (UTF-8).
#![no_main]

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use outpost_policy::{
    AccessRequest, Allowance, CompiledPolicy, ConversationGrants, FolderAccess, FolderRule, Policy,
    PolicyContext, Rule, SecretsList, Verdict,
};
use outpost_protocol::{Map, Value};
use outpost_tools::{Launcher, Registry, ToolEnv, builtin_registry, paths};

/// Where the fixture lives; fixed so that seeds can name absolute paths in it.
const ROOT: &str = "/tmp/outpost-fuzz-paths";

struct NoLaunch;

impl Launcher for NoLaunch {
    fn open(&self, target: &OsStr) -> std::io::Result<()> {
        panic!("prepare launched {target:?}");
    }
}

struct Fixture {
    home: PathBuf,
    registry: Registry,
    env: ToolEnv,
    /// [plain, with read_local_file = "allow"]
    policies: [CompiledPolicy; 2],
    secrets: SecretsList,
    /// (device, inode) of every secret file, to catch hard links to them.
    secret_inodes: HashSet<(u64, u64)>,
}

/// The tools that take a path, and the parameter it goes in.
const TOOLS: &[(&str, &str)] = &[
    ("read_local_file", "file_path"),
    ("list_directory", "path"),
    ("search_files", "root"),
    ("file_info", "path"),
    ("write_file", "file_path"),
    ("open_path", "path"),
];

fn build(root: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::symlink;
    let h = root.join("home");
    for d in [
        "work/sub/deep",
        "work/private",
        ".ssh",
        ".aws",
        ".config/outpost",
        "outside",
    ] {
        std::fs::create_dir_all(h.join(d))?;
    }
    for (f, text) in [
        ("work/a.txt", "a"),
        ("work/sub/b.txt", "b"),
        ("work/private/p.txt", "p"),
        ("work/.env", "TOKEN=1"),
        ("work/server.key", "key"),
        (".ssh/id_rsa", "secret key"),
        (".ssh/config", "Host x"),
        (".aws/credentials", "[default]"),
        (".config/outpost/settings.toml", "x = 1"),
        ("outside/x.txt", "x"),
    ] {
        std::fs::write(h.join(f), text)?;
    }
    for (link, target) in [
        ("work/to_ssh", "../.ssh"),
        ("work/abs_ssh", &*h.join(".ssh").to_string_lossy()),
        ("work/up", ".."),
        ("work/root", "/"),
        ("work/loop", "loop"),
        ("work/self", "."),
        ("work/dangling", "../.ssh/new_key"),
        ("work/sub/back", "../../.ssh/id_rsa"),
        ("work/to_outside", "../outside"),
        ("work/to_private", "private"),
        ("work/chain1", "chain2"),
        ("work/chain2", "../.aws"),
        ("work/to_config", "../.config/outpost"),
        (".ssh/to_work", "../work"),
        ("outside/to_work", "../work"),
    ] {
        symlink(target, h.join(link))?;
    }
    std::fs::hard_link(h.join(".ssh/id_rsa"), h.join("work/hl"))?;
    Ok(())
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let root = Path::new(ROOT);
        if !root.join("home/work/hl").exists() {
            // Made aside and renamed into place, so two processes never see half of it.
            let tmp = PathBuf::from(format!("{ROOT}.tmp-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&tmp);
            build(&tmp).expect("the fuzz home can be made");
            if std::fs::rename(&tmp, root).is_err() {
                let _ = std::fs::remove_dir_all(&tmp);
            }
        }
        let home = std::fs::canonicalize(root.join("home")).expect("the fuzz home exists");
        let ctx = PolicyContext::new(&home, vec![home.join(".config/outpost")]);
        let folder = |path: &str, access, tools: Option<&[&str]>| FolderRule {
            path: path.into(),
            access,
            tools: tools.map(|t| t.iter().map(|s| (*s).to_owned()).collect()),
        };
        let base = Policy {
            folders: vec![
                folder("~/work", FolderAccess::Allow, None),
                folder("~/work/private", FolderAccess::Deny, None),
                folder("~/outside", FolderAccess::Allow, Some(&["list_directory"])),
            ],
            tools: [("write_file".to_owned(), Rule::Ask)].into_iter().collect(),
            ..Policy::default()
        };
        let mut tool_allow = base.clone();
        tool_allow
            .tools
            .insert("read_local_file".into(), Rule::Allow);
        let secret_inodes = [".ssh/id_rsa", ".ssh/config", ".aws/credentials"]
            .iter()
            .map(|f| {
                let m = std::fs::metadata(home.join(f)).expect("secret file exists");
                (m.dev(), m.ino())
            })
            .collect();
        Fixture {
            registry: builtin_registry().expect("the built-in tools register"),
            env: ToolEnv {
                home: home.clone(),
                launcher: Arc::new(NoLaunch),
            },
            policies: [
                CompiledPolicy::new(base, &ctx),
                CompiledPolicy::new(tool_allow, &ctx),
            ],
            secrets: SecretsList::new(&ctx.home, &ctx.protected),
            secret_inodes,
            home,
        }
    })
}

/// Why `p` must never be touched without asking, if it must not.
fn forbidden(fx: &Fixture, p: &Path) -> Option<String> {
    if let Some(why) = fx.secrets.matches(p) {
        return Some(format!("on the secrets list ({why})"));
    }
    // Independent of the list's own matching: the fixture's secrets by place and name.
    for d in [".ssh", ".aws", ".config/outpost"] {
        if p.starts_with(fx.home.join(d)) {
            return Some(format!("inside ~/{d}"));
        }
    }
    let name = p
        .file_name()
        .map(OsStr::to_string_lossy)
        .unwrap_or_default();
    if name.starts_with(".env") || name.ends_with(".key") {
        return Some("a secret file name".into());
    }
    if p.starts_with(fx.home.join("work/private")) {
        return Some("inside the denied folder ~/work/private".into());
    }
    None
}

/// Whether the allowance covers `p` for `tool`.
fn covered(fx: &Fixture, allowance: &Allowance, tool: &str, p: &Path, granted: bool) -> bool {
    let work = fx.home.join("work");
    let outside = fx.home.join("outside");
    match allowance {
        Allowance::Folder { path } => {
            (path == &work && p.starts_with(&work))
                || (tool == "list_directory" && path == &outside && p.starts_with(&outside))
        }
        Allowance::Conversation => granted && tool == "read_local_file" && p.starts_with(&outside),
        // Only the second policy variant allows a tool outright, and only this one.
        Allowance::ToolRule => tool == "read_local_file",
        // A harmless tool touches no path at all.
        Allowance::Default => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let [tool_byte, mode, rest @ ..] = data else {
        return;
    };
    let Ok(raw) = std::str::from_utf8(rest) else {
        return;
    };
    let fx = fixture();
    let (tool, field) = TOOLS[usize::from(*tool_byte) % TOOLS.len()];
    let variant = usize::from(mode & 1);
    let granted = mode & 2 != 0;
    let policy = &fx.policies[variant];

    let mut params = Map::new();
    params.insert(field.into(), Value::String(raw.to_owned()));
    if tool == "write_file" {
        params.insert("content".into(), Value::String("x".into()));
        params.insert("mode".into(), Value::String("append".into()));
    }
    let Some(entry) = fx.registry.get(tool) else {
        return;
    };
    if entry.validate(&Value::Object(params.clone())).is_err() {
        return;
    }
    if policy.tool_denied(tool, None, entry.spec.hints).is_some() {
        return;
    }
    let Ok(prepared) = entry.tool.prepare(params, &fx.env) else {
        return;
    };
    let access = prepared.access;
    let mut grants = ConversationGrants::default();
    if granted {
        grants.grant("read_local_file", Some(&fx.home.join("outside")));
    }
    let verdict = policy.evaluate(
        &AccessRequest {
            tool,
            server: None,
            hints: entry.spec.hints,
            paths: &access.paths,
            folder: access.folder.as_deref(),
            force_ask: access.force_ask.as_deref(),
        },
        &grants,
    );
    let Verdict::Allow(allowance) = verdict else {
        return;
    };
    assert!(
        !access.paths.is_empty(),
        "{tool} {raw:?}: allowed ({allowance:?}) with no path to check"
    );
    for p in &access.paths {
        if let Some(why) = forbidden(fx, p) {
            panic!(
                "{tool} {raw:?}: allowed ({allowance:?}) {} which is {why}",
                p.display()
            );
        }
        assert!(
            covered(fx, &allowance, tool, p, granted),
            "{tool} {raw:?}: allowed ({allowance:?}) {} outside what the rule covers",
            p.display()
        );
    }
    // Where the raw path really leads, by the file system's own resolution.
    if tool == "write_file" {
        return; // asks every time: never reaches here
    }
    let Ok(expanded) = paths::expand(&fx.home, field, raw) else {
        panic!("{tool} {raw:?}: allowed although it does not expand");
    };
    if let Ok(real) = std::fs::canonicalize(&expanded) {
        if let Some(why) = forbidden(fx, &real) {
            panic!(
                "{tool} {raw:?}: allowed ({allowance:?}) but leads to {} which is {why}",
                real.display()
            );
        }
        assert!(
            covered(fx, &allowance, tool, &real, granted),
            "{tool} {raw:?}: allowed ({allowance:?}) but leads to {} outside what the rule covers",
            real.display()
        );
        if tool == "read_local_file"
            && let Ok(m) = std::fs::metadata(&real)
        {
            assert!(
                !fx.secret_inodes.contains(&(m.dev(), m.ino())),
                "{tool} {raw:?}: allowed ({allowance:?}) a read of a secret file through the \
                 hard link {}",
                real.display()
            );
        }
    }
});
