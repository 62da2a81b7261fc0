//! `outpost mcp add|list|remove|tools`: the user's MCP servers in `mcp.toml` (config
//! directory), the same file the app reads. Values of `--env`/`--header` go to the OS
//! keyring (the file only names the keyring entry); `--plain-env`/`--plain-header` values,
//! or all with `--plain`, are written into the file.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use outpost_mcp::config::{self, McpConfig};
use outpost_mcp::secrets::{self, SecretStore};
use outpost_mcp::{ConfigValue, ConnectOptions, Connection, McpError, ServerConfig, Transport};

use crate::Failure;

#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    #[command(subcommand)]
    command: McpCommand,
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
    /// Start the servers (or one) and print their tools, each as `NAME<TAB>description`
    /// under a `[server]` line. Exits with 1 if any server failed.
    Tools {
        /// Only this server.
        name: Option<String>,
        /// Where the servers' stderr logs go (default: $OUTPOST_DATA_DIR, else the
        /// platform's data dir; the logs are in `mcp-logs/`).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Seconds each server may take to start and list its tools.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
    },
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
    /// The command and its arguments, after `--` (run directly, no shell).
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Runs `outpost mcp ...`.
pub(crate) fn run(args: McpArgs) -> Result<(), Failure> {
    let path = config::config_path(&config::config_dir_from_env().map_err(invalid)?);
    match args.command {
        McpCommand::Add(a) => add(&path, a),
        McpCommand::List => list(&path),
        McpCommand::Remove { name } => remove(&path, &name),
        McpCommand::Tools {
            name,
            data_dir,
            timeout,
        } => tools(&path, name, data_dir, Duration::from_secs(timeout)),
    }
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

fn add(path: &std::path::Path, a: AddArgs) -> Result<(), Failure> {
    config::check_server_name(&a.name).map_err(invalid)?;
    let mut cfg = load(path)?;
    if cfg.servers.contains_key(&a.name) {
        return Err(Failure::Invalid(format!(
            "an MCP server named '{}' is already configured; remove it first (`outpost mcp remove {}`)",
            a.name, a.name
        )));
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
        (None, Some((command, args))) => Transport::Stdio {
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
        },
        (None, None) => {
            return Err(Failure::Invalid(
                "give the server's command after `--` (outpost mcp add NAME -- COMMAND [ARGS...]) or --url URL".into(),
            ));
        }
    };
    let server = ServerConfig {
        enabled: !a.disabled,
        transport,
    };
    let what = server.describe();
    cfg.servers.insert(a.name.clone(), server);
    if let Err(e) = cfg.save(path) {
        for entry in &stored {
            let _ = store.delete(entry);
        }
        return Err(Failure::Other(e.into()));
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
fn list(path: &std::path::Path) -> Result<(), Failure> {
    let cfg = load(path)?;
    if cfg.servers.is_empty() {
        note(&format!(
            "no MCP servers configured in {}; add one with `outpost mcp add`",
            path.display()
        ));
    }
    for (name, s) in &cfg.servers {
        let kind = match s.transport {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        };
        let state = if s.enabled { "enabled" } else { "disabled" };
        println!(
            "{name}\t{state}\t{kind}\t{}",
            crate::terminal::text(&s.describe())
        );
    }
    Ok(())
}

fn remove(path: &std::path::Path, name: &str) -> Result<(), Failure> {
    let mut cfg = load(path)?;
    let Some(server) = cfg.servers.remove(name) else {
        return Err(Failure::Invalid(format!(
            "no MCP server named '{name}' is configured"
        )));
    };
    cfg.save(path).map_err(|e| Failure::Other(e.into()))?;
    let values = match &server.transport {
        Transport::Stdio { env, .. } => env,
        Transport::Http { headers, .. } => headers,
    };
    let own = format!("mcp/{name}/");
    let store = secrets::from_env();
    for v in values.values() {
        if let ConfigValue::Secret { secret } = v
            && secret.starts_with(&own)
            && let Err(e) = store.delete(secret)
        {
            note(&format!(
                "warning: could not delete the keyring entry '{secret}': {e}"
            ));
        }
    }
    note(&format!("removed MCP server '{name}'"));
    Ok(())
}

/// A server's text on one line, safe to print.
fn one_line(s: &str) -> String {
    crate::terminal::text(&s.split_whitespace().collect::<Vec<_>>().join(" ")).into_owned()
}

fn tools(
    path: &std::path::Path,
    only: Option<String>,
    data_dir: Option<PathBuf>,
    timeout: Duration,
) -> Result<(), Failure> {
    let cfg = load(path)?;
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
    if chosen.is_empty() {
        note(&format!("no enabled MCP servers in {}", path.display()));
        return Ok(());
    }
    let data_dir = outpost_store::data_dir(data_dir.as_deref())
        .map_err(|e| Failure::Invalid(format!("data directory: {e}")))?;
    let opts = ConnectOptions {
        log_dir: Some(config::log_dir(&data_dir)),
        start_timeout: timeout,
        ..ConnectOptions::default()
    };
    let store: Arc<dyn SecretStore> = secrets::from_env();
    let rt = crate::runtime()?;
    let results = rt.block_on(async {
        let runs = chosen.iter().map(|(name, server)| {
            let (opts, store) = (opts.clone(), store.clone());
            async move {
                let conn = Connection::open(name, server, store.as_ref(), &opts).await?;
                let tools = conn.list_tools(timeout).await;
                conn.close();
                tools
            }
        });
        futures::future::join_all(runs).await
    });
    let mut failed = 0;
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
            "{failed} of {} MCP servers failed",
            chosen.len()
        )));
    }
    Ok(())
}
