//! A Secret Service for tests: a private D-Bus session with GNOME Keyring's secrets
//! component in it, unlocked with a test password, so Outpost's `Keyring` stores run
//! against the real thing. dbus-daemon listens on an abstract socket, which belongs to the
//! network namespace it starts in: start it in the namespace of the programs that use it.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};

/// The login keyring's password.
pub const PASSWORD: &str = "outpost-test-password";

/// A private D-Bus session with GNOME Keyring's secrets component in it, unlocked. Both
/// daemons are killed on drop (gnome-keyring also quits when its bus goes away).
#[derive(Debug)]
pub struct SecretService {
    /// The bus this started (none when it joined one, [`SecretService::join`]).
    bus: Option<Child>,
    keyring: Child,
    /// `DBUS_SESSION_BUS_ADDRESS` for the programs that use it.
    pub address: String,
    /// The daemons' home (`XDG_RUNTIME_DIR` is its `run` folder).
    pub home: PathBuf,
}

fn need(program: &str) -> anyhow::Result<()> {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false);
    ensure!(
        found,
        "`{program}` is not installed: this test needs a Secret Service daemon in a private \
         D-Bus session (Debian packages gnome-keyring, dbus-daemon and dbus-bin; \
         scripts/setup.sh installs them)"
    );
    Ok(())
}

impl SecretService {
    /// Starts both daemons with their files under `home`; fails (naming the Debian
    /// packages) when they are not installed.
    pub fn start(home: &Path) -> anyhow::Result<Self> {
        Self::on(home, None)
    }

    /// Starts GNOME Keyring on the session bus at `address` (one a test harness started,
    /// dbus-run-session's for the app), which outlives it.
    pub fn join(home: &Path, address: &str) -> anyhow::Result<Self> {
        Self::on(home, Some(address))
    }

    fn on(home: &Path, joined: Option<&str>) -> anyhow::Result<Self> {
        for p in ["dbus-daemon", "dbus-send", "gnome-keyring-daemon"] {
            need(p)?;
        }
        let runtime = home.join("run");
        std::fs::create_dir_all(&runtime)?;
        std::fs::set_permissions(
            &runtime,
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )?;
        let env = |c: &mut Command| {
            c.env("HOME", home)
                .env("XDG_DATA_HOME", home.join("data"))
                .env("XDG_CONFIG_HOME", home.join("config"))
                .env("XDG_RUNTIME_DIR", &runtime)
                .env_remove("DBUS_SESSION_BUS_ADDRESS")
                .env_remove("GNOME_KEYRING_CONTROL");
        };
        let (mut bus, address) = match joined {
            Some(address) => (None, address.to_owned()),
            None => {
                let mut cmd = Command::new("dbus-daemon");
                cmd.args(["--session", "--nofork", "--print-address=1"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null());
                env(&mut cmd);
                let mut bus = cmd.spawn().context("starting dbus-daemon --session")?;
                let mut line = String::new();
                BufReader::new(bus.stdout.take().context("dbus-daemon stdout")?)
                    .read_line(&mut line)
                    .context("reading the bus address")?;
                let address = line.trim().to_owned();
                if !address.starts_with("unix:") {
                    let _ = bus.kill();
                    bail!("dbus-daemon printed no address (got {address:?})");
                }
                (Some(bus), address)
            }
        };
        // `--unlock` reads the login keyring's password from stdin and creates the
        // "login" collection (the default alias) with it when there is none yet.
        let mut cmd = Command::new("gnome-keyring-daemon");
        env(&mut cmd);
        cmd.args(["--foreground", "--unlock", "--components=secrets"])
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(home.join("gnome-keyring.log"))?);
        let mut keyring = match cmd.spawn() {
            Ok(k) => k,
            Err(e) => {
                if let Some(bus) = bus.as_mut() {
                    let _ = bus.kill();
                    let _ = bus.wait();
                }
                bail!("starting gnome-keyring-daemon: {e}");
            }
        };
        {
            let mut stdin = keyring.stdin.take().context("gnome-keyring stdin")?;
            stdin.write_all(PASSWORD.as_bytes())?;
        }
        let me = Self {
            bus,
            keyring,
            address,
            home: home.to_owned(),
        };
        // Wait for the daemon to own the Secret Service name before anyone calls it: a
        // call before that would make the bus activate a second, locked daemon.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut dbus_send = Command::new("dbus-send");
            dbus_send.env("DBUS_SESSION_BUS_ADDRESS", &me.address);
            if crate::proc::bus_name_owned(dbus_send, "org.freedesktop.secrets") {
                break;
            }
            ensure!(
                Instant::now() < deadline,
                "gnome-keyring-daemon did not take org.freedesktop.secrets within 20 s; its \
                 log:\n{}",
                std::fs::read_to_string(home.join("gnome-keyring.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = Command::new("dbus-send")
            .args([
                "--session",
                "--print-reply",
                "--dest=org.freedesktop.secrets",
                "/org/freedesktop/secrets",
                "org.freedesktop.Secret.Service.ReadAlias",
                "string:default",
            ])
            .env("DBUS_SESSION_BUS_ADDRESS", &me.address)
            .output()?;
        let alias = String::from_utf8_lossy(&out.stdout);
        ensure!(
            alias.contains("/org/freedesktop/secrets/collection/"),
            "the Secret Service has no default collection after --unlock: {alias}"
        );
        Ok(me)
    }
}

impl Drop for SecretService {
    fn drop(&mut self) {
        let _ = self.keyring.kill();
        let _ = self.keyring.wait();
        if let Some(bus) = self.bus.as_mut() {
            let _ = bus.kill();
            let _ = bus.wait();
        }
    }
}
