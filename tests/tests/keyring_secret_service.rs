//! The keyring path for real: a Secret Service daemon (GNOME Keyring) in a private D-Bus
//! session, unlocked with a test password, and the desktop backend's `Keyring` store (and
//! outpost-mcp's) talking to it.
//!
//! The `keyring` crate finds the bus through `DBUS_SESSION_BUS_ADDRESS` in the process
//! environment, which a test may not change under running threads. So this test has no
//! libtest harness (`harness = false`): `main` starts the bus and the daemon, then runs
//! each step as a child process of this same binary (`OUTPOST_KEYRING_STEP=name`) with the
//! bus address in its environment. Separate processes are also the point of the test: a
//! token stored by one is read back by another.
//!
//! Steps: the LiveKit token is stored, read, replaced and deleted through the Desktop API
//! (`set_secret` / `settings().has_token` / `clear_secret`); a second process reads it
//! straight from the Secret Service; a session connects to an in-process outpost-room on
//! loopback with the token taken from the keyring (the reference assistant asks for one
//! calculator call); the token is then cleared. Finally every byte of the profile
//! (settings.toml, policy.toml, the SQLite files with their -wal/-shm, the step logs at
//! debug level) is searched for the tokens. The same store/read/replace/delete runs over
//! outpost-mcp's keyring store. Then an OAuth sign-in (issue 28) through the desktop
//! backend's `mcp_server_sign_in`, against oidc-provider and the TypeScript SDK's
//! bearer-auth MCP server (tests/mcp/oauth) with Chromium as the browser: the tokens land
//! in the keyring, a second process lists the server's tools with them, removing the
//! server revokes and deletes them, and the final search looks for them too (rmcp's own
//! log at debug level included). The CLI does the same: `outpost mcp login` through the
//! browser, `outpost mcp tools` with the stored sign-in, `outpost mcp logout` revoking it,
//! after which the server needs a sign-in again; its tokens are searched for as well.
//!
//! Needs `dbus-daemon`, `dbus-send` and `gnome-keyring-daemon` (scripts/setup.sh installs
//! them); without them the test fails and says so.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::io::{BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use outpost_desktop::contract::AppEvent;
use outpost_desktop::paths::Paths;
use outpost_desktop::secrets::{Keyring, SecretStore as _};
use outpost_desktop::{Desktop, Notifier};
use outpost_tests::keyring::SecretService;
use outpost_tests::oauth::OAuthServers;

const STEP_ENV: &str = "OUTPOST_KEYRING_STEP";
const PROFILE_ENV: &str = "OUTPOST_KEYRING_PROFILE";
const TOKEN_A_ENV: &str = "OUTPOST_KEYRING_TOKEN_A";
const TOKEN_B_ENV: &str = "OUTPOST_KEYRING_TOKEN_B";
const SECRET: &str = "livekit_token";
const ROOM: &str = "keyring-e2e";

fn main() -> ExitCode {
    let r = match std::env::var(STEP_ENV) {
        Ok(step) => child(&step),
        Err(_) => parent(),
    };
    match r {
        Ok(()) => {
            if std::env::var(STEP_ENV).is_err() {
                println!("test keyring_secret_service ... ok");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("keyring_secret_service FAILED: {e:#}");
            ExitCode::FAILURE
        }
    }
}

// --- the parent: bus, daemon, steps, grep ------------------------------------------------

/// Runs one step in a child process; returns what it printed. Its stderr (the tracing log)
/// goes into the profile's `logs/`, so the final search covers it.
fn step(
    ss: &SecretService,
    profile: &Path,
    name: &str,
    env: &[(&str, &str)],
) -> anyhow::Result<String> {
    let logs = profile.join("logs");
    std::fs::create_dir_all(&logs)?;
    let log = logs.join(format!("{name}.log"));
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.env(STEP_ENV, name)
        .env(PROFILE_ENV, profile)
        .env("DBUS_SESSION_BUS_ADDRESS", &ss.address)
        .env("HOME", profile.join("home"))
        .env("XDG_RUNTIME_DIR", ss.home.join("run"))
        .env(
            "RUST_LOG",
            "outpost_desktop=debug,outpost_core=debug,outpost_livekit=debug,\
             outpost_agent=debug,outpost_store=debug,outpost_mcp=debug,rmcp=debug,info",
        )
        .env_remove("OUTPOST_LIVEKIT_TOKEN")
        .env_remove("OUTPOST_SECRETS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log)?);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("spawning step {name}"))?;
    let out =
        wait_output(child, Duration::from_secs(120)).with_context(|| format!("step {name}"))?;
    if !out.0 {
        bail!(
            "step `{name}` failed; stdout:\n{}\nits log ({}):\n{}",
            out.1,
            log.display(),
            tail(&std::fs::read_to_string(&log).unwrap_or_default(), 60)
        );
    }
    Ok(out.1)
}

/// The server `outpost mcp login` signs in to.
const CLI_SERVER: &str = "cliremote";

/// One `outpost` command on the profile, with the keyring's bus: whether it succeeded,
/// its stdout and stderr (also kept, with its debug log, under the profile's `logs/`, which
/// the final search covers).
fn cli_step(
    ss: &SecretService,
    profile: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> anyhow::Result<(bool, String, String)> {
    let out = Command::new(env!("CARGO_BIN_EXE_outpost_cli"))
        .args(args)
        .arg("--data-dir")
        .arg(profile.join("data"))
        .env("OUTPOST_CONFIG_DIR", profile.join("config"))
        .env("DBUS_SESSION_BUS_ADDRESS", &ss.address)
        .env("HOME", profile.join("home"))
        .env("XDG_RUNTIME_DIR", ss.home.join("run"))
        .env("RUST_LOG", "outpost_mcp=debug,rmcp=debug,info")
        .env_remove("OUTPOST_SECRETS")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("outpost {}", args.join(" ")))?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    let logs = profile.join("logs");
    std::fs::create_dir_all(&logs)?;
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join("cli.log"))?;
    writeln!(log, "$ outpost {}\n{stdout}{stderr}", args.join(" "))?;
    Ok((out.status.success(), stdout, stderr))
}

fn wait_output(mut child: Child, limit: Duration) -> anyhow::Result<(bool, String)> {
    let stdout = child.stdout.take().context("stdout")?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut BufReader::new(stdout), &mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("timed out after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Ok((status.success(), reader.join().unwrap_or_default()))
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Every regular file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8], out: &mut Vec<PathBuf>) -> anyhow::Result<usize> {
    let mut seen = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let p = e.path();
        let ty = e.file_type()?;
        if ty.is_dir() {
            seen += files_containing(&p, needle, out)?;
        } else if ty.is_file() {
            seen += 1;
            let bytes = std::fs::read(&p)?;
            if bytes.windows(needle.len()).any(|w| w == needle) {
                out.push(p);
            }
        }
    }
    Ok(seen)
}

fn random_token(tag: &str) -> String {
    format!("outpost-keyring-test-{tag}-{}", outpost_protocol::new_id())
}

fn parent() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let profile = dir.path().join("profile");
    std::fs::create_dir_all(profile.join("home"))?;
    let ss = SecretService::start(&dir.path().join("keyring"))?;

    let token_a = random_token("a");
    let token_b = random_token("b");
    let tokens = [
        (TOKEN_A_ENV, token_a.as_str()),
        (TOKEN_B_ENV, token_b.as_str()),
    ];
    step(&ss, &profile, "store", &tokens)?;
    step(&ss, &profile, "reader", &tokens)?;
    let out = step(&ss, &profile, "session", &tokens)?;
    for l in out.lines().filter(|l| l.starts_with("searched")) {
        println!("keyring: session step {l}");
    }
    let session_token = out
        .lines()
        .find_map(|l| l.strip_prefix("SESSION_TOKEN="))
        .context("the session step printed no token")?
        .to_owned();
    step(&ss, &profile, "cleared", &tokens)?;
    step(&ss, &profile, "mcp", &tokens)?;

    // An OAuth sign-in (issue 28) through the desktop backend, with the real keyring, a
    // real authorization server and MCP server (tests/mcp/oauth) and Chromium as the
    // browser; a second process uses the stored sign-in; removal revokes and deletes.
    let oauth = OAuthServers::start(dir.path())?;
    let oauth_env = [
        tokens[0],
        tokens[1],
        ("OUTPOST_OAUTH_MCP_URL", oauth.mcp_url.as_str()),
        (
            "OUTPOST_BROWSER",
            oauth.browser.to_str().context("browser path")?,
        ),
    ];
    step(&ss, &profile, "oauth_sign_in", &oauth_env)?;
    let out = step(&ss, &profile, "oauth_use", &oauth_env)?;
    let oauth_tokens: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("OAUTH_TOKEN="))
        .map(str::to_owned)
        .collect();
    ensure!(
        oauth_tokens.len() == 2,
        "the oauth_use step printed no access and refresh token: {out}"
    );
    step(&ss, &profile, "oauth_remove", &oauth_env)?;
    // A sign-in the user cancels while the browser shows the login (this browser never
    // logs in): the command ends at once and stores nothing.
    let idle_browser = [
        oauth_env[0],
        oauth_env[1],
        oauth_env[2],
        ("OUTPOST_BROWSER", "true"),
    ];
    step(&ss, &profile, "oauth_cancel", &idle_browser)?;

    // The same through the CLI: `outpost mcp login` with the browser, the tools listed with
    // the stored sign-in, `outpost mcp logout` revoking it, and a start without it.
    let cli = |args: &[&str]| cli_step(&ss, &profile, args, &oauth_env);
    let (ok, _, err) = cli(&["mcp", "add", CLI_SERVER, "--url", &oauth.mcp_url])?;
    ensure!(ok, "mcp add: {err}");
    let (ok, _, err) = cli(&["mcp", "login", CLI_SERVER, "--timeout", "90"])?;
    ensure!(
        ok && err.contains(&format!(
            "signed in to '{CLI_SERVER}' through http://127.0.0.1:"
        )),
        "mcp login: {err}"
    );
    let (ok, out, err) = cli(&["mcp", "tools", CLI_SERVER])?;
    ensure!(ok && out.contains("whoami"), "mcp tools: {out}\n{err}");
    let with_cli = [
        oauth_env[0],
        oauth_env[1],
        oauth_env[2],
        oauth_env[3],
        ("OUTPOST_OAUTH_SERVER", CLI_SERVER),
    ];
    let out = step(&ss, &profile, "oauth_use", &with_cli)?;
    let cli_tokens: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("OAUTH_TOKEN="))
        .map(str::to_owned)
        .collect();
    ensure!(
        cli_tokens.len() == 2,
        "no tokens stored by `mcp login`: {out}"
    );
    let (ok, _, err) = cli(&["mcp", "logout", CLI_SERVER])?;
    ensure!(
        ok && err.contains("its tokens were revoked and deleted"),
        "mcp logout: {err}"
    );
    let (ok, out, err) = cli(&["mcp", "tools", CLI_SERVER])?;
    let said = out + &err;
    ensure!(
        said.contains("needs you to sign in") && !said.contains("whoami"),
        "after the logout (exit ok: {ok}): {said}"
    );
    drop(oauth);

    // The session really ran and logged (so the search below covers a real log).
    let session_log = std::fs::read_to_string(profile.join("logs/session.log"))?;
    ensure!(
        !session_log.is_empty(),
        "the session step wrote no log at debug level"
    );
    let mut needles = vec![token_a.clone(), token_b.clone(), session_token.clone()];
    needles.extend(oauth_tokens);
    needles.extend(cli_tokens);
    // A JWT's signature alone is secret enough to look for (a partial write).
    if let Some(sig) = session_token.rsplit('.').next() {
        needles.push(sig.to_owned());
    }
    let mut leaks = Vec::new();
    let mut searched = 0;
    for n in &needles {
        let mut found = Vec::new();
        searched = files_containing(&profile, n.as_bytes(), &mut found)?;
        for f in found {
            leaks.push(format!("{} holds {n}", f.display()));
        }
    }
    let names: Vec<String> = walk(&profile)?;
    for must in ["settings.toml", "policy.toml", ".sqlite3", "session.log"] {
        ensure!(
            names.iter().any(|n| n.ends_with(must) || n.contains(must)),
            "the profile has no {must} file to search: {names:#?}"
        );
    }
    ensure!(
        leaks.is_empty(),
        "a token reached a file of the profile: {leaks:#?}"
    );
    // And the keyring's own file holds it encrypted (nothing in the clear there either).
    let mut found = Vec::new();
    files_containing(&dir.path().join("keyring"), token_b.as_bytes(), &mut found)?;
    ensure!(
        found.is_empty(),
        "plain token in the keyring's files: {found:?}"
    );
    println!(
        "keyring: {searched} files searched in the profile ({}), no token found",
        names.join(", ")
    );
    drop(ss);
    Ok(())
}

fn walk(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_type()?.is_dir() {
            out.extend(walk(&e.path())?);
        } else {
            out.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    Ok(out)
}

const OAUTH_SERVER: &str = "remote";

/// Adds the HTTP server in the settings pane's way and signs in through the backend's
/// command (the browser: `OUTPOST_BROWSER`, Chromium); the pane then says signed in.
async fn oauth_sign_in() -> anyhow::Result<()> {
    let d = open_desktop()?;
    let draft = outpost_desktop::contract::McpServerDraft {
        url: env("OUTPOST_OAUTH_MCP_URL")?,
        ..outpost_desktop::mcp::empty_draft(OAUTH_SERVER, true)
    };
    let added = d.mcp_server_add(&draft)?;
    ensure!(
        added.sign_in == Some(outpost_desktop::contract::McpSignIn::NotSignedIn),
        "{added:?}"
    );
    let info = d
        .mcp_server_sign_in(OAUTH_SERVER, Duration::from_secs(90))
        .await?;
    ensure!(
        info.sign_in == Some(outpost_desktop::contract::McpSignIn::SignedIn),
        "{info:?}"
    );
    ensure!(
        outpost_mcp::oauth::signed_in(OAUTH_SERVER, &outpost_mcp::Keyring)?,
        "no sign-in in the keyring"
    );
    println!("oauth: signed in through the browser");
    Ok(())
}

/// Another process: the server's tools, listed with the stored sign-in; prints the tokens
/// for the parent's search.
async fn oauth_use() -> anyhow::Result<()> {
    use outpost_mcp::SecretStore as _;
    let server = env("OUTPOST_OAUTH_SERVER").unwrap_or_else(|_| OAUTH_SERVER.to_owned());
    let d = open_desktop()?;
    let tools = d.mcp_server_tools(&server, true).await?;
    ensure!(
        tools.tools.iter().any(|t| t.name == "whoami"),
        "no whoami among {:?} ({:?})",
        tools.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
        tools.problem
    );
    let stored: serde_json::Value = serde_json::from_str(
        &outpost_mcp::Keyring
            .get(&outpost_mcp::oauth::credentials_entry(&server))?
            .context("no stored sign-in")?,
    )?;
    for t in ["access_token", "refresh_token"] {
        let token = stored["token_response"][t]
            .as_str()
            .with_context(|| format!("no {t}"))?;
        println!("OAUTH_TOKEN={token}");
    }
    Ok(())
}

/// A sign-in waiting for the browser, cancelled as the pane's Cancel does: it fails with
/// `cancelled` within a second and the keyring holds nothing for the server.
async fn oauth_cancel() -> anyhow::Result<()> {
    const NAME: &str = "cancelled";
    let d = Arc::new(open_desktop()?);
    let draft = outpost_desktop::contract::McpServerDraft {
        url: env("OUTPOST_OAUTH_MCP_URL")?,
        ..outpost_desktop::mcp::empty_draft(NAME, true)
    };
    d.mcp_server_add(&draft)?;
    let signing_in = {
        let d = Arc::clone(&d);
        tokio::spawn(async move { d.mcp_server_sign_in(NAME, Duration::from_secs(90)).await })
    };
    // Discovery and registration first; then it waits for the browser, and can be cancelled.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !d.mcp_server_sign_in_cancel(NAME) {
        ensure!(
            Instant::now() < deadline && !signing_in.is_finished(),
            "the sign-in never waited for the browser"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cancelled_at = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(5), signing_in)
        .await
        .context("the cancelled sign-in did not end")??
        .expect_err("a cancelled sign-in succeeded");
    ensure!(
        err.code() == "cancelled" && cancelled_at.elapsed() < Duration::from_secs(1),
        "{err} ({}, after {:?})",
        err.code(),
        cancelled_at.elapsed()
    );
    ensure!(
        !outpost_mcp::oauth::signed_in(NAME, &outpost_mcp::Keyring)?,
        "a cancelled sign-in stored tokens"
    );
    // Nothing waits any more.
    ensure!(
        !d.mcp_server_sign_in_cancel(NAME),
        "still waiting after the cancel"
    );
    d.mcp_server_remove(NAME).await?;
    println!("oauth: a sign-in waiting for the browser was cancelled");
    Ok(())
}

/// Removing the server revokes its sign-in and deletes it from the keyring.
async fn oauth_remove() -> anyhow::Result<()> {
    let d = open_desktop()?;
    d.mcp_server_remove(OAUTH_SERVER).await?;
    ensure!(
        !outpost_mcp::oauth::signed_in(OAUTH_SERVER, &outpost_mcp::Keyring)?,
        "removing the server left its sign-in in the keyring"
    );
    Ok(())
}

// --- the children: one step each ----------------------------------------------------------

#[derive(Debug)]
struct NoNotes;

impl Notifier for NoNotes {
    fn notify(&self, _title: &str, _body: &str) {}
}

fn env(k: &str) -> anyhow::Result<String> {
    std::env::var(k).with_context(|| format!("{k} is not set"))
}

fn paths() -> anyhow::Result<Paths> {
    let profile = PathBuf::from(env(PROFILE_ENV)?);
    Ok(Paths {
        config_dir: profile.join("config"),
        data_dir: profile.join("data"),
    })
}

fn open_desktop() -> anyhow::Result<Desktop> {
    Ok(Desktop::open(
        paths()?,
        Arc::new(Keyring),
        Arc::new(NoNotes),
    )?)
}

fn child(step: &str) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let token_a = env(TOKEN_A_ENV)?;
    let token_b = env(TOKEN_B_ENV)?;
    // Everything runs inside the runtime, as in the app (Tauri's async commands): the
    // keyring must work from async code too.
    rt.block_on(async move {
        match step {
            "store" => store(&token_a, &token_b).await,
            "reader" => reader(&token_b).await,
            "session" => session().await,
            "cleared" => cleared().await,
            "mcp" => mcp(&token_a, &token_b).await,
            "oauth_sign_in" => oauth_sign_in().await,
            "oauth_use" => oauth_use().await,
            "oauth_remove" => oauth_remove().await,
            "oauth_cancel" => oauth_cancel().await,
            other => bail!("unknown step {other}"),
        }
    })
}

/// Stored, read, replaced, deleted through the Desktop API; token B is left in place.
async fn store(a: &str, b: &str) -> anyhow::Result<()> {
    let d = open_desktop()?;
    ensure!(
        !d.settings().connection.has_token,
        "a fresh keyring already has a token"
    );
    d.set_secret(SECRET, a)?;
    ensure!(d.settings().connection.has_token, "has_token after storing");
    ensure!(Keyring.get(SECRET)?.as_deref() == Some(a), "read back A");
    // Surrounding blanks from a paste are not part of the token.
    d.set_secret(SECRET, &format!("  {b}\n"))?;
    ensure!(Keyring.get(SECRET)?.as_deref() == Some(b), "replaced by B");
    d.clear_secret(SECRET)?;
    ensure!(Keyring.get(SECRET)?.is_none(), "deleted");
    ensure!(
        !d.settings().connection.has_token,
        "has_token after clearing"
    );
    // Clearing again is no error.
    d.clear_secret(SECRET)?;
    let err = d.set_secret("other", "x").unwrap_err();
    ensure!(
        err.code() == "invalid_argument",
        "unknown secret name: {err}"
    );
    d.set_secret(SECRET, b)?;
    Ok(())
}

/// Another process: the token is in the Secret Service, and the Desktop sees it.
async fn reader(b: &str) -> anyhow::Result<()> {
    ensure!(
        Keyring.get(SECRET)?.as_deref() == Some(b),
        "a second process did not read token B from the keyring"
    );
    let d = open_desktop()?;
    ensure!(
        d.settings().connection.has_token,
        "has_token in a new Desktop"
    );
    Ok(())
}

/// A session with the token from the keyring: outpost-room on loopback, the reference
/// assistant, one calculator call.
async fn session() -> anyhow::Result<()> {
    use clap::Parser as _;
    let server =
        outpost_room::Server::bind(([127, 0, 0, 1], 0).into(), outpost_room::Config::default())
            .await?;
    let url = server.url();
    let token = server.token(ROOM, "outpost-app")?;
    println!("SESSION_TOKEN={token}");
    let cli = outpost_agent::config::Cli::try_parse_from([
        "outpost-agent",
        "--url",
        &url,
        "--room",
        ROOM,
    ])?;
    let agent = tokio::spawn(async move {
        if let Err(e) = outpost_agent::run::run(cli, |_| {}).await {
            eprintln!("the assistant stopped: {e}");
        }
    });

    let d = open_desktop()?;
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    d.subscribe(Box::new(move |ev| {
        let _ = tx.send(ev);
    }));
    d.set_secret(SECRET, &token)?;
    let mut s = d.settings();
    s.connection.auth_mode = outpost_desktop::contract::AuthMode::Token;
    s.connection.livekit_url = url;
    s.connection.room = ROOM.into();
    let saved = d.set_settings(s).await?;
    ensure!(
        saved.connection.has_token,
        "has_token after saving settings"
    );
    d.connect().await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut next = async || -> anyhow::Result<AppEvent> {
        tokio::time::timeout_at(deadline, events.recv())
            .await
            .context("no event within 60 s")?
            .context("event channel closed")
    };
    loop {
        if let AppEvent::Session(_) = next().await? {
            break;
        }
    }
    d.send("compute 6 * 7".into()).await?;
    let mut result_ok = false;
    loop {
        match next().await? {
            AppEvent::ToolResult(r) => {
                ensure!(r.success, "the calculator call failed: {r:?}");
                result_ok = true;
            }
            // The scripted assistant says what it does, then gives the answer.
            AppEvent::AssistantMessage(m) if m.text.contains("42") => break,
            AppEvent::ConsentRequest(c) => bail!("unexpected consent request {c:?}"),
            _ => {}
        }
    }
    ensure!(result_ok, "no tool result before the answer");
    d.disconnect().await;
    d.store_flush().await;
    // While the store is open its write-ahead log exists; it is gone (checkpointed) by
    // the time the parent searches, so search it here.
    let data = paths()?.data_dir;
    let names = walk(&data)?;
    ensure!(
        names.iter().any(|n| n.ends_with("-wal")),
        "no SQLite write-ahead log while the store is open: {names:?}"
    );
    let mut found = Vec::new();
    files_containing(&data, token.as_bytes(), &mut found)?;
    ensure!(found.is_empty(), "the token is in {found:?}");
    println!("searched with the store open: {}", names.join(", "));
    agent.abort();
    server.shutdown().await;
    Ok(())
}

/// The token is cleared through the Desktop; a fresh store in this process finds none.
async fn cleared() -> anyhow::Result<()> {
    let d = open_desktop()?;
    ensure!(
        d.settings().connection.has_token,
        "the session's token is kept"
    );
    d.clear_secret(SECRET)?;
    ensure!(
        !d.settings().connection.has_token,
        "has_token after clearing"
    );
    ensure!(Keyring.get(SECRET)?.is_none(), "the keyring still has it");
    Ok(())
}

/// outpost-mcp's keyring store: the same round trip on an `mcp/<server>/<key>` entry.
async fn mcp(a: &str, b: &str) -> anyhow::Result<()> {
    use outpost_mcp::SecretStore as _;
    let k = outpost_mcp::Keyring;
    let entry = "mcp/keyring-test/API_TOKEN";
    ensure!(k.persistent(), "the keyring store says it does not persist");
    ensure!(k.get(entry)?.is_none(), "fresh entry already set");
    k.set(entry, a)?;
    ensure!(k.get(entry)?.as_deref() == Some(a), "mcp: read back A");
    k.set(entry, b)?;
    ensure!(k.get(entry)?.as_deref() == Some(b), "mcp: replaced by B");
    // The desktop's entry is a different one: clearing it left this one alone.
    ensure!(Keyring.get(SECRET)?.is_none(), "desktop entry reappeared");
    k.delete(entry)?;
    ensure!(k.get(entry)?.is_none(), "mcp: deleted");
    k.delete(entry)?;
    mcp_server_env(a).await
}

/// A tool server added in the settings pane with a value under an innocent name
/// (`GH_PAT`): the value goes to the keyring, `mcp.toml` names the entry, and the real
/// server (server-everything) still gets it in its environment. The parent then searches
/// the profile (mcp.toml, the server's stderr log, the step logs) for it.
async fn mcp_server_env(value: &str) -> anyhow::Result<()> {
    let d = open_desktop()?;
    let js = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    ensure!(
        js.exists(),
        "{} is missing: run scripts/setup.sh",
        js.display()
    );
    let draft = outpost_desktop::contract::McpServerDraft {
        command: "node".into(),
        args: vec![js.display().to_string(), "stdio".into()],
        env: [
            ("GH_PAT".to_owned(), value.to_owned()),
            ("LOG_LEVEL".to_owned(), "debug".to_owned()),
        ]
        .into(),
        plain: vec!["LOG_LEVEL".into()],
        ..outpost_desktop::mcp::empty_draft("ghx", true)
    };
    d.mcp_server_add(&draft)?;
    let file = paths()?.config_dir.join("mcp.toml");
    let text = std::fs::read_to_string(&file)?;
    ensure!(
        !text.contains(value)
            && text.contains("mcp/ghx/GH_PAT")
            && text.contains("LOG_LEVEL = \"debug\""),
        "mcp.toml: {text}"
    );
    ensure!(
        Keyring.get("mcp/ghx/GH_PAT")?.as_deref() == Some(value),
        "the value is not in the keyring"
    );
    // The edit form gets it by name only.
    let form = d.mcp_server_get("ghx")?;
    ensure!(
        form.env.get("GH_PAT").map(String::as_str) == Some(""),
        "{form:?}"
    );

    // The server, started as a session starts it, has the value in its environment.
    let cfg = outpost_mcp::McpConfig::load(&file)?;
    let host = outpost_mcp::McpHost::new(
        outpost_mcp::HostOptions::new(
            outpost_mcp::ConnectOptions {
                log_dir: Some(outpost_mcp::config::log_dir(&paths()?.data_dir)),
                ..outpost_mcp::ConnectOptions::default()
            },
            Arc::new(outpost_mcp::Keyring),
        ),
        Vec::new(),
    );
    host.start_all(&cfg)?;
    host.wait_running("ghx", Duration::from_secs(60)).await?;
    let pid = host
        .snapshot()
        .get("ghx")
        .and_then(|s| s.pid)
        .context("no pid for the running server")?;
    let environ = std::fs::read(format!("/proc/{pid}/environ"))?;
    let want = format!("GH_PAT={value}");
    ensure!(
        environ.split(|b| *b == 0).any(|v| v == want.as_bytes()),
        "the server's environment has no GH_PAT with the stored value"
    );
    host.shutdown();
    d.mcp_server_remove("ghx").await?;
    ensure!(
        Keyring.get("mcp/ghx/GH_PAT")?.is_none(),
        "removing the server left its keyring entry"
    );
    println!("mcp: GH_PAT reached the server from the keyring");
    Ok(())
}
