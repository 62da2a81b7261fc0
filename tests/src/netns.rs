//! Throw-away network namespaces with a veth pair, for WebRTC tests: the official
//! SDK's libwebrtc ignores loopback for ICE, so peers and server talk over a veth
//! pair inside a namespace the test made (and deletes on drop).

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context as _, bail};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A network namespace `op-<pid>-<n>` with veth ends `v0` (`.1`) and `v1` (`.2`) on a
/// per-test `10.x.y.0/24`, both inside the namespace. Deleted on drop.
#[derive(Debug)]
pub struct NetNs {
    name: String,
    /// Address of `v0`; servers bind here.
    pub server_ip: Ipv4Addr,
    /// Address of `v1`.
    pub peer_ip: Ipv4Addr,
}

impl NetNs {
    /// Creates the namespace. Fails with setup advice when not root or `ip` is missing.
    pub fn create() -> anyhow::Result<Self> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let name = format!("op-{pid}-{n}");
        let a = u8::try_from(100 + pid % 100).unwrap_or(100);
        let b = u8::try_from(n % 250).unwrap_or(0);
        let server_ip = Ipv4Addr::new(10, a, b, 1);
        let peer_ip = Ipv4Addr::new(10, a, b, 2);
        let out = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .context("running `ip` (install Debian's iproute2)")?;
        if !out.status.success() {
            bail!(
                "`ip netns add {name}` failed: {} (these tests need root and iproute2)",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let ns = Self {
            name,
            server_ip,
            peer_ip,
        };
        let script = format!(
            "set -e; ip link set lo up; ip link add v0 type veth peer name v1; \
             ip addr add {server_ip}/24 dev v0; ip addr add {peer_ip}/24 dev v1; \
             ip link set v0 up; ip link set v1 up"
        );
        let out = ns.command("sh").args(["-c", &script]).output()?;
        if !out.status.success() {
            bail!(
                "setting up veth in {}: {}",
                ns.name,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(ns)
    }

    /// Namespace name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A command that runs `program` inside the namespace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}
