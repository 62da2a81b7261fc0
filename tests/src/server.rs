//! "A LiveKit server" for tests, with two implementations: Outpost's own `outpost-room`
//! and the real `livekit-server` (Go, pinned at [`LIVEKIT_SERVER_VERSION`], installed by
//! `scripts/setup.sh`). Tests about the client run against both ([`crate::both_servers!`]);
//! tests about `outpost-room` itself start it directly.
//!
//! Both run inside a network namespace the test made, bound to one address there, with
//! the dev key pair `devkey`/`secret`. livekit-server is started offline: `--node-ip`
//! skips its external-IP discovery and `rtc.stun_servers` names an address inside the
//! namespace, so it never hands clients Google's STUN servers.

use std::ffi::OsStr;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use crate::proc::Proc;

/// The livekit-server release the tests pin (scripts/setup.sh installs this one).
pub const LIVEKIT_SERVER_VERSION: &str = "v1.13.5";

/// Which server implementation a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// `outpost-room serve` (this workspace).
    Room,
    /// The real `livekit-server`.
    LiveKit,
}

impl ServerKind {
    /// A short name for logs and failure messages.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Room => "outpost-room",
            ServerKind::LiveKit => "livekit-server",
        }
    }

    /// The kind `BENCH_SERVER` names for a benchmark: `livekit` (livekit-server), else
    /// outpost-room.
    pub fn from_bench_env() -> Self {
        match std::env::var("BENCH_SERVER").as_deref() {
            Ok("livekit") | Ok("livekit-server") => ServerKind::LiveKit,
            _ => ServerKind::Room,
        }
    }

    /// Ping interval the server announces in its JoinResponse. livekit-server's is fixed
    /// (5 s, timeout 15 s); outpost-room's test setting is 1 s / 4 s.
    pub fn ping_timeout(self) -> Duration {
        match self {
            ServerKind::Room => Duration::from_secs(4),
            ServerKind::LiveKit => Duration::from_secs(15),
        }
    }
}

/// The livekit-server binary: `OUTPOST_LIVEKIT_SERVER`, else where scripts/setup.sh
/// installs it. Fails with the install command when it is missing.
pub fn livekit_server_bin() -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("OUTPOST_LIVEKIT_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(default_livekit_server_bin);
    if !path.is_file() {
        bail!(
            "no livekit-server at {} (run scripts/setup.sh, which installs {LIVEKIT_SERVER_VERSION} \
             with `go install`, or point OUTPOST_LIVEKIT_SERVER at a livekit-server {LIVEKIT_SERVER_VERSION})",
            path.display()
        );
    }
    Ok(path)
}

fn default_livekit_server_bin() -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache")
        });
    cache
        .join("outpost")
        .join(format!("livekit-server-{LIVEKIT_SERVER_VERSION}"))
        .join("livekit-server")
}

/// How to start a server beyond its kind.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// More `outpost-room serve` arguments (ignored by livekit-server, which has neither
    /// optional modes nor a TLS listener).
    pub room_args: Vec<String>,
    /// More livekit-server YAML, merged under the top level (e.g. `room: {…}`). The `rtc`
    /// section is the harness's; add to it with [`ServerOptions::rtc_extra`].
    pub livekit_yaml: String,
    /// Extra keys inside livekit-server's `rtc:` section, as YAML flow entries
    /// (`"datachannel_slow_threshold: 1024"`).
    pub rtc_extra: Vec<String>,
}

/// A running server in a namespace, killed on drop.
#[derive(Debug)]
pub struct LkServer {
    /// Which implementation.
    pub kind: ServerKind,
    /// The process.
    pub proc: Proc,
    /// `ws://IP:7880` (or `wss://` for an outpost-room started with `--tls-cert`).
    pub url: String,
    bind: Ipv4Addr,
}

impl LkServer {
    /// Starts `kind` bound to `bind:7880`, running it through `ns_command` (which wraps a
    /// program in `ip netns exec …`), and waits until it accepts connections.
    /// `room_bin` is the `outpost-room` binary (only used for [`ServerKind::Room`]).
    pub fn start(
        kind: ServerKind,
        ns_command: &dyn Fn(&OsStr) -> Command,
        bind: Ipv4Addr,
        room_bin: &Path,
        opts: &ServerOptions,
    ) -> anyhow::Result<Self> {
        match kind {
            ServerKind::Room => {
                let addr = format!("{bind}:7880");
                let mut cmd = ns_command(room_bin.as_os_str());
                cmd.args(["serve", "--bind", &addr]).args(&opts.room_args);
                let mut proc = Proc::spawn("outpost-room", cmd)?;
                proc.wait_for_line("listening on", Duration::from_secs(10))?;
                let scheme = if opts.room_args.iter().any(|a| a == "--tls-cert") {
                    "wss"
                } else {
                    "ws"
                };
                Ok(Self {
                    kind,
                    proc,
                    url: format!("{scheme}://{addr}"),
                    bind,
                })
            }
            ServerKind::LiveKit => {
                let bin = livekit_server_bin()?;
                let mut rtc = vec![
                    format!("stun_servers: [\"{bind}:3478\"]"),
                    "use_external_ip: false".to_owned(),
                ];
                rtc.extend(opts.rtc_extra.iter().cloned());
                // OUTPOST_LK_LOG (e.g. debug), when set, replaces the server's log level.
                let level = std::env::var("OUTPOST_LK_LOG").unwrap_or_else(|_| "info".into());
                let yaml = format!(
                    "rtc: {{{}}}\nlogging: {{level: {level}}}\n{}",
                    rtc.join(", "),
                    opts.livekit_yaml
                );
                let ip = bind.to_string();
                let mut cmd = ns_command(bin.as_os_str());
                cmd.args([
                    "--dev",
                    "--bind",
                    &ip,
                    "--node-ip",
                    &ip,
                    "--config-body",
                    &yaml,
                ]);
                let proc = Proc::spawn("livekit-server", cmd)?;
                let server = Self {
                    kind,
                    proc,
                    url: format!("ws://{bind}:7880"),
                    bind,
                };
                server.wait_listening(ns_command, Duration::from_secs(20))?;
                Ok(server)
            }
        }
    }

    /// Whether the server's log says `identity` has joined (its session is up).
    pub fn log_says_joined(&self, identity: &str) -> bool {
        let log = self.proc.stderr();
        match self.kind {
            ServerKind::Room => log
                .lines()
                .any(|l| l.contains("participant joined") && l.contains(identity)),
            ServerKind::LiveKit => {
                let who = format!("\"participant\": \"{identity}\"");
                log.lines()
                    .any(|l| l.contains("participant active") && l.contains(&who))
            }
        }
    }

    /// How many session resumes the server's log reports, and whether it refused one.
    pub fn log_resumes(&self) -> (usize, bool) {
        let log = self.proc.stderr();
        match self.kind {
            ServerKind::Room => (
                log.matches("session resumed").count(),
                log.contains("resume refused"),
            ),
            ServerKind::LiveKit => (
                log.matches("resuming RTC session").count(),
                log.contains("could not resume participant")
                    || log.contains("cannot restart a closed participant"),
            ),
        }
    }

    /// The address the server is bound to.
    pub fn ip(&self) -> Ipv4Addr {
        self.bind
    }

    /// Polls the HTTP port from inside the namespace until it accepts a connection.
    fn wait_listening(
        &self,
        ns_command: &dyn Fn(&OsStr) -> Command,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        let probe = format!("exec 3<>/dev/tcp/{}/7880", self.bind);
        loop {
            let ok = ns_command(OsStr::new("bash"))
                .args(["-c", &probe])
                .stderr(std::process::Stdio::null())
                .status()
                .context("probing the server's port with bash")?
                .success();
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} did not listen on {}:7880 within {timeout:?}; its log:\n{}",
                    self.kind.name(),
                    self.bind,
                    self.proc.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Runs a test body once per server kind: `both_servers!(name)` declares a module `name`
/// with tests `name::room` and `name::livekit`, each calling `name(ServerKind::…)`.
/// `cargo test room` / `cargo test livekit` select one side.
#[macro_export]
macro_rules! both_servers {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[test]
                fn room() {
                    super::$name($crate::server::ServerKind::Room);
                }
                #[test]
                fn livekit() {
                    super::$name($crate::server::ServerKind::LiveKit);
                }
            }
        )+
    };
}

/// For a test program without libtest's harness: runs its one `scenario`, prints a
/// libtest-like line (`test NAME ... ok`) and the count, and exits with status 1 when it
/// failed.
pub fn run_one(name: &str, scenario: impl FnOnce() -> anyhow::Result<()>) {
    #[allow(clippy::print_stdout, clippy::print_stderr)]
    match scenario() {
        Ok(()) => {
            println!("test {name} ... ok");
            println!("1 passed, 0 failed");
        }
        Err(e) => {
            eprintln!("{e:#}");
            println!("test {name} ... FAILED");
            println!("0 passed, 1 failed");
            std::process::exit(1);
        }
    }
}

/// For tests without libtest's harness (the voice tests, which must set `PULSE_SERVER`
/// before any thread starts): runs `scenario` once per server kind in turn, prints a
/// libtest-like line for each (`test NAME::room ... ok`), and exits with status 1 when
/// one failed. Arguments that name a kind (`room`, `livekit`) run only those.
pub fn run_each_kind(name: &str, mut scenario: impl FnMut(ServerKind) -> anyhow::Result<()>) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let wanted = |k: ServerKind| {
        let label = match k {
            ServerKind::Room => "room",
            ServerKind::LiveKit => "livekit",
        };
        let named: Vec<&String> = args
            .iter()
            .filter(|a| *a == "room" || *a == "livekit")
            .collect();
        (named.is_empty() || named.iter().any(|a| *a == label)).then_some(label)
    };
    let (mut passed, mut failed) = (0, 0);
    for kind in [ServerKind::Room, ServerKind::LiveKit] {
        let Some(label) = wanted(kind) else {
            continue;
        };
        #[allow(clippy::print_stdout, clippy::print_stderr)]
        match scenario(kind) {
            Ok(()) => {
                println!("test {name}::{label} ... ok");
                passed += 1;
            }
            Err(e) => {
                eprintln!("{name}::{label}: {e:#}");
                println!("test {name}::{label} ... FAILED");
                failed += 1;
            }
        }
    }
    #[allow(clippy::print_stdout)]
    {
        println!("{passed} passed, {failed} failed");
    }
    if failed > 0 {
        std::process::exit(1);
    }
}
