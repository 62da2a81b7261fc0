//! The sandbox a local (stdio) MCP server runs in: what it may read, write and reach.
//!
//! A server is started inside a Landlock domain (Linux 5.13+) plus a small seccomp filter,
//! set up between fork and exec, so the process and everything it starts can reach only:
//! - what its program needs to run, read-only: the system's programs and libraries
//!   (`/usr`, `/lib`...), a few files of `/etc` (the loader's cache, time zone, name
//!   service, TLS certificates), `/proc`, `/dev/null` and friends, and the program's own
//!   folder as derived from its command (the package folder of a script, a virtualenv,
//!   an interpreter's prefix, a launcher's cache): [`needs`];
//! - the policy's allowed folders, split around everything the policy denies exactly as
//!   the MCP roots are (`outpost-policy`'s roots), read-write unless `folders = "read"`
//!   (or none with `folders = "none"`);
//! - the extra `read = [...]` and `write = [...]` folders of its entry in `mcp.toml`,
//!   split the same way, so nothing on the secrets list is reachable even inside them;
//! - a private temporary folder (`TMPDIR`), removed when it stops;
//! - the network only when it needs it (`network = true`, or a launcher such as `npx` that
//!   downloads packages): otherwise no TCP connect or bind (Landlock, ABI 4+), and no
//!   socket of any internet family at all (seccomp), so no UDP either.
//!
//! Always: no new privileges (a setuid program runs as the user), no Unix-domain sockets
//! (the session bus and its keyring, the Docker socket, an SSH agent) and no `io_uring`
//! (which could create sockets past the filter), no leaving its process group (`setsid`,
//! `setpgid`), so the group kill and the watchdog reach everything it started; with
//! Landlock ABI 6+, no signals to processes outside the sandbox and no abstract Unix
//! sockets. docs/SECURITY.md says what the sandbox cannot hold.
//!
//! This module decides ([`plan`]: pure but for looking at files); `enforce` (Linux) turns a
//! [`Reach`] into a Landlock ruleset and a seccomp program the child applies to itself.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

#[cfg(target_os = "linux")]
pub(crate) mod enforce;
pub(crate) mod needs;

/// Whether a server runs in the sandbox (`sandbox = ...` in `mcp.toml`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Sandboxed; where the kernel cannot sandbox, not started.
    #[default]
    On,
    /// Sandboxed where the kernel can; where it cannot, run unsandboxed (what the user
    /// agreed to when Outpost told them).
    IfAvailable,
    /// Never sandboxed: it can reach whatever the user can (the user's choice).
    Off,
}

/// How a server may use the policy's allowed folders (`folders = ...` in `mcp.toml`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FolderAccess {
    /// Read and write, as the policy allows Outpost's own tools to.
    #[default]
    ReadWrite,
    /// Read only.
    Read,
    /// Not at all.
    None,
}

/// A stdio server's sandbox settings, as written in `mcp.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandbox {
    /// Sandboxed or not.
    pub mode: SandboxMode,
    /// Network: `Some` as the user set it; `None`: on for launchers that download
    /// packages (npx, uvx...), off otherwise ([`needs`]).
    pub network: Option<bool>,
    /// The allowed folders.
    pub folders: FolderAccess,
    /// More folders (or files) it may read; absolute or starting with `~`.
    pub read: Vec<PathBuf>,
    /// More folders (or files) it may read and write; absolute or starting with `~`.
    pub write: Vec<PathBuf>,
}

/// Most extra paths in `read` or `write`.
pub const MAX_EXTRA_PATHS: usize = 64;

impl Sandbox {
    /// Checks the extra paths: absolute or `~`-relative, not empty, at most
    /// [`MAX_EXTRA_PATHS`] each.
    pub fn check(&self) -> Result<(), String> {
        for (key, list) in [("read", &self.read), ("write", &self.write)] {
            if list.len() > MAX_EXTRA_PATHS {
                return Err(format!(
                    "`{key}` lists {} paths; at most {MAX_EXTRA_PATHS}",
                    list.len()
                ));
            }
            for p in list {
                let s = p.to_string_lossy();
                if !(p.is_absolute() || s == "~" || s.starts_with("~/")) {
                    return Err(format!(
                        "`{key}`: '{s}' is neither absolute nor starting with '~/'"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// `~` or `~/...` made absolute with `home`; other paths as they are.
pub fn expand_home(path: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let s = path.to_string_lossy();
    if s == "~" {
        return home.map(Path::to_path_buf);
    }
    if let Some(rest) = s.strip_prefix("~/") {
        return home.map(|h| h.join(rest));
    }
    path.is_absolute().then(|| path.to_path_buf())
}

/// What the policy lets a sandboxed server reach. Outpost's core implements it over the
/// permission policy (the same rule as the MCP roots); the host never decides it.
pub trait FolderGate: Send + Sync + std::fmt::Debug {
    /// `folders` as a server may reach them: each whole when nothing below it is denied,
    /// else split into its clean subfolders (the MCP roots' rule); and one sentence per
    /// place left out. A file is kept or left out whole.
    fn split(&self, folders: &[PathBuf]) -> (Vec<PathBuf>, Vec<String>);

    /// Why `folder` may not be reached whole (it is, or holds, or lies in, a place the
    /// policy denies), or `None`. Used for a program's own folders, which are granted
    /// whole or not at all.
    fn whole(&self, folder: &Path) -> Option<String>;
}

/// The gate used without a policy: no extra folder is granted, and a program folder only
/// when it is neither `/` nor the home folder nor one of its ancestors.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoPolicy;

impl FolderGate for NoPolicy {
    fn split(&self, folders: &[PathBuf]) -> (Vec<PathBuf>, Vec<String>) {
        let notes = folders
            .iter()
            .map(|f| {
                format!(
                    "{}: no policy to check it against, so not reachable",
                    f.display()
                )
            })
            .collect();
        (Vec::new(), notes)
    }

    fn whole(&self, folder: &Path) -> Option<String> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        if folder == Path::new("/") || home.as_deref().is_some_and(|h| h.starts_with(folder)) {
            return Some("it holds the home folder".into());
        }
        None
    }
}

/// What this kernel can enforce (probed once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI level whose features work here: 0 none, 1 files, 2 renames across
    /// folders (refer), 3 truncation, 4 TCP bind/connect, 5 device ioctls, 6 signal and
    /// abstract-socket scoping (7 adds only audit logging and reads as 6).
    pub landlock: u8,
    /// Seccomp filters (Linux 3.5+).
    pub seccomp: bool,
}

impl Support {
    /// This kernel's support, probed once per process.
    pub fn detect() -> Self {
        static SUPPORT: std::sync::OnceLock<Support> = std::sync::OnceLock::new();
        *SUPPORT.get_or_init(|| {
            #[cfg(target_os = "linux")]
            {
                Support {
                    landlock: enforce::probe_landlock(),
                    seccomp: enforce::seccomp_arch().is_some(),
                }
            }
            #[cfg(not(target_os = "linux"))]
            {
                Support::none()
            }
        })
    }

    /// No sandbox at all (another OS, or a kernel without Landlock).
    pub fn none() -> Self {
        Self {
            landlock: 0,
            seccomp: false,
        }
    }

    /// The sentences saying what this kernel cannot hold that a newer one would.
    pub fn limits(&self, network: bool) -> Vec<String> {
        let mut out = Vec::new();
        if self.landlock == 0 {
            return out;
        }
        if self.landlock < 2 {
            out.push("files cannot be moved between folders (Landlock ABI 1)".into());
        }
        if self.landlock < 3 {
            out.push(
                "it can empty (truncate) any file you may write, even outside its folders \
                 (Landlock ABI < 3)"
                    .into(),
            );
        }
        if !network && self.landlock < 4 && !self.seccomp {
            out.push("the network cannot be closed on this kernel".into());
        }
        if self.landlock < 6 {
            out.push(
                "it can signal other programs of yours (Landlock ABI < 6: no signal scoping)"
                    .into(),
            );
        }
        if !self.seccomp {
            out.push(
                "Unix sockets (the session bus, an SSH agent) and leaving its process group \
                 are not blocked (no seccomp here)"
                    .into(),
            );
        }
        out
    }
}

/// The sandbox's inputs that are not the server's own entry.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// The allowed folders as the policy lets servers reach them: already split around
    /// what the policy denies (the MCP roots' paths).
    pub folders: Vec<PathBuf>,
    /// Splits the extra `read`/`write` folders and judges program folders.
    pub gate: Arc<dyn FolderGate>,
    /// What the kernel can enforce.
    pub support: Support,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        Self {
            folders: Vec::new(),
            gate: Arc::new(NoPolicy),
            support: Support::detect(),
        }
    }
}

/// Read only, or read and write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Read (and run programs from it).
    Read,
    /// Read, write, create, delete.
    ReadWrite,
}

/// Why a place is reachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantKind {
    /// The system's programs, libraries and settings every program needs.
    System,
    /// A device such as `/dev/null`.
    Device,
    /// The server's own program (derived from its command).
    Program,
    /// A launcher's cache (npx's `~/.npm`, uvx's `~/.cache/uv`).
    Launcher,
    /// Its working folder (`cwd`).
    WorkingFolder,
    /// One of the policy's allowed folders.
    AllowedFolder,
    /// `read = [...]` or `write = [...]` in `mcp.toml`.
    Extra,
    /// Its private temporary folder.
    Temp,
}

/// One place a sandboxed server may reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The folder or file (what is below a folder too).
    pub path: PathBuf,
    /// Read or read-write.
    pub access: Access,
    /// Why.
    pub kind: GrantKind,
    /// A few words on why (the launcher, the program).
    pub why: String,
}

/// Whether a server runs sandboxed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ReachState {
    /// In the sandbox: it reaches only [`Reach::grants`].
    Sandboxed,
    /// Not sandboxed: it can reach whatever the user can.
    Unsandboxed {
        /// Why (the user turned it off, or agreed to run it where the kernel cannot).
        why: String,
    },
    /// Not started: the kernel cannot sandbox it and the user has not agreed to run it
    /// unsandboxed.
    Refused {
        /// What to tell the user.
        why: String,
    },
}

/// What a server may touch: shown to the user (Settings, the consent dialog, `outpost
/// mcp sandbox`) and, when sandboxed, enforced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reach {
    /// Sandboxed or not.
    pub state: ReachState,
    /// The places it may reach (when sandboxed), system ones first.
    pub grants: Vec<Grant>,
    /// Whether it may use the network.
    pub network: bool,
    /// Why the network is on or off.
    pub network_why: String,
    /// What was asked for but left out, and why.
    pub left_out: Vec<String>,
    /// What this kernel cannot hold.
    pub limits: Vec<String>,
    /// Variables Outpost sets for it when sandboxed (a launcher's cache of its own).
    #[serde(default)]
    pub env: Vec<(String, String)>,
}

/// Where the kernel lacks Landlock.
pub const NO_LANDLOCK: &str = "this computer's kernel cannot sandbox programs (it has no \
     Landlock, Linux 5.13 or later with Landlock enabled)";

impl Reach {
    /// Whether it runs in the sandbox.
    pub fn sandboxed(&self) -> bool {
        self.state == ReachState::Sandboxed
    }

    /// The grants a person reads first: the ones of this server, not the system's.
    pub fn own_grants(&self) -> impl Iterator<Item = &Grant> {
        self.grants
            .iter()
            .filter(|g| !matches!(g.kind, GrantKind::System | GrantKind::Device))
    }

    /// One line for the consent dialog and `outpost mcp list`: sandboxed or not, the
    /// folders it may write, read, and the network.
    pub fn summary(&self) -> String {
        match &self.state {
            ReachState::Unsandboxed { why } => {
                format!("NOT sandboxed ({why}): it can reach everything you can")
            }
            ReachState::Refused { why } => format!("not started: {why}"),
            ReachState::Sandboxed => {
                let list = |access: Access, kinds: &[GrantKind]| -> String {
                    let names: Vec<String> = self
                        .grants
                        .iter()
                        .filter(|g| g.access == access && kinds.contains(&g.kind))
                        .map(|g| g.path.display().to_string())
                        .collect();
                    if names.len() > 4 {
                        format!("{} and {} more", names[..4].join(", "), names.len() - 4)
                    } else {
                        names.join(", ")
                    }
                };
                let data = [GrantKind::AllowedFolder, GrantKind::Extra];
                let writes = list(Access::ReadWrite, &data);
                let reads = list(Access::Read, &data);
                let mut s = String::from("sandboxed: ");
                match (writes.is_empty(), reads.is_empty()) {
                    (true, true) => s.push_str("none of your folders"),
                    (false, true) => s.push_str(&format!("reads and writes {writes}")),
                    (true, false) => s.push_str(&format!("reads {reads}")),
                    (false, false) => {
                        s.push_str(&format!("reads and writes {writes}; reads {reads}"))
                    }
                }
                s.push_str(if self.network {
                    "; network on"
                } else {
                    "; no network"
                });
                s
            }
        }
    }
}

/// Where the system's programs and libraries live: every sandboxed program may read them
/// and run programs from them, when they exist.
pub const SYSTEM_PROGRAMS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/nix/store",
];

/// The other system places every sandboxed program may read, when they exist. `/etc` is
/// not granted whole: only what the loader, the C library, time zones, name lookups and
/// TLS read.
pub const SYSTEM_FILES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/default/locale",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/crypto-policies",
    "/etc/alternatives",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/debian_version",
    "/etc/magic",
    "/etc/inputrc",
    "/proc",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
    "/dev/urandom",
    "/dev/random",
];

/// Everything of the system a sandboxed program may read: [`SYSTEM_PROGRAMS`], then
/// [`SYSTEM_FILES`].
pub fn system_read() -> impl Iterator<Item = &'static str> {
    SYSTEM_PROGRAMS.iter().chain(SYSTEM_FILES).copied()
}

/// Devices a program may write (discarding output, reading zeros).
pub const SYSTEM_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Read when the network is on: the resolver's configuration behind `/etc/resolv.conf`.
pub const NETWORK_READ: &[&str] = &["/run/systemd/resolve", "/run/resolvconf"];

/// Variables naming TLS trust files a server may read (inherited from Outpost, or set in
/// its entry).
pub const TLS_TRUST_VARS: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
];

/// A stdio server's entry, as the sandbox needs it.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// The server's name.
    pub server: &'a str,
    /// Its command.
    pub command: &'a str,
    /// Its arguments.
    pub args: &'a [String],
    /// The variables its entry sets (secret ones may be left out: only `PATH`, `HOME` and
    /// the launchers' cache variables matter here).
    pub env: &'a [(String, String)],
    /// Its working folder.
    pub cwd: Option<&'a Path>,
    /// Its sandbox settings.
    pub sandbox: &'a Sandbox,
}

impl Entry<'_> {
    /// A variable as the server will see it: its entry's, else Outpost's own (for the
    /// variables it inherits).
    pub(crate) fn var(&self, key: &str) -> Option<std::ffi::OsString> {
        if let Some((_, v)) = self.env.iter().find(|(k, _)| k == key) {
            return Some(v.into());
        }
        crate::process::INHERITED_ENV
            .contains(&key)
            .then(|| std::env::var_os(key))
            .flatten()
    }

    fn home(&self) -> Option<PathBuf> {
        self.var("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
    }
}

/// What `entry` may touch under `opts` (looks at files: call it off the async threads).
pub fn plan(entry: &Entry<'_>, opts: &SandboxOptions) -> Reach {
    let sandbox = entry.sandbox;
    let derived = needs::derive(entry, opts.gate.as_ref());
    let (network, network_why) = match (sandbox.network, &derived.network) {
        (Some(true), _) => (true, "on in mcp.toml (network = true)".to_owned()),
        (Some(false), _) => (false, "off in mcp.toml (network = false)".to_owned()),
        (None, Some(why)) => (
            true,
            format!("on: {why} (network = false in mcp.toml turns it off)"),
        ),
        (None, None) => (
            false,
            "off: it does not need it (network = true in mcp.toml turns it on)".to_owned(),
        ),
    };
    let mut reach = Reach {
        state: ReachState::Sandboxed,
        grants: Vec::new(),
        network,
        network_why,
        left_out: Vec::new(),
        limits: Vec::new(),
        env: Vec::new(),
    };
    match sandbox.mode {
        SandboxMode::Off => {
            reach.state = ReachState::Unsandboxed {
                why: "the sandbox is off in mcp.toml (sandbox = \"off\")".into(),
            };
            return reach;
        }
        SandboxMode::IfAvailable if opts.support.landlock == 0 => {
            reach.state = ReachState::Unsandboxed {
                why: format!("{NO_LANDLOCK}; you agreed to run it unsandboxed"),
            };
            return reach;
        }
        SandboxMode::On if opts.support.landlock == 0 => {
            reach.state = ReachState::Refused {
                why: format!(
                    "{NO_LANDLOCK}, so Outpost runs '{}' only if you agree to run it \
                     unsandboxed, where it can reach everything you can: `outpost mcp \
                     sandbox {} --mode if-available`, or \"Run unsandboxed\" in Settings → \
                     Tool servers",
                    entry.server, entry.server
                ),
            };
            return reach;
        }
        _ => {}
    }
    let mut push = |path: PathBuf, access: Access, kind: GrantKind, why: &str| {
        reach.grants.push(Grant {
            path,
            access,
            kind,
            why: why.to_owned(),
        });
    };
    for p in system_read() {
        let path = PathBuf::from(p);
        if path.exists() {
            push(path, Access::Read, GrantKind::System, "the system");
        }
    }
    if network {
        for p in NETWORK_READ {
            let path = PathBuf::from(p);
            if path.exists() {
                push(path, Access::Read, GrantKind::System, "name lookups");
            }
        }
    }
    for var in TLS_TRUST_VARS {
        let Some(path) = entry.var(var).map(PathBuf::from) else {
            continue;
        };
        if !path.is_absolute() || !path.exists() || system_read().any(|s| path.starts_with(s)) {
            continue;
        }
        match opts.gate.whole(&path) {
            None => push(path, Access::Read, GrantKind::System, "TLS certificates"),
            Some(why) => reach
                .left_out
                .push(format!("{var}={}: {why}", path.display())),
        }
    }
    for p in SYSTEM_DEVICES {
        let path = PathBuf::from(p);
        if path.exists() {
            push(path, Access::ReadWrite, GrantKind::Device, "a device");
        }
    }
    for g in derived.grants {
        push(g.path, g.access, g.kind, &g.why);
    }
    reach.left_out.extend(derived.notes);
    reach.env = derived.env;
    let folder_access = match sandbox.folders {
        FolderAccess::ReadWrite => Some(Access::ReadWrite),
        FolderAccess::Read => Some(Access::Read),
        FolderAccess::None => None,
    };
    if let Some(access) = folder_access {
        for f in &opts.folders {
            push(
                f.clone(),
                access,
                GrantKind::AllowedFolder,
                "allowed in the policy",
            );
        }
    }
    let home = entry.home();
    for (list, access, key) in [
        (&sandbox.read, Access::Read, "read"),
        (&sandbox.write, Access::ReadWrite, "write"),
    ] {
        let mut asked = Vec::new();
        for p in list {
            match expand_home(p, home.as_deref()) {
                Some(abs) => asked.push(abs),
                None => reach.left_out.push(format!(
                    "{}: no home folder to expand '~' with",
                    p.display()
                )),
            }
        }
        if asked.is_empty() {
            continue;
        }
        let (kept, notes) = opts.gate.split(&asked);
        for k in kept {
            push(k, access, GrantKind::Extra, &format!("{key} in mcp.toml"));
        }
        reach.left_out.extend(notes);
    }
    reach.limits = opts.support.limits(network);
    reach
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[derive(Debug)]
    struct Deny(PathBuf);

    impl FolderGate for Deny {
        fn split(&self, folders: &[PathBuf]) -> (Vec<PathBuf>, Vec<String>) {
            let mut kept = Vec::new();
            let mut notes = Vec::new();
            for f in folders {
                if f.starts_with(&self.0) || self.0.starts_with(f) {
                    notes.push(format!("{}: denied", f.display()));
                } else {
                    kept.push(f.clone());
                }
            }
            (kept, notes)
        }

        fn whole(&self, folder: &Path) -> Option<String> {
            (self.0.starts_with(folder) || folder.starts_with(&self.0)).then(|| "denied".into())
        }
    }

    fn entry<'a>(sandbox: &'a Sandbox, args: &'a [String]) -> Entry<'a> {
        Entry {
            server: "s",
            command: "node",
            args,
            env: &[],
            cwd: None,
            sandbox,
        }
    }

    fn opts(landlock: u8) -> SandboxOptions {
        SandboxOptions {
            folders: vec![PathBuf::from("/data/shared")],
            gate: Arc::new(Deny(PathBuf::from("/data/private"))),
            support: Support {
                landlock,
                seccomp: true,
            },
        }
    }

    #[test]
    fn without_landlock_a_server_is_refused_unless_the_user_agreed() {
        let on = Sandbox::default();
        let r = plan(&entry(&on, &[]), &opts(0));
        let ReachState::Refused { why } = &r.state else {
            panic!("{r:?}")
        };
        assert!(
            why.contains("Landlock") && why.contains("--mode if-available"),
            "{why}"
        );
        assert!(r.summary().starts_with("not started"));
        let agreed = Sandbox {
            mode: SandboxMode::IfAvailable,
            ..Sandbox::default()
        };
        let r = plan(&entry(&agreed, &[]), &opts(0));
        assert!(matches!(r.state, ReachState::Unsandboxed { .. }), "{r:?}");
        assert!(r.summary().contains("NOT sandboxed"));
        // Where the kernel can, "if-available" is sandboxed.
        assert!(plan(&entry(&agreed, &[]), &opts(6)).sandboxed());
        let off = Sandbox {
            mode: SandboxMode::Off,
            ..Sandbox::default()
        };
        assert!(!plan(&entry(&off, &[]), &opts(6)).sandboxed());
    }

    #[test]
    fn allowed_folders_follow_the_folder_access_and_extras_pass_the_gate() {
        let sb = Sandbox {
            read: vec![PathBuf::from("/data/ref"), PathBuf::from("/data/private/x")],
            write: vec![PathBuf::from("/data/out")],
            ..Sandbox::default()
        };
        let r = plan(&entry(&sb, &[]), &opts(6));
        let find = |p: &str| r.grants.iter().find(|g| g.path == Path::new(p)).cloned();
        assert_eq!(find("/data/shared").unwrap().access, Access::ReadWrite);
        assert_eq!(find("/data/ref").unwrap().access, Access::Read);
        assert_eq!(find("/data/out").unwrap().access, Access::ReadWrite);
        assert!(find("/data/private/x").is_none());
        assert!(
            r.left_out.iter().any(|n| n.contains("/data/private/x")),
            "{r:?}"
        );
        assert!(!r.network);
        assert!(
            r.summary()
                .contains("reads and writes /data/shared, /data/out")
        );
        let read_only = Sandbox {
            folders: FolderAccess::Read,
            ..Sandbox::default()
        };
        let r = plan(&entry(&read_only, &[]), &opts(6));
        assert_eq!(
            r.grants
                .iter()
                .find(|g| g.kind == GrantKind::AllowedFolder)
                .unwrap()
                .access,
            Access::Read
        );
        let none = Sandbox {
            folders: FolderAccess::None,
            ..Sandbox::default()
        };
        let r = plan(&entry(&none, &[]), &opts(6));
        assert!(!r.grants.iter().any(|g| g.kind == GrantKind::AllowedFolder));
        assert!(r.summary().contains("none of your folders"));
    }

    #[test]
    fn extra_paths_are_checked() {
        let bad = Sandbox {
            read: vec![PathBuf::from("relative/x")],
            ..Sandbox::default()
        };
        assert!(bad.check().unwrap_err().contains("relative/x"));
        let ok = Sandbox {
            write: vec![PathBuf::from("~/out"), PathBuf::from("/tmp/x")],
            ..Sandbox::default()
        };
        ok.check().unwrap();
        assert_eq!(
            expand_home(Path::new("~/out"), Some(Path::new("/home/u"))),
            Some(PathBuf::from("/home/u/out"))
        );
        assert_eq!(expand_home(Path::new("~/out"), None), None);
    }
}
