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
use crate::server::{LkServer, ServerKind, ServerOptions};

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
        // A second veth pair with both ends in the server namespace, always running: when
        // a test takes the client's link down, `v0` loses its carrier too, and libwebrtc
        // (the official peers in the server namespace) then sees no usable network and
        // cannot connect to a server that restarted meanwhile. This pair keeps one up; its
        // address reaches the server's on `v0` through local routing. (No `dummy` device:
        // not every kernel here has the module.)
        ip(&[
            "-n", s, "link", "add", "k0", "type", "veth", "peer", "name", "k1",
        ])?;
        ip(&[
            "-n",
            s,
            "addr",
            "add",
            &format!("{}/32", Ipv4Addr::new(10, a, b, 3)),
            "dev",
            "k0",
        ])?;
        for dev in ["k0", "k1"] {
            ip(&["-n", s, "link", "set", dev, "up"])?;
        }
        Ok(pair)
    }

    /// A command running `program` in the server namespace.
    pub fn server_command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.server_ns]).arg(program);
        c
    }

    /// A command running `program` in the client namespace (an official-SDK peer on
    /// the client's side of the network, say).
    pub fn client_command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.client_ns]).arg(program);
        c
    }

    /// Drops every UDP packet in and out of the client namespace (`blocked`), or lets
    /// them through again, with nftables: a network that blocks UDP (WebRTC's media and
    /// data path) while TCP (the signal connection) goes on.
    pub fn set_client_udp_blocked(&self, blocked: bool) -> anyhow::Result<()> {
        set_udp_blocked(&self.client_ns, blocked)
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

/// Drops every UDP packet in and out of namespace `ns` (`blocked`), or lets them
/// through again; see [`NsPair::set_client_udp_blocked`]. Callable from a test's
/// client thread, which holds only the namespace's name.
pub fn set_udp_blocked(ns: &str, blocked: bool) -> anyhow::Result<()> {
    let script = if blocked {
        "table inet outpost_block {\n chain input {\n  type filter hook input priority 0; policy accept;\n  meta l4proto udp drop\n }\n chain output {\n  type filter hook output priority 0; policy accept;\n  meta l4proto udp drop\n }\n}\n"
    } else {
        "delete table inet outpost_block\n"
    };
    nft(ns, script)
}

/// Drops everything leaving namespace `ns` but loopback and what `allow` accepts (nftables
/// rule lines such as `udp dport 3478 accept`), replacing what an earlier call allowed.
pub fn allow_only(ns: &str, allow: &str) -> anyhow::Result<()> {
    nft(
        ns,
        &format!(
            "table inet outpost_only {{}}\ndelete table inet outpost_only\ntable inet outpost_only {{\n chain output {{\n  type filter hook output priority 0; policy accept;\n  oifname \"lo\" accept\n  {allow}\n  drop\n }}\n}}\n"
        ),
    )
}

/// Runs an nftables script (`nft -f -`) in namespace `ns`.
pub fn nft(ns: &str, script: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("running nft (Debian's nftables)")?;
    child
        .stdin
        .take()
        .context("nft's stdin")?
        .write_all(script.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "nft in {ns}: {}\nscript:\n{script}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
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
    crate::trace_from_env();
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

/// A multi-thread tokio runtime (2 workers) whose threads live in network namespace `ns`:
/// built on a thread moved there with `setns`; its workers are created from that thread
/// and inherit the namespace. Use it from any thread (`spawn`, `block_on`).
pub fn runtime_in_netns(ns: &str) -> anyhow::Result<tokio::runtime::Runtime> {
    let path = format!("/var/run/netns/{ns}");
    std::thread::Builder::new()
        .name(format!("netns-rt-{ns}"))
        .spawn(move || -> anyhow::Result<tokio::runtime::Runtime> {
            let fd = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
            nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET)
                .with_context(|| format!("setns into {path} (needs root)"))?;
            Ok(tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?)
        })?
        .join()
        .map_err(|_| anyhow::anyhow!("the namespace thread panicked"))?
}

/// A dev-key token for `room` as outpost-room's own minting makes it, with the participant
/// `kind` LiveKit Agents looks at (`""`, or `"agent"` for an agent).
pub fn dev_token(room: &str, identity: &str, kind: &str) -> anyhow::Result<String> {
    Ok(outpost_room::Keys::dev().mint_with_kind(
        room,
        identity,
        None,
        Duration::from_secs(3600),
        kind,
    )?)
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

/// The server of a namespace pair: either implementation (see [`crate::server`]), in the
/// server namespace, killed on drop.
pub type Server = LkServer;

/// outpost-room's keep-alive settings for these tests: a lost link shows within seconds.
const ROOM_ARGS: [&str; 6] = [
    "--ping-interval",
    "1s",
    "--ping-timeout",
    "4s",
    "--empty-timeout",
    "30s",
];

impl LkServer {
    /// Starts `outpost-room` on `pair.server_ip:7880` with short keep-alive settings.
    pub fn start_room(pair: &NsPair, bin: &Path) -> anyhow::Result<Self> {
        Self::start_in(pair, ServerKind::Room, bin, &[])
    }

    /// Starts `kind` in the pair's server namespace. For outpost-room: short keep-alive
    /// settings plus `room_extra` (`--tls-cert` makes the URL `wss://`); livekit-server
    /// ignores `room_extra`.
    pub fn start_in(
        pair: &NsPair,
        kind: ServerKind,
        bin: &Path,
        room_extra: &[&str],
    ) -> anyhow::Result<Self> {
        Self::start_in_with(pair, kind, bin, room_extra, ServerOptions::default())
    }

    /// Like [`LkServer::start_in`], with livekit-server options too.
    pub fn start_in_with(
        pair: &NsPair,
        kind: ServerKind,
        bin: &Path,
        room_extra: &[&str],
        mut opts: ServerOptions,
    ) -> anyhow::Result<Self> {
        let mut room_args: Vec<String> = ROOM_ARGS.iter().map(|a| (*a).to_owned()).collect();
        room_args.extend(room_extra.iter().map(|a| (*a).to_owned()));
        room_args.append(&mut opts.room_args);
        opts.room_args = room_args;
        LkServer::start(
            kind,
            &|program| pair.server_command(program),
            pair.server_ip,
            bin,
            &opts,
        )
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

/// A namespace pair with a server in it.
#[derive(Debug)]
pub struct Env {
    /// The server.
    pub server: Server,
    /// The namespaces (dropped last).
    pub pair: NsPair,
}

impl Env {
    /// Namespaces plus an outpost-room server.
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

    /// Namespaces plus an outpost-room server with more `serve` options.
    pub fn start_with(bin: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        Self::on_with(ServerKind::Room, bin, extra)
    }

    /// Namespaces plus livekit-server with its TURN server on: UDP 3478 and TLS 443 on the
    /// server's address, with a certificate from a throw-away CA (returned: keep it as long
    /// as the server). `bin` is outpost-room's binary (unused by livekit-server).
    pub fn livekit_with_turn(bin: &Path) -> anyhow::Result<(Self, crate::pki::TestPki)> {
        let pair = NsPair::create()?;
        let ip = pair.server_ip.to_string();
        let pki = crate::pki::TestPki::new(std::slice::from_ref(&ip))?;
        let opts = ServerOptions {
            livekit_yaml: format!(
                "turn: {{enabled: true, domain: \"{ip}\", tls_port: 443, udp_port: 3478, \
                 cert_file: \"{}\", key_file: \"{}\", relay_range_start: 30000, \
                 relay_range_end: 30100, allow_restricted_peer_cidrs: [\"10.0.0.0/8\"]}}\n",
                pki.cert_path().display(),
                pki.key_path().display()
            ),
            ..ServerOptions::default()
        };
        let server = Server::start_in_with(&pair, ServerKind::LiveKit, bin, &[], opts)?;
        Ok((Self { server, pair }, pki))
    }

    /// Namespaces plus a server of `kind` (`bin` is outpost-room's binary).
    pub fn on(kind: ServerKind, bin: &Path) -> anyhow::Result<Self> {
        Self::on_with(kind, bin, &[])
    }

    /// Namespaces plus a server of `kind`; `room_extra` are more outpost-room options.
    pub fn on_with(kind: ServerKind, bin: &Path, room_extra: &[&str]) -> anyhow::Result<Self> {
        Self::on_with_opts(kind, bin, room_extra, ServerOptions::default())
    }

    /// Namespaces plus a server of `kind` with options for either implementation.
    pub fn on_with_opts(
        kind: ServerKind,
        bin: &Path,
        room_extra: &[&str],
        opts: ServerOptions,
    ) -> anyhow::Result<Self> {
        let pair = NsPair::create()?;
        let server = Server::start_in_with(&pair, kind, bin, room_extra, opts)?;
        Ok(Self { server, pair })
    }

    /// Which server this is.
    pub fn kind(&self) -> ServerKind {
        self.server.kind
    }

    /// Kills the server and starts a new one of the same kind in its place.
    pub fn restart_server(&mut self, bin: &Path) -> anyhow::Result<()> {
        self.kill_server()?;
        self.server = Server::start_in(&self.pair, self.server.kind, bin, &[])?;
        Ok(())
    }

    /// Kills the server (SIGKILL) now; the `server` field keeps a finished placeholder
    /// until [`Env::restart_server`] or a new server replaces it.
    pub fn kill_server(&mut self) -> anyhow::Result<()> {
        let placeholder = Proc::spawn("placeholder", Command::new("true"))?;
        drop(std::mem::replace(&mut self.server.proc, placeholder));
        Ok(())
    }
}

/// A Rust client's room events, with those a test has not taken yet kept aside (in arrival
/// order): what each `outpost-livekit` test's client waits on.
#[derive(Debug)]
pub struct Events {
    rx: outpost_livekit::RoomEvents,
    /// Events received and not taken, oldest first.
    pub backlog: Vec<outpost_livekit::RoomEvent>,
}

impl Events {
    /// Events from `rx`, none kept yet.
    pub fn new(rx: outpost_livekit::RoomEvents) -> Self {
        Self {
            rx,
            backlog: Vec::new(),
        }
    }

    /// The first event (backlog first) that `pred` accepts; others stay in the backlog.
    /// Panics after `timeout`, naming `what` and the backlog, or when the channel closes.
    pub async fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        mut pred: impl FnMut(&outpost_livekit::RoomEvent) -> bool,
    ) -> outpost_livekit::RoomEvent {
        if let Some(i) = self.backlog.iter().position(&mut pred) {
            return self.backlog.remove(i);
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let ev = tokio::time::timeout_at(deadline, self.rx.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "timed out after {timeout:?} waiting for {what}; backlog: {:?}",
                        self.backlog
                    )
                })
                .unwrap_or_else(|| panic!("event channel closed waiting for {what}"));
            if pred(&ev) {
                return ev;
            }
            self.backlog.push(ev);
        }
    }

    /// The JSON reply with `op` that the Python peer `from` sent on the `reply` topic.
    pub async fn reply(&mut self, from: &str, op: &str, timeout: Duration) -> serde_json::Value {
        let ev = self
            .wait_for(&format!("{op} from {from}"), timeout, |ev| match ev {
                outpost_livekit::RoomEvent::Data(m)
                    if m.topic.as_deref() == Some("reply") && m.sender_identity == from =>
                {
                    serde_json::from_slice::<serde_json::Value>(&m.payload)
                        .map(|v| v["op"] == op)
                        .unwrap_or(false)
                }
                _ => false,
            })
            .await;
        let outpost_livekit::RoomEvent::Data(m) = ev else {
            unreachable!("wait_for returned an event its predicate refused")
        };
        serde_json::from_slice(&m.payload).unwrap_or_else(|e| panic!("{op} from {from}: {e}"))
    }

    /// Moves what has already arrived into the backlog.
    pub fn take_queued(&mut self) {
        while let Ok(ev) = self.rx.try_recv() {
            self.backlog.push(ev);
        }
    }

    /// Moves what arrives within `settle` into the backlog.
    pub async fn settle(&mut self, settle: Duration) {
        let deadline = tokio::time::Instant::now() + settle;
        while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, self.rx.recv()).await {
            self.backlog.push(ev);
        }
    }
}

/// The Rust client joined to `room` as `identity` (a token signed with [`DEV_SECRET`]),
/// and its events; panics when it cannot join.
pub async fn join(
    url: &str,
    room: &str,
    identity: &str,
    opts: outpost_livekit::RoomOptions,
) -> (outpost_livekit::Room, Events) {
    let token = token(room, identity, DEV_SECRET).unwrap_or_else(|e| panic!("token: {e:#}"));
    let (room, events) = outpost_livekit::Room::connect(url, &token, opts)
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"));
    (room, Events::new(events))
}

/// Sends the JSON command `cmd` to the Python peer `to` (topic `cmd`).
pub async fn send_cmd(room: &outpost_livekit::Room, to: &str, cmd: &serde_json::Value) {
    room.send_data(
        cmd.to_string().into_bytes(),
        outpost_livekit::DataOptions::topic("cmd").to(to),
    )
    .await
    .unwrap_or_else(|e| panic!("sending {cmd} to {to}: {e}"));
}

/// Holds the link from the server namespace `server_ns` (of an [`NsPair`]) to the client to
/// `rate` (a `tc` rate such as "1mbit": a token bucket on `v0`), or lifts the limit
/// (`None`): a slow reader as the server sees one. Takes the namespace's name, not the
/// pair, so a test body on another thread can call it.
pub fn set_server_link_rate(server_ns: &str, rate: Option<&str>) -> anyhow::Result<()> {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", server_ns, "tc", "qdisc"]);
    match rate {
        Some(r) => cmd.args([
            "add", "dev", "v0", "root", "tbf", "rate", r, "burst", "16kb", "latency", "2s",
        ]),
        None => cmd.args(["del", "dev", "v0", "root"]),
    };
    let out = cmd.output().context("running tc (Debian's iproute2)")?;
    if !out.status.success() {
        bail!("tc: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Feeds `track` a phase-continuous 440 Hz sine of `amplitude` (0 is silence, 1 full
/// scale): 20 ms at 48 kHz every 20 ms, until aborted or the track refuses a frame.
pub fn spawn_level(
    track: outpost_livekit::LocalAudioTrack,
    amplitude: f64,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut n: u64 = 0;
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        loop {
            tick.tick().await;
            let frame: Vec<i16> = (0..960u64)
                .map(|i| {
                    let t = (n + i) as f64 / 48_000.0;
                    (amplitude * 32767.0 * (2.0 * std::f64::consts::PI * 440.0 * t).sin()) as i16
                })
                .collect();
            n += 960;
            if track.push_frame(&frame).await.is_err() {
                return;
            }
        }
    })
}

/// The tests' tone: [`spawn_level`] at half scale.
pub fn spawn_tone(track: outpost_livekit::LocalAudioTrack) -> tokio::task::JoinHandle<()> {
    spawn_level(track, 0.5)
}
