//! Harness for `outpost-livekit` tests and benches: a server namespace and a client
//! namespace joined by a veth pair, `outpost-room` and an official-SDK Python peer in
//! the server namespace, and the Rust client run inside the client namespace.
//!
//! Why two namespaces: inside one namespace traffic between its own addresses goes
//! over `lo` whatever the veth state, so `ip link set … down` would not cut anything.
//! With the client alone on the far end of the veth, taking the link down really
//! cuts the client off while the server and the Python peer stay up.
//!
//! Running the Rust client in the namespace: [`in_netns`] starts a thread, moves it
//! into the client namespace with `setns(2)`, and builds a tokio runtime on it; the
//! runtime's worker threads are created from that thread and inherit the namespace,
//! so every socket the client opens (WebSocket, ICE/UDP) lives there. The test
//! keeps its own assertions in-process, with no extra binary.

use std::future::Future;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::proc::Proc;
use crate::python;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// API key pair of `outpost-room serve` without `--keys`.
pub const DEV_KEY: &str = "devkey";
/// Secret of the dev pair.
pub const DEV_SECRET: &str = "secret";

/// Two namespaces joined by a veth pair: `s` holds `v0` (server side, `.1`), `c`
/// holds `v1` (client side, `.2`). Both deleted on drop.
#[derive(Debug)]
pub struct NsPair {
    /// Server namespace name.
    pub server_ns: String,
    /// Client namespace name.
    pub client_ns: String,
    /// Address of `v0`.
    pub server_ip: Ipv4Addr,
    /// Address of `v1`.
    pub client_ip: Ipv4Addr,
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("running `ip` (install Debian's iproute2)")?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed: {} (these tests need root and iproute2)",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl NsPair {
    /// Creates both namespaces and the link. Subnets `10.200-249.n.0/24` keep clear
    /// of [`crate::netns`] (10.100-199).
    pub fn create() -> anyhow::Result<Self> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let a = u8::try_from(200 + pid % 50).unwrap_or(200);
        let b = u8::try_from(n % 250).unwrap_or(0);
        let pair = Self {
            server_ns: format!("olk-{pid}-{n}-s"),
            client_ns: format!("olk-{pid}-{n}-c"),
            server_ip: Ipv4Addr::new(10, a, b, 1),
            client_ip: Ipv4Addr::new(10, a, b, 2),
        };
        ip(&["netns", "add", &pair.server_ns])?;
        ip(&["netns", "add", &pair.client_ns])?;
        let (s, c) = (&pair.server_ns, &pair.client_ns);
        let v0 = format!("olkv{n}a");
        let v1 = format!("olkv{n}b");
        // Create the pair inside the server namespace, then move one end over.
        ip(&[
            "-n", s, "link", "add", &v0, "type", "veth", "peer", "name", &v1,
        ])?;
        ip(&["-n", s, "link", "set", &v1, "netns", c])?;
        ip(&["-n", s, "link", "set", &v0, "name", "v0"])?;
        ip(&["-n", c, "link", "set", &v1, "name", "v1"])?;
        ip(&[
            "-n",
            s,
            "addr",
            "add",
            &format!("{}/24", pair.server_ip),
            "dev",
            "v0",
        ])?;
        ip(&[
            "-n",
            c,
            "addr",
            "add",
            &format!("{}/24", pair.client_ip),
            "dev",
            "v1",
        ])?;
        for (ns, dev) in [(s, "v0"), (c, "v1"), (s, "lo"), (c, "lo")] {
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(pair)
    }

    /// A command running `program` in the server namespace.
    pub fn server_command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.server_ns]).arg(program);
        c
    }

    /// Takes the client's end of the link down (`up = false`) or up again.
    pub fn set_client_link(&self, up: bool) -> anyhow::Result<()> {
        ip(&[
            "-n",
            &self.client_ns,
            "link",
            "set",
            "v1",
            if up { "up" } else { "down" },
        ])
    }
}

impl Drop for NsPair {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.client_ns]);
        let _ = ip(&["netns", "del", &self.server_ns]);
    }
}

/// Runs `make()`'s future on a fresh tokio runtime whose threads live in network
/// namespace `ns`. Blocks until it finishes.
pub fn in_netns<T, F, Fut>(ns: &str, make: F) -> anyhow::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let path = format!("/var/run/netns/{ns}");
    let handle = std::thread::Builder::new()
        .name(format!("netns-{ns}"))
        .spawn(move || -> anyhow::Result<T> {
            let fd = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
            nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET)
                .with_context(|| format!("setns into {path} (needs root)"))?;
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            rt.block_on(make())
        })?;
    handle
        .join()
        .map_err(|_| anyhow::anyhow!("the namespace thread panicked"))?
}

/// Mints a dev-key access token for `identity` in `room`.
pub fn token(room: &str, identity: &str, secret: &str) -> anyhow::Result<String> {
    livekit_token::AccessToken::with_api_key(DEV_KEY, secret)
        .with_identity(identity)
        .with_name(identity)
        .with_ttl(Duration::from_secs(3600))
        .with_grants(livekit_token::VideoGrants {
            room_join: true,
            room: room.to_owned(),
            ..Default::default()
        })
        .to_jwt()
        .map_err(|e| anyhow::anyhow!("minting a token: {e}"))
}

/// `outpost-room serve` in the server namespace, killed on drop.
#[derive(Debug)]
pub struct Server {
    /// The process.
    pub proc: Proc,
    /// `ws://IP:7880`.
    pub url: String,
}

impl Server {
    /// Starts the server on `pair.server_ip:7880` with short keep-alive settings.
    pub fn start(pair: &NsPair, bin: &Path) -> anyhow::Result<Self> {
        Self::start_with(pair, bin, &[])
    }

    /// Like [`Server::start`], with more `serve` options (`--tls-cert` makes the URL
    /// `wss://`).
    pub fn start_with(pair: &NsPair, bin: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        let bind = format!("{}:7880", pair.server_ip);
        let mut cmd = pair.server_command(bin);
        cmd.args([
            "serve",
            "--bind",
            &bind,
            "--ping-interval",
            "1s",
            "--ping-timeout",
            "4s",
            "--empty-timeout",
            "30s",
        ])
        .args(extra);
        let mut proc = Proc::spawn("outpost-room", cmd)?;
        proc.wait_for_line("listening on", Duration::from_secs(10))?;
        let scheme = if extra.contains(&"--tls-cert") {
            "wss"
        } else {
            "ws"
        };
        Ok(Self {
            proc,
            url: format!("{scheme}://{bind}"),
        })
    }
}

/// `tests/py/SCRIPT` in the server namespace of `pair`, joining `room` at `url` as
/// `identity`, with `vars` in its environment.
fn py_script(
    pair: &NsPair,
    url: &str,
    script: &str,
    room: &str,
    identity: &str,
    vars: &[(&str, &str)],
) -> anyhow::Result<Command> {
    let py = python::python()?;
    let mut cmd = pair.server_command(&py);
    cmd.arg(python::scripts_dir().join(script))
        .current_dir(python::scripts_dir())
        .env("LK_URL", url)
        .env("LK_ROOM", room)
        .env("LK_IDENTITY", identity)
        .env("PYTHONWARNINGS", "ignore");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    Ok(cmd)
}

/// The official-SDK peer `tests/py/lk_peer.py`, in the server namespace.
#[derive(Debug)]
pub struct PyPeer {
    /// The process.
    pub proc: Proc,
}

impl PyPeer {
    /// Starts the peer as `identity` in `room` and waits until it has joined.
    pub fn start(pair: &NsPair, url: &str, room: &str, identity: &str) -> anyhow::Result<Self> {
        Self::start_with_env(pair, url, room, identity, &[])
    }

    /// Like [`PyPeer::start`], with extra environment (e.g. `SSL_CERT_FILE`).
    pub fn start_with_env(
        pair: &NsPair,
        url: &str,
        room: &str,
        identity: &str,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let cmd = py_script(pair, url, "lk_peer.py", room, identity, env)?;
        let mut proc = Proc::spawn(&format!("lk_peer {identity}"), cmd)?;
        proc.wait_for_line("ready", Duration::from_secs(30))?;
        Ok(Self { proc })
    }
}

/// A namespace pair with a room server in it.
#[derive(Debug)]
pub struct Env {
    /// The server.
    pub server: Server,
    /// The namespaces (dropped last).
    pub pair: NsPair,
}

impl Env {
    /// Namespaces plus a room server.
    pub fn start(bin: &Path) -> anyhow::Result<Self> {
        Self::start_with(bin, &[])
    }

    /// `outpost connect` (the binary `cli`) joining `room` as "app" with the dev key,
    /// taking "assistant" for the assistant, in the client namespace (`ip netns exec`
    /// execs, so the child's pid is Outpost's). The caller adds its profile's flags
    /// (`--json` among them) and the stdio.
    pub fn outpost_connect(&self, cli: &Path, room: &str) -> anyhow::Result<Command> {
        let token = token(room, "app", DEV_SECRET)?;
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.pair.client_ns])
            .arg(cli)
            .arg("connect")
            .args(["--url", &self.server.url, "--token", &token])
            .args(["--assistant-identity", "assistant", "--room", room]);
        Ok(c)
    }

    /// `tests/py/SCRIPT` (an official-SDK participant) in the server namespace, joining
    /// `room` on this server as `identity` (its environment: `LK_URL`, `LK_ROOM`,
    /// `LK_IDENTITY`; the dev key is `lkcommon.py`'s default), plus `vars`.
    pub fn py_peer(
        &self,
        script: &str,
        room: &str,
        identity: &str,
        vars: &[(&str, &str)],
    ) -> anyhow::Result<Command> {
        py_script(&self.pair, &self.server.url, script, room, identity, vars)
    }

    /// Namespaces plus a room server with more `serve` options.
    pub fn start_with(bin: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        let pair = NsPair::create()?;
        let server = Server::start_with(&pair, bin, extra)?;
        Ok(Self { server, pair })
    }
}
