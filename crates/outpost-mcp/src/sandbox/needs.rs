//! What a server's program needs, derived from its command: the program's own folder, its
//! interpreter's, its script's, and a launcher's cache and network.
//!
//! - The command is looked up as the server will run it (on its `PATH`, relative to its
//!   working folder), both as found and with links followed (a virtualenv's `python` is a
//!   link to the system's). A `#!` line names an interpreter (through `env` too), looked
//!   up the same way. An argument naming an existing script (`.js`, `.py`...) or program
//!   counts too.
//! - A program's folder is its package: the outermost `node_modules` it lies in, or the
//!   prefix above a `bin` folder (a virtualenv, `~/.nvm/versions/node/v22`), or a version
//!   manager's folder for its shims (`~/.pyenv`), else its own folder. It is granted
//!   read-only and whole, so only when the policy's gate finds nothing denied in or
//!   around it; otherwise only the file itself. Programs under `/usr` and the like are
//!   already readable.
//! - Launchers that download packages get the network and a cache of their own, per
//!   server, read-write: `~/.cache/outpost-mcp/NAME/...` (the launcher's variable, such as
//!   `npm_config_cache` or `UV_CACHE_DIR`, is set to it), never the user's `~/.npm` or
//!   `~/.cache/uv`: a server that could write those could plant code that the user's own
//!   `npx` or `uvx` runs later, outside any sandbox. A variable the entry sets itself is
//!   kept (and its folder judged by the gate). `npx`/`npm`, `pnpm`, `yarn`, `bunx`,
//!   `uvx`/`uv`, `pipx`, `deno`. Docker and Podman talk to a daemon through a Unix socket,
//!   which the sandbox closes: said in the notes.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::{Access, Entry, FolderGate, Grant, GrantKind, SYSTEM_PROGRAMS};

/// Script extensions an argument may carry to count as the server's program.
const SCRIPTS: &[&str] = &[
    "js", "mjs", "cjs", "ts", "mts", "py", "pyz", "rb", "pl", "php", "lua", "sh", "jar",
];

/// What the program needs.
#[derive(Debug, Default)]
pub(crate) struct Needs {
    pub grants: Vec<Grant>,
    /// Why it needs the network, when a launcher does.
    pub network: Option<String>,
    /// Variables Outpost sets for it (a launcher's own cache).
    pub env: Vec<(String, String)>,
    pub notes: Vec<String>,
}

/// A launcher: its names, the variables that place the caches it writes (each gets a
/// folder of its own, `~/.cache/outpost-mcp/NAME/VARIABLE`), and why it needs the network.
struct Launcher {
    names: &'static [&'static str],
    caches: &'static [&'static str],
    network: &'static str,
}

const LAUNCHERS: &[Launcher] = &[
    Launcher {
        names: &["npx", "npm", "npx-cli.js", "npm-cli.js"],
        caches: &["npm_config_cache"],
        network: "npx downloads the server's package from the npm registry",
    },
    Launcher {
        names: &["pnpm", "pnpx", "pnpm.cjs", "pnpx.cjs"],
        caches: &["npm_config_cache", "npm_config_store_dir", "XDG_CACHE_HOME"],
        network: "pnpm downloads the server's package",
    },
    Launcher {
        names: &["yarn", "yarn.js"],
        caches: &["YARN_CACHE_FOLDER", "npm_config_cache"],
        network: "yarn downloads the server's package",
    },
    Launcher {
        names: &["bunx", "bun"],
        caches: &["BUN_INSTALL_CACHE_DIR"],
        network: "bunx downloads the server's package",
    },
    Launcher {
        names: &["uvx", "uv"],
        caches: &["UV_CACHE_DIR", "UV_PYTHON_INSTALL_DIR", "UV_TOOL_DIR"],
        network: "uvx downloads the server's package from PyPI",
    },
    Launcher {
        names: &["pipx"],
        caches: &["PIPX_HOME"],
        network: "pipx downloads the server's package from PyPI",
    },
    Launcher {
        names: &["deno"],
        caches: &["DENO_DIR"],
        network: "deno downloads the server's modules",
    },
];

/// Version managers whose shims run programs kept elsewhere in their folder.
const MANAGERS: &[&str] = &[".pyenv", ".rbenv", ".asdf", ".nodenv", ".volta"];

struct Deriver<'a> {
    entry: &'a Entry<'a>,
    gate: &'a dyn FolderGate,
    home: Option<PathBuf>,
    cwd: PathBuf,
    needs: Needs,
}

/// What `entry`'s program needs (looks at files).
pub(crate) fn derive(entry: &Entry<'_>, gate: &dyn FolderGate) -> Needs {
    let cwd = entry
        .cwd
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"));
    let mut d = Deriver {
        entry,
        gate,
        home: entry.home(),
        cwd,
        needs: Needs::default(),
    };
    d.run();
    d.needs
}

fn is_system(p: &Path) -> bool {
    SYSTEM_PROGRAMS.iter().any(|s| p.starts_with(s))
}

fn name_of(p: &Path) -> &str {
    p.file_name().and_then(OsStr::to_str).unwrap_or_default()
}

#[cfg(unix)]
fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn executable(p: &Path) -> bool {
    p.is_file()
}

impl Deriver<'_> {
    fn run(&mut self) {
        let command = self.entry.command;
        let found = self.lookup(command);
        match &found {
            Some(p) => {
                self.program(p, 0);
                self.launcher(p);
            }
            None => self.needs.notes.push(format!(
                "'{command}' was not found on the server's PATH: its program's folders are \
                 not known"
            )),
        }
        let args = self.entry.args;
        for arg in args {
            if arg.starts_with('-') || arg.is_empty() {
                continue;
            }
            let p = Path::new(arg);
            let script = p
                .extension()
                .and_then(OsStr::to_str)
                .is_some_and(|e| SCRIPTS.contains(&e));
            if !(p.is_absolute() || script || arg.contains('/')) {
                continue;
            }
            let path = self.cwd.join(p);
            if path.is_file() && (script || executable(&path)) {
                self.program(&path, 1);
            } else if p.is_absolute() && path.is_dir() {
                // A folder given to the server (a filesystem server's, say) is data: the
                // policy decides on it, not the command line.
                self.needs.notes.push(format!(
                    "its argument {} is a folder: it reaches it only if the policy allows                      it or `read`/`write` lists it",
                    path.display()
                ));
            }
        }
        if let Some(cwd) = self.entry.cwd {
            match self.gate.whole(cwd) {
                None if cwd != Path::new("/") => self.grant(
                    cwd.to_path_buf(),
                    Access::Read,
                    GrantKind::WorkingFolder,
                    "its working folder",
                ),
                None => {}
                Some(why) => self.needs.notes.push(format!(
                    "its working folder {} is not readable: {why}",
                    cwd.display()
                )),
            }
        }
    }

    fn grant(&mut self, path: PathBuf, access: Access, kind: GrantKind, why: &str) {
        if self
            .needs
            .grants
            .iter()
            .any(|g| g.path == path && (g.access == access || g.access == Access::ReadWrite))
        {
            return;
        }
        self.needs.grants.push(Grant {
            path,
            access,
            kind,
            why: why.to_owned(),
        });
    }

    /// `command` as the server's `exec` finds it.
    fn lookup(&self, command: &str) -> Option<PathBuf> {
        if command.contains('/') {
            let p = self.cwd.join(command);
            return p.is_file().then_some(p);
        }
        let path = self.entry.var("PATH")?;
        std::env::split_paths(&path)
            .map(|dir| self.cwd.join(dir).join(command))
            .find(|p| executable(p))
    }

    /// Grants `p`'s program folder (as found, and with links followed) and follows its
    /// `#!` interpreter.
    fn program(&mut self, p: &Path, depth: u8) {
        let real = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        for candidate in [p.to_path_buf(), real.clone()] {
            if !is_system(&candidate) {
                self.program_folder(&candidate);
            }
        }
        if depth < 3
            && let Some(interpreter) = self.shebang(&real)
        {
            self.program(&interpreter, depth + 1);
        }
    }

    fn program_folder(&mut self, file: &Path) {
        let root = self.root_of(file);
        // Landlock holds the folder links lead to: grant (and show) that one, once.
        let root = std::fs::canonicalize(&root).unwrap_or(root);
        let label = format!("the program {}", file.display());
        let blocked = if root == Path::new("/")
            || self.home.as_deref().is_some_and(|h| h.starts_with(&root))
        {
            Some("it holds your home folder".to_owned())
        } else {
            self.gate.whole(&root)
        };
        match blocked {
            None => self.grant(root, Access::Read, GrantKind::Program, &label),
            Some(why) => {
                self.needs.notes.push(format!(
                    "{} is not readable whole ({why}): only {} is",
                    root.display(),
                    file.display()
                ));
                if self.gate.whole(file).is_none() {
                    self.grant(file.to_path_buf(), Access::Read, GrantKind::Program, &label);
                }
            }
        }
    }

    /// The folder that holds `file`'s package.
    fn root_of(&self, file: &Path) -> PathBuf {
        if let Some(nm) = file
            .ancestors()
            .filter(|a| name_of(a) == "node_modules")
            .last()
        {
            return nm.to_path_buf();
        }
        if let Some(home) = &self.home {
            for m in MANAGERS {
                let dir = home.join(m);
                if file.starts_with(&dir) {
                    return dir;
                }
            }
        }
        let parent = file.parent().unwrap_or(Path::new("/"));
        if name_of(parent) == "bin"
            && let Some(prefix) = parent.parent()
        {
            return prefix.to_path_buf();
        }
        parent.to_path_buf()
    }

    /// The interpreter a `#!` line names, looked up as `env` would.
    fn shebang(&self, file: &Path) -> Option<PathBuf> {
        use std::io::Read as _;
        let mut head = [0u8; 256];
        let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
        let text = std::str::from_utf8(head.get(..n)?.strip_prefix(b"#!")?).ok()?;
        let line = text.lines().next()?;
        let mut words = line.split_whitespace();
        let interpreter = PathBuf::from(words.next()?);
        if name_of(&interpreter) != "env" {
            return Some(interpreter);
        }
        let program = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
        self.lookup(program)
    }

    fn launcher(&mut self, found: &Path) {
        let real = std::fs::canonicalize(found).unwrap_or_else(|_| found.to_path_buf());
        let names = [name_of(found).to_owned(), name_of(&real).to_owned()];
        if names.iter().any(|n| n == "docker" || n == "podman") {
            self.needs.notes.push(
                "it runs a container through the Docker (or Podman) daemon's Unix socket, \
                 which the sandbox closes: if you trust it, turn its sandbox off \
                 (sandbox = \"off\")"
                    .into(),
            );
            return;
        }
        let Some(l) = LAUNCHERS
            .iter()
            .find(|l| names.iter().any(|n| l.names.contains(&n.as_str())))
        else {
            return;
        };
        self.needs.network = Some(l.network.to_owned());
        let label = format!("{}'s cache", names[0]);
        for var in l.caches {
            if let Some(own) = self
                .entry
                .env
                .iter()
                .find(|(k, _)| k == var)
                .map(|(_, v)| PathBuf::from(v))
            {
                // The entry places it itself: granted if the policy allows it whole.
                match (own.is_absolute(), self.gate.whole(&own)) {
                    (true, None) => {
                        self.grant(own, Access::ReadWrite, GrantKind::Launcher, &label);
                    }
                    (_, why) => self.needs.notes.push(format!(
                        "{var}={} is not reachable: {}",
                        own.display(),
                        why.unwrap_or_else(|| "not an absolute path".into())
                    )),
                }
                continue;
            }
            let Some(base) = self.private_cache() else {
                self.needs.notes.push(format!(
                    "no home folder: {}'s cache ({var}) has no place",
                    names[0]
                ));
                continue;
            };
            let dir = base.join(var);
            self.needs
                .env
                .push(((*var).to_owned(), dir.display().to_string()));
            self.grant(dir, Access::ReadWrite, GrantKind::Launcher, &label);
        }
    }

    /// The folder of this server's own launcher caches: `$XDG_CACHE_HOME/outpost-mcp/NAME`
    /// (else `~/.cache/...`), as Outpost's own environment says (the server's may differ).
    fn private_cache(&self) -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| self.home.as_ref().map(|h| h.join(".cache")))?;
        Some(base.join("outpost-mcp").join(self.entry.server))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::sandbox::{NoPolicy, Sandbox};

    fn write(p: &Path, text: &str, mode: u32) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
    }

    #[derive(Debug)]
    struct Gate(PathBuf);

    impl FolderGate for Gate {
        fn split(&self, _: &[PathBuf]) -> (Vec<PathBuf>, Vec<String>) {
            (Vec::new(), Vec::new())
        }
        fn whole(&self, folder: &Path) -> Option<String> {
            self.0.starts_with(folder).then(|| "denied".into())
        }
    }

    fn derive_for(command: &str, args: &[String], env: &[(String, String)]) -> Needs {
        let sandbox = Sandbox::default();
        let entry = Entry {
            server: "s",
            command,
            args,
            env,
            cwd: None,
            sandbox: &sandbox,
        };
        derive(&entry, &NoPolicy)
    }

    #[test]
    fn a_script_in_node_modules_grants_the_outermost_node_modules() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir
            .path()
            .join("app/node_modules/@x/server/node_modules/y/dist/index.js");
        write(&script, "console.log(1)", 0o644);
        let needs = derive_for("node", &[script.display().to_string()], &[]);
        let roots: Vec<&Path> = needs.grants.iter().map(|g| g.path.as_path()).collect();
        assert!(
            roots.contains(&dir.path().join("app/node_modules").as_path()),
            "{needs:?}"
        );
        assert!(needs.network.is_none());
    }

    #[test]
    fn a_venv_program_grants_its_prefix_and_follows_env_shebangs() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        let interp = venv.join("bin/mypython");
        write(&interp, "\x7fELF", 0o755);
        let tool = dir.path().join("tools/bin/server");
        write(&tool, "#!/usr/bin/env -S mypython -u\nprint()\n", 0o755);
        let path = format!(
            "{}:{}",
            venv.join("bin").display(),
            dir.path().join("tools/bin").display()
        );
        let needs = derive_for("server", &[], &[("PATH".into(), path)]);
        let roots: Vec<&Path> = needs.grants.iter().map(|g| g.path.as_path()).collect();
        assert!(roots.contains(&venv.as_path()), "{needs:?}");
        assert!(
            roots.contains(&dir.path().join("tools").as_path()),
            "{needs:?}"
        );
        assert!(needs.grants.iter().all(|g| g.access == Access::Read));
    }

    #[test]
    fn launchers_get_their_cache_and_the_network() {
        let dir = tempfile::tempdir().unwrap();
        let npx = dir.path().join("bin/npx");
        write(&npx, "#!/bin/sh\n", 0o755);
        let home = dir.path().join("home");
        let env = [
            (
                "PATH".to_owned(),
                dir.path().join("bin").display().to_string(),
            ),
            ("HOME".to_owned(), home.display().to_string()),
        ];
        let needs = derive_for("npx", &["-y".into(), "@x/y".into()], &env);
        assert!(needs.network.as_deref().unwrap().contains("npm registry"));
        let cache = needs
            .grants
            .iter()
            .find(|g| g.kind == GrantKind::Launcher)
            .unwrap();
        // Its own, never the user's ~/.npm.
        assert!(
            cache.path.ends_with("outpost-mcp/s/npm_config_cache"),
            "{cache:?}"
        );
        assert_eq!(cache.access, Access::ReadWrite);
        assert_eq!(
            needs.env,
            [(
                "npm_config_cache".to_owned(),
                cache.path.display().to_string()
            )]
        );
        assert!(!needs.grants.iter().any(|g| g.path == home.join(".npm")));
    }

    /// A program folder that holds something denied (here: the script's own folder is the
    /// home folder) is not granted whole: only the file is.
    #[test]
    fn a_program_folder_holding_a_denied_place_grants_only_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("proj/server.py");
        write(&script, "print()", 0o644);
        let sandbox = Sandbox::default();
        let args = [script.display().to_string()];
        let entry = Entry {
            server: "s",
            command: "python3",
            args: &args,
            env: &[],
            cwd: None,
            sandbox: &sandbox,
        };
        let needs = derive(&entry, &Gate(dir.path().join("proj/.env")));
        assert!(
            needs
                .grants
                .iter()
                .any(|g| g.path == script && g.kind == GrantKind::Program),
            "{needs:?}"
        );
        assert!(
            !needs
                .grants
                .iter()
                .any(|g| g.path == dir.path().join("proj"))
        );
        assert!(needs.notes.iter().any(|n| n.contains("not readable whole")));
    }
}
