//! `outpost mcp add|list|remove|trust|tools|sandbox`: the user's MCP servers in `mcp.toml`
//! (config directory), the same file the app reads. A server added or changed in the file
//! outside Outpost does not start until `trust` confirms it (`outpost_mcp::trust`). Values
//! of `--env`/`--header` go to the OS keyring (the file only names the keyring entry);
//! `--plain-env`/`--plain-header` values, or all with `--plain`, are written into the file.
//! `sandbox` shows what a stdio server may touch and changes its sandbox settings
//! (`outpost_mcp::sandbox`).

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use outpost_mcp::config::{self, McpConfig};
use outpost_mcp::sandbox::{self as sb, FolderAccess, SandboxMode};
use outpost_mcp::secrets::{self, SecretStore};
use outpost_mcp::{ConfigValue, ConnectOptions, Connection, McpError, ServerConfig, Transport};

use crate::Failure;

#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    #[command(subcommand)]
    command: McpCommand,
    /// The data directory (default: $OUTPOST_DATA_DIR, else the platform's data dir): the
    /// record of the servers you confirmed (`trust.json`) and the servers' stderr logs
    /// (`mcp-logs/`). Use the same one as `outpost connect`.
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// Add a server: `outpost mcp add NAME -- COMMAND [ARGS...]` or `outpost mcp add NAME --url URL`.
    Add(AddArgs),
    /// The configured servers: name, enabled, transport, what runs.
    List,
    /// Remove a server (and the keyring entries `add` made for it).
    Remove {
        /// The server's name.
        name: String,
    },
    /// Confirm servers added or changed in mcp.toml outside Outpost (all of them, or the
    /// named ones), so they start: prints each with what it runs. Check that first with
    /// `outpost mcp list`.
    Trust {
        /// The servers to confirm; none: every server in mcp.toml.
        names: Vec<String>,
    },
    /// Start the servers (or one) and print their tools, each as `NAME<TAB>description`
    /// under a `[server]` line. Exits with 1 if any server failed.
    Tools {
        /// Only this server.
        name: Option<String>,
        /// Seconds each server may take to start and list its tools.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
    },
    /// Sign in to a Streamable HTTP server that uses OAuth: your browser opens its login
    /// page (set $OUTPOST_BROWSER to the program that opens a URL; default xdg-open; the URL
    /// is printed too); the tokens go to the OS keyring.
    Login {
        /// The server's name.
        name: String,
        /// Seconds to wait for the login in the browser.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
    },
    /// Sign out of a server: revoke its tokens where its authorization server allows it,
    /// and delete them from the keyring.
    Logout {
        /// The server's name.
        name: String,
    },
    /// What a stdio server may touch in its sandbox (the folders it may read and write,
    /// the network, what was left out and why); with options, change its sandbox
    /// settings in mcp.toml first.
    Sandbox(SandboxArgs),
}

/// The sandbox settings of a stdio server (`add`, `sandbox`).
#[derive(Debug, Args, Default)]
struct SandboxFlags {
    /// The network: on, off, or auto (on for launchers that download packages, such as
    /// npx and uvx; off otherwise).
    #[arg(long, value_name = "on|off|auto")]
    network: Option<String>,
    /// How it may use the policy's allowed folders: read-write (the default), read, none.
    #[arg(long, value_name = "read-write|read|none")]
    folders: Option<String>,
    /// One more folder (or file) it may read (repeatable; `~/` for the home folder).
    #[arg(long = "read", value_name = "PATH")]
    read: Vec<PathBuf>,
    /// One more folder (or file) it may read and write (repeatable).
    #[arg(long = "write", value_name = "PATH")]
    write: Vec<PathBuf>,
    /// Sandboxed: on (the default), if-available (run it unsandboxed where the kernel
    /// cannot sandbox), off (never: it can reach everything you can).
    #[arg(long = "sandbox", value_name = "on|if-available|off")]
    mode: Option<String>,
}

#[derive(Debug, Args)]
struct SandboxArgs {
    /// The server's name.
    name: String,
    #[command(flatten)]
    flags: SandboxFlags,
    /// Forget its extra `read` and `write` paths (before adding those given).
    #[arg(long)]
    clear_paths: bool,
    /// The policy file whose allowed folders and denials apply (as `outpost connect
    /// --policy`); without it, the built-in default policy.
    #[arg(long)]
    policy: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct AddArgs {
    /// Name: letters, digits, '-', '_' (at most 32; no "__").
    name: String,
    /// Streamable HTTP endpoint (instead of a command).
    #[arg(long, conflicts_with_all = ["env", "plain_env", "cwd", "command"])]
    url: Option<String>,
    /// Environment variable for a stdio server, K=V (repeatable); the value goes to the
    /// OS keyring.
    #[arg(long = "env", value_name = "K=V")]
    env: Vec<String>,
    /// Environment variable whose value is not secret, written into mcp.toml (repeatable).
    #[arg(long = "plain-env", value_name = "K=V")]
    plain_env: Vec<String>,
    /// Working directory of a stdio server.
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// HTTP header for a URL server, K=V (repeatable); the value goes to the OS keyring.
    #[arg(long = "header", value_name = "K=V", requires = "url")]
    header: Vec<String>,
    /// HTTP header whose value is not secret, written into mcp.toml (repeatable).
    #[arg(long = "plain-header", value_name = "K=V", requires = "url")]
    plain_header: Vec<String>,
    /// Write every value into mcp.toml in plain text instead of the keyring.
    #[arg(long)]
    plain: bool,
    /// Add it disabled (the app will not start it).
    #[arg(long)]
    disabled: bool,
    #[command(flatten)]
    sandbox: SandboxFlags,
    /// The command and its arguments, after `--` (run directly, no shell).
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Runs `outpost mcp ...`.
pub(crate) fn run(args: McpArgs) -> Result<(), Failure> {
    let path = config::config_path(&config::config_dir_from_env().map_err(invalid)?);
    let data_dir = || {
        outpost_store::data_dir(args.data_dir.as_deref())
            .map_err(|e| Failure::Invalid(format!("data directory: {e}")))
    };
    match args.command {
        McpCommand::Add(a) => add(&path, &data_dir()?, a),
        McpCommand::List => list(&path, &data_dir()?),
        McpCommand::Remove { name } => remove(&path, &data_dir()?, &name),
        McpCommand::Trust { names } => trust(&path, &data_dir()?, &names),
        McpCommand::Tools { name, timeout } => {
            tools(&path, name, &data_dir()?, Duration::from_secs(timeout))
        }
        McpCommand::Sandbox(a) => sandbox(&path, &data_dir()?, a),
        McpCommand::Login { name, timeout } => login(&path, &name, Duration::from_secs(timeout)),
        McpCommand::Logout { name } => logout(&path, &name),
    }
}

impl SandboxFlags {
    fn given(&self) -> bool {
        self.network.is_some()
            || self.folders.is_some()
            || self.mode.is_some()
            || !self.read.is_empty()
            || !self.write.is_empty()
    }

    /// Applies the flags to `s`.
    fn apply(&self, s: &mut sb::Sandbox) -> Result<(), Failure> {
        if let Some(n) = &self.network {
            s.network = match n.as_str() {
                "on" => Some(true),
                "off" => Some(false),
                "auto" => None,
                other => {
                    return Err(Failure::Invalid(format!(
                        "--network takes on, off or auto; got '{other}'"
                    )));
                }
            };
        }
        if let Some(f) = &self.folders {
            s.folders = match f.as_str() {
                "read-write" => FolderAccess::ReadWrite,
                "read" => FolderAccess::Read,
                "none" => FolderAccess::None,
                other => {
                    return Err(Failure::Invalid(format!(
                        "--folders takes read-write, read or none; got '{other}'"
                    )));
                }
            };
        }
        if let Some(m) = &self.mode {
            s.mode = match m.as_str() {
                "on" => SandboxMode::On,
                "if-available" => SandboxMode::IfAvailable,
                "off" => SandboxMode::Off,
                other => {
                    return Err(Failure::Invalid(format!(
                        "--sandbox takes on, if-available or off; got '{other}'"
                    )));
                }
            };
            if s.mode != SandboxMode::On {
                note(
                    "warning: where it runs unsandboxed, the server can read, change and send \
                     everything you can",
                );
            }
        }
        for p in &self.read {
            if !s.read.contains(p) {
                s.read.push(p.clone());
            }
        }
        for p in &self.write {
            if !s.write.contains(p) {
                s.write.push(p.clone());
            }
        }
        s.check().map_err(Failure::Invalid)
    }
}

/// Writes `after` (read as `before`) as Outpost's own edit, confirming `confirmed`.
fn save(
    path: &std::path::Path,
    data_dir: &std::path::Path,
    before: &McpConfig,
    after: &McpConfig,
    confirmed: &[&str],
) -> Result<(), Failure> {
    outpost_mcp::edit::save(path, data_dir, before, after, confirmed)
        .map_err(|e| Failure::Other(e.into()))
}

#[allow(clippy::print_stdout)]
fn trust(
    path: &std::path::Path,
    data_dir: &std::path::Path,
    names: &[String],
) -> Result<(), Failure> {
    let cfg = load(path)?;
    if cfg.servers.is_empty() {
        note(&format!("no MCP servers configured in {}", path.display()));
        return Ok(());
    }
    outpost_mcp::trust::confirm(data_dir, path, &cfg, names).map_err(|e| match e {
        McpError::UnknownServer(_) => invalid(e),
        other => Failure::Other(other.into()),
    })?;
    for (name, s) in &cfg.servers {
        if names.is_empty() || names.contains(name) {
            println!("{name}\t{}", s.describe());
        }
    }
    note("confirmed: these servers start at the next connect");
    Ok(())
}

fn invalid(e: McpError) -> Failure {
    Failure::Invalid(e.to_string())
}

fn load(path: &std::path::Path) -> Result<McpConfig, Failure> {
    McpConfig::load(path).map_err(invalid)
}

#[allow(clippy::print_stderr)]
fn note(msg: &str) {
    eprintln!("{}", crate::terminal::lines(msg));
}

fn pair(flag: &str, s: &str) -> Result<(String, String), Failure> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(Failure::Invalid(format!(
            "--{flag} takes KEY=VALUE; got '{}'",
            s.split('=').next().unwrap_or("")
        ))),
    }
}

/// Puts every value of `pairs` in the keyring (unless `--plain`), refusing to lose them,
/// and every value of `plain_pairs` (`--plain-K`) into the file. Nothing is written to the
/// keyring before every pair parsed.
fn store_values(
    server: &str,
    flag: &str,
    pairs: &[String],
    plain_pairs: &[String],
    plain: bool,
    store: &dyn SecretStore,
    stored: &mut Vec<String>,
) -> Result<std::collections::BTreeMap<String, ConfigValue>, Failure> {
    let mut out = std::collections::BTreeMap::new();
    let secret: Vec<(String, String)> = pairs
        .iter()
        .map(|p| pair(flag, p))
        .collect::<Result<_, _>>()?;
    for p in plain_pairs {
        let (k, v) = pair(&format!("plain-{flag}"), p)?;
        if secret.iter().any(|(s, _)| *s == k) {
            return Err(Failure::Invalid(format!(
                "{k} is given with both --{flag} and --plain-{flag}"
            )));
        }
        if secrets::looks_secret(&k) {
            note(&format!(
                "warning: {k} is stored in plain text in mcp.toml (--plain-{flag})"
            ));
        }
        out.insert(k, ConfigValue::Plain(v));
    }
    for (k, v) in secret {
        if plain {
            if secrets::looks_secret(&k) {
                note(&format!(
                    "warning: {k} is stored in plain text in mcp.toml (--plain)"
                ));
            }
            out.insert(k, ConfigValue::Plain(v));
            continue;
        }
        if !store.persistent() {
            return Err(Failure::Invalid(format!(
                "the value of {k} goes to the keyring, and OUTPOST_SECRETS=memory keeps secrets \
                 only for this run, so it cannot be kept for the server. Nothing was written. \
                 Use --plain-{flag} {k}=... for a value that is not secret (written into \
                 mcp.toml), or --plain for all."
            )));
        }
        let entry = secrets::entry_name(server, &k);
        store.set(&entry, &v).map_err(|e| {
            Failure::Other(anyhow::anyhow!(
                "the value of {k} cannot be stored in the keyring: {e}. Nothing was written. \
                 Use --plain-{flag} {k}=... for a value that is not secret (written into \
                 mcp.toml), or --plain for all."
            ))
        })?;
        stored.push(entry.clone());
        out.insert(k, ConfigValue::Secret { secret: entry });
    }
    Ok(out)
}

fn add(path: &std::path::Path, data_dir: &std::path::Path, a: AddArgs) -> Result<(), Failure> {
    config::check_server_name(&a.name).map_err(invalid)?;
    let mut cfg = load(path)?;
    let before = cfg.clone();
    if cfg.servers.contains_key(&a.name) {
        return Err(Failure::Invalid(format!(
            "an MCP server named '{}' is already configured; remove it first (`outpost mcp remove {}`)",
            a.name, a.name
        )));
    }
    // A name whose tools could be named like another server's is refused first.
    let mut probe = cfg.clone();
    probe
        .servers
        .insert(a.name.clone(), ServerConfig::stdio("-", Vec::new()));
    probe.check().map_err(Failure::Invalid)?;
    if a.url.is_some() && a.sandbox.given() {
        return Err(Failure::Invalid(
            "--network, --folders, --read, --write and --sandbox are for stdio servers: an \
             HTTP server runs elsewhere"
                .into(),
        ));
    }
    let store = secrets::from_env();
    let mut stored = Vec::new();
    let transport = match (&a.url, a.command.split_first()) {
        (Some(url), _) => {
            config::check_url(url).map_err(invalid)?;
            Transport::Http {
                url: url.clone(),
                headers: store_values(
                    &a.name,
                    "header",
                    &a.header,
                    &a.plain_header,
                    a.plain,
                    store.as_ref(),
                    &mut stored,
                )?,
            }
        }
        (None, Some((command, args))) => {
            let mut sandbox = sb::Sandbox::default();
            a.sandbox.apply(&mut sandbox)?;
            Transport::Stdio {
                command: command.clone(),
                args: args.to_vec(),
                env: store_values(
                    &a.name,
                    "env",
                    &a.env,
                    &a.plain_env,
                    a.plain,
                    store.as_ref(),
                    &mut stored,
                )?,
                cwd: a.cwd.clone(),
                sandbox,
            }
        }
        (None, None) => {
            return Err(Failure::Invalid(
                "give the server's command after `--` (outpost mcp add NAME -- COMMAND [ARGS...]) or --url URL".into(),
            ));
        }
    };
    let server = ServerConfig {
        enabled: !a.disabled,
        transport,
        protocol: None,
    };
    let what = server.describe();
    cfg.servers.insert(a.name.clone(), server);
    if let Err(e) = save(path, data_dir, &before, &cfg, &[a.name.as_str()]) {
        for entry in &stored {
            let _ = store.delete(entry);
        }
        return Err(e);
    }
    for entry in &stored {
        note(&format!("stored a secret in the keyring as '{entry}'"));
    }
    note(&format!(
        "added MCP server '{}': {what} ({})",
        a.name,
        path.display()
    ));
    Ok(())
}

#[allow(clippy::print_stdout)]
fn list(path: &std::path::Path, data_dir: &std::path::Path) -> Result<(), Failure> {
    let cfg = load(path)?;
    let held = outpost_mcp::trust::unconfirmed(data_dir, path, &cfg)
        .map_err(|e| Failure::Other(e.into()))?;
    for name in &held {
        note(&format!(
            "'{name}' was added or changed outside Outpost and does not start until you \
             confirm it: `outpost mcp trust {name}`"
        ));
    }
    if cfg.servers.is_empty() {
        note(&format!(
            "no MCP servers configured in {}; add one with `outpost mcp add`",
            path.display()
        ));
    }
    let opts = sb::SandboxOptions::default();
    for (name, s) in &cfg.servers {
        let (kind, boxed) = match s.planned_reach(name, &opts) {
            Some(r) => ("stdio", sandbox_word(&r)),
            None => ("http", "remote"),
        };
        let state = if s.enabled { "enabled" } else { "disabled" };
        println!(
            "{name}\t{state}\t{kind}\t{boxed}\t{}",
            crate::terminal::text(&s.describe())
        );
    }
    Ok(())
}

/// One word for `list`: sandboxed (with the network or not), unsandboxed, or refused
/// here (the kernel cannot sandbox it and the user has not agreed).
fn sandbox_word(r: &sb::Reach) -> &'static str {
    match (&r.state, r.network) {
        (sb::ReachState::Sandboxed, false) => "sandboxed",
        (sb::ReachState::Sandboxed, true) => "sandboxed+network",
        (sb::ReachState::Unsandboxed { .. }, _) => "unsandboxed",
        (sb::ReachState::Refused { .. }, _) => "no-sandbox-here",
    }
}

/// `outpost mcp sandbox NAME [options]`: changes the settings given, then prints what the
/// server may touch.
#[allow(clippy::print_stdout)]
fn sandbox(
    path: &std::path::Path,
    data_dir: &std::path::Path,
    a: SandboxArgs,
) -> Result<(), Failure> {
    let mut cfg = load(path)?;
    let before = cfg.clone();
    let Some(server) = cfg.servers.get_mut(&a.name) else {
        return Err(Failure::Invalid(format!(
            "no MCP server named '{}' is configured",
            a.name
        )));
    };
    let Transport::Stdio { sandbox, .. } = &mut server.transport else {
        return Err(Failure::Invalid(format!(
            "'{}' is an HTTP server: it runs elsewhere, there is no sandbox to set",
            a.name
        )));
    };
    if a.flags.given() || a.clear_paths {
        if a.clear_paths {
            sandbox.read.clear();
            sandbox.write.clear();
        }
        a.flags.apply(sandbox)?;
        // Changed through Outpost: a server confirmed before stays confirmed.
        save(path, data_dir, &before, &cfg, &[])?;
        note(&format!(
            "changed the sandbox of '{}' ({})",
            a.name,
            path.display()
        ));
    }
    let mut tools = outpost_core::ToolsConfig::defaults();
    if let Some(p) = &a.policy {
        tools.policy = outpost_core::PolicySource::File(p.clone());
    }
    let perms =
        outpost_core::Permissions::new(&tools).map_err(|e| Failure::Invalid(e.to_string()))?;
    let opts = sb::SandboxOptions {
        folders: perms.mcp_roots().folders,
        gate: perms.mcp_gate(),
        ..sb::SandboxOptions::default()
    };
    let Some(r) = cfg.servers[&a.name].planned_reach(&a.name, &opts) else {
        return Err(Failure::Invalid(format!(
            "'{}' is an HTTP server: it runs elsewhere, with no sandbox here",
            a.name
        )));
    };
    println!("{}", r.summary());
    for g in r.own_grants() {
        let access = match g.access {
            sb::Access::Read => "read",
            sb::Access::ReadWrite => "read-write",
        };
        println!("{access}\t{}\t{}", g.path.display(), g.why);
    }
    if r.sandboxed() {
        println!("system\tthe system's programs and libraries, parts of /etc, /proc, /dev/null");
        println!("network\t{}", r.network_why);
    }
    for why in &r.left_out {
        println!("left out\t{why}");
    }
    for limit in &r.limits {
        println!("not held\t{limit}");
    }
    Ok(())
}

fn remove(path: &std::path::Path, data_dir: &std::path::Path, name: &str) -> Result<(), Failure> {
    let store = secrets::from_env();
    let gone =
        outpost_mcp::edit::remove(path, data_dir, name, store.as_ref()).map_err(|e| match e {
            McpError::UnknownServer(_) => {
                Failure::Invalid(format!("no MCP server named '{name}' is configured"))
            }
            other => Failure::Other(other.into()),
        })?;
    for (entry, e) in &gone.kept_secrets {
        note(&format!(
            "warning: could not delete the keyring entry '{entry}': {e}"
        ));
    }
    if let Transport::Http { url, .. } = &gone.server.transport {
        sign_out(name, url, &store);
    }
    note(&format!("removed MCP server '{name}'"));
    Ok(())
}

/// The URL of the Streamable HTTP server `name`.
fn http_url(path: &std::path::Path, name: &str) -> Result<String, Failure> {
    load(path)?
        .http_url(name)
        .map(str::to_owned)
        .map_err(invalid)
}

/// Opens `url` in the user's browser (`outpost_mcp::oauth::open_in_browser`), printing it
/// first for a machine where that does not work.
fn open_browser(url: &str) -> outpost_mcp::Result<()> {
    note(&format!(
        "opening your browser to sign in; if it does not open, visit:\n  {}",
        crate::terminal::text(url)
    ));
    outpost_mcp::oauth::open_in_browser(url)
}

fn login(path: &std::path::Path, name: &str, within: Duration) -> Result<(), Failure> {
    let url = http_url(path, name)?;
    let store = secrets::from_env();
    if !store.persistent() {
        return Err(Failure::Invalid(
            "OUTPOST_SECRETS=memory keeps nothing after this command; a sign-in needs the keyring"
                .into(),
        ));
    }
    let rt = crate::runtime()?;
    let done = rt
        .block_on(outpost_mcp::oauth::sign_in(
            name,
            &url,
            store,
            open_browser,
            within,
        ))
        .map_err(|e| Failure::Other(e.into()))?;
    note(&format!(
        "signed in to '{name}' through {} (scopes: {}); the tokens are in the keyring",
        crate::terminal::text(&done.authorization_server),
        crate::terminal::text(&done.scopes.join(" "))
    ));
    Ok(())
}

fn logout(path: &std::path::Path, name: &str) -> Result<(), Failure> {
    let url = http_url(path, name)?;
    let store = secrets::from_env();
    sign_out(name, &url, &store);
    Ok(())
}

/// Signs out of `name` and says what happened (never fails: a server being removed is
/// removed even when its authorization server cannot be reached).
fn sign_out(name: &str, url: &str, store: &Arc<dyn SecretStore>) {
    use outpost_mcp::oauth::SignedOut;
    let Ok(rt) = crate::runtime() else {
        return;
    };
    match rt.block_on(outpost_mcp::oauth::sign_out(name, url, store)) {
        Ok(SignedOut::NotSignedIn) => {}
        Ok(SignedOut::Deleted { revoked: true, .. }) => {
            note(&format!(
                "signed out of '{name}': its tokens were revoked and deleted"
            ));
        }
        Ok(SignedOut::Deleted { note: why, .. }) => note(&format!(
            "signed out of '{name}': its tokens were deleted from the keyring but not revoked ({})",
            crate::terminal::text(why.as_deref().unwrap_or("unknown"))
        )),
        Err(e) => note(&format!("warning: could not sign out of '{name}': {e}")),
    }
}

/// A server's text on one line, safe to print.
fn one_line(s: &str) -> String {
    crate::terminal::text(&s.split_whitespace().collect::<Vec<_>>().join(" ")).into_owned()
}

fn tools(
    path: &std::path::Path,
    only: Option<String>,
    data_dir: &std::path::Path,
    timeout: Duration,
) -> Result<(), Failure> {
    let cfg = load(path)?;
    // Never run a server the user has not confirmed, not even to list its tools.
    let held =
        outpost_mcp::trust::check(data_dir, path, &cfg).map_err(|e| Failure::Other(e.into()))?;
    let chosen: Vec<(String, ServerConfig)> = match &only {
        Some(n) => match cfg.servers.get(n) {
            Some(s) => vec![(n.clone(), s.clone())],
            None => {
                return Err(Failure::Invalid(format!(
                    "no MCP server named '{n}' is configured"
                )));
            }
        },
        None => cfg
            .servers
            .iter()
            .filter(|(_, s)| s.enabled)
            .map(|(n, s)| (n.clone(), s.clone()))
            .collect(),
    };
    let total = chosen.len();
    let (chosen, unconfirmed): (Vec<_>, Vec<_>) =
        chosen.into_iter().partition(|(n, _)| !held.contains(n));
    for (name, _) in &unconfirmed {
        note(&format!(
            "error: MCP server '{name}' is not started: {}",
            outpost_mcp::trust::unconfirmed_message(name)
        ));
    }
    if total == 0 {
        note(&format!("no enabled MCP servers in {}", path.display()));
        return Ok(());
    }
    // Sandboxed as at connect with the built-in policy: no allowed folder (as no roots),
    // a server's own `read`/`write` folders judged by that policy.
    let perms = outpost_core::Permissions::new(&outpost_core::ToolsConfig::defaults())
        .map_err(|e| Failure::Other(e.into()))?;
    let opts = ConnectOptions {
        log_dir: Some(config::log_dir(data_dir)),
        start_timeout: timeout,
        sandbox: sb::SandboxOptions {
            gate: perms.mcp_gate(),
            ..sb::SandboxOptions::default()
        },
        ..ConnectOptions::default()
    };
    let store: Arc<dyn SecretStore> = secrets::from_env();
    let rt = crate::runtime()?;
    let results = rt.block_on(async {
        let runs = chosen.iter().map(|(name, server)| {
            let (opts, store) = (opts.clone(), store.clone());
            async move {
                let conn = Connection::open(name, server, &store, &opts).await?;
                let tools = conn.list_tools(timeout).await;
                conn.close();
                tools
            }
        });
        futures::future::join_all(runs).await
    });
    let mut failed = unconfirmed.len();
    let mut out = std::io::stdout().lock();
    for ((name, _), result) in chosen.iter().zip(results) {
        match result {
            Ok(tools) => {
                writeln!(out, "[{name}]")?;
                for t in tools {
                    writeln!(
                        out,
                        "{}\t{}",
                        one_line(&t.outpost_name),
                        one_line(&t.description)
                    )?;
                }
            }
            Err(e) => {
                failed += 1;
                note(&format!("error: {e}"));
            }
        }
    }
    out.flush()?;
    drop(out);
    // Let the servers' process groups be stopped before the runtime goes.
    rt.shutdown_timeout(Duration::from_secs(1));
    if failed > 0 {
        return Err(Failure::Other(anyhow::anyhow!(
            "{failed} of {total} MCP servers failed"
        )));
    }
    Ok(())
}
