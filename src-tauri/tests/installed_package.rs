//! The installed package, end to end: `apt-get install ./outpost_*.deb` (made by
//! `scripts/package.sh`), then the installed app under Xvfb through tauri-driver from the
//! first-run screen through "Try the local demo" to one tool call with consent, the
//! `outpost` command from PATH, then `apt-get remove --purge` and a check that nothing of
//! the package is left but the user's own data.
//!
//! It changes the system (installs and removes the package `outpost`), so it runs only
//! when `OUTPOST_DEB` names the .deb (scripts/test.sh sets it, as root); otherwise it says
//! so and passes. It refuses to run when `outpost` is already installed. The harness is
//! app_e2e's (`common/`), pointed at `/usr/bin/outpost-app`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail, ensure};
use common::{App, Driver, wait_for};
use outpost_tests::lkclient::in_netns;
use outpost_tests::netns::NetNs;

const PACKAGE: &str = "outpost";
const NOTE: &str = "installed and working\n";
/// What the package must install (besides its icons).
const INSTALLED: &[&str] = &[
    "/usr/bin/outpost-app",
    "/usr/bin/outpost",
    "/usr/bin/outpost-room",
    "/usr/bin/outpost-agent",
    "/usr/share/applications/Outpost.desktop",
];

fn run(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn installed() -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", PACKAGE])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
}

fn apt(args: &[&str]) -> Command {
    let mut c = Command::new("apt-get");
    c.args(["-y", "-q", "--no-install-recommends"])
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive");
    c
}

/// Purges the package if the test stops half way.
struct Uninstall;

impl Drop for Uninstall {
    fn drop(&mut self) {
        if installed() {
            let _ = apt(&["remove", "--purge", PACKAGE]).output();
        }
    }
}

#[test]
fn installed_deb_runs_the_demo_and_uninstalls_cleanly() {
    let Some(deb) = std::env::var_os("OUTPOST_DEB").map(PathBuf::from) else {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "installed_package: skipped; set OUTPOST_DEB=path/to/outpost_VERSION_ARCH.deb \
                 (scripts/package.sh makes it; scripts/test.sh runs this as root)"
            );
        }
        return;
    };
    let _one = common::serial();
    if let Err(e) = scenario(&deb) {
        let parts: Vec<String> = e.chain().map(ToString::to_string).collect();
        panic!("{}", parts.into_iter().rev().collect::<Vec<_>>().join("\n"));
    }
}

fn scenario(deb: &Path) -> anyhow::Result<()> {
    ensure!(deb.is_file(), "OUTPOST_DEB={} is not a file", deb.display());
    ensure!(
        !installed(),
        "the package {PACKAGE} is already installed; remove it first (this test installs \
         and purges it)"
    );

    // What the package says it needs: WebKitGTK and GTK, so apt pulls them in, and libopus
    // and WebRTC's audio processing (the app's echo canceller), which the programs link and
    // WebKitGTK does not (tauri.conf.json's deb.depends).
    let depends = run(Command::new("dpkg-deb")
        .args(["-f"])
        .arg(deb)
        .arg("Depends"))?;
    for lib in [
        "libwebkit2gtk-4.1-0",
        "libgtk-3-0",
        "libopus0",
        "libwebrtc-audio-processing1",
    ] {
        ensure!(depends.contains(lib), "Depends lacks {lib}: {depends}");
    }

    // 1. Install with apt, as a user would (`apt install ./outpost_*.deb`).
    let _guard = Uninstall;
    let deb_arg = if deb.is_absolute() {
        deb.to_path_buf()
    } else {
        std::env::current_dir()?.join(deb)
    };
    run(apt(&["install"]).arg(&deb_arg))?;
    ensure!(installed(), "apt-get install did not install {PACKAGE}");
    let files: Vec<PathBuf> = run(Command::new("dpkg-query").args(["-L", PACKAGE]))?
        .lines()
        .map(PathBuf::from)
        .collect();
    for f in INSTALLED {
        ensure!(
            files.iter().any(|p| p == Path::new(f)) && Path::new(f).is_file(),
            "{f} is not installed by the package; it installed:\n{files:#?}"
        );
    }
    ensure!(
        files
            .iter()
            .any(|p| p.starts_with("/usr/share/icons/hicolor")
                && p.extension().is_some_and(|e| e == "png")),
        "no icons installed: {files:#?}"
    );
    let entry = std::fs::read_to_string("/usr/share/applications/Outpost.desktop")?;
    for line in ["Exec=outpost-app", "Type=Application", "Name=Outpost"] {
        ensure!(
            entry.lines().any(|l| l == line),
            "the desktop entry lacks {line}:\n{entry}"
        );
    }

    // 2. The CLI from PATH (a plain system PATH, not the developer's).
    let help = run(Command::new("outpost")
        .arg("--help")
        .env("PATH", "/usr/local/bin:/usr/bin:/bin"))?;
    ensure!(
        help.contains("Usage: outpost"),
        "outpost --help said:\n{help}"
    );

    // 3. The installed app: first-run screen, the local demo, one tool call with consent.
    let fx = Fixture::new()?;
    let ns = NetNs::create().context("a network namespace (run as root)")?;
    let name = ns.name().to_owned();
    let root = fx.root.clone();
    let env = fx.env();
    let notes = fx.notes.clone();
    let config = fx.config.clone();
    in_netns(&name.clone(), move || async move {
        let driver = Driver::start(&name, &root.join("logs"), &env).await?;
        let r = demo(&driver, &notes, &config).await;
        r.map_err(|e| e.context(format!("--- driver and app log ---\n{}", driver.log())))
    })?;
    drop(ns);
    // The app wrote its history and settings: the user's data.
    let user_data = [
        fx.data.join("outpost.sqlite3"),
        fx.config.join("settings.toml"),
    ];
    for f in &user_data {
        ensure!(f.is_file(), "the app did not write {}", f.display());
    }

    // 4. Remove with purge: every file the package installed is gone, the user's data
    //    stays.
    run(&mut apt(&["remove", "--purge", PACKAGE]))?;
    ensure!(
        !installed(),
        "{PACKAGE} is still installed after remove --purge"
    );
    let status = run(Command::new("dpkg-query").args(["-W", "-f=${db:Status-Abbrev}", PACKAGE]))
        .unwrap_or_default();
    ensure!(
        status.trim().is_empty() || status.starts_with("un"),
        "dpkg still knows {PACKAGE} after the purge: {status:?}"
    );
    let left: Vec<&PathBuf> = files
        .iter()
        .filter(|p| p.is_file() || p.is_symlink())
        .collect();
    ensure!(
        left.is_empty(),
        "files of the package left after the purge: {left:#?}"
    );
    let info: Vec<PathBuf> = std::fs::read_dir("/var/lib/dpkg/info")?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with(&format!("{PACKAGE}.")) || n.starts_with(&format!("{PACKAGE}:"))
            })
        })
        .collect();
    ensure!(
        info.is_empty(),
        "dpkg's records of the package are left: {info:#?}"
    );
    for f in &user_data {
        ensure!(f.is_file(), "the purge removed the user's {}", f.display());
    }
    Ok(())
}

/// The app's folders (an empty config: the first-run screen) and a file outside every
/// allowed folder, so reading it needs consent.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    config: PathBuf,
    data: PathBuf,
    home: PathBuf,
    notes: PathBuf,
}

impl Fixture {
    fn new() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().to_path_buf();
        let (config, data, home) = (root.join("config"), root.join("data"), root.join("home"));
        let outside = root.join("outside");
        for d in [&config, &data, &home, &outside] {
            std::fs::create_dir_all(d)?;
        }
        let notes = outside.join("installed-notes.txt");
        std::fs::write(&notes, NOTE)?;
        Ok(Self {
            _dir: dir,
            root,
            config,
            data,
            home,
            notes,
        })
    }

    fn env(&self) -> Vec<(&'static str, OsString)> {
        let mut env = common::Profile {
            config: self.config.clone(),
            data: self.data.clone(),
            home: self.home.clone(),
        }
        .env(None);
        // The installed app must find its programs by itself.
        env.push(("OUTPOST_DEMO_BIN_DIR", OsString::new()));
        env
    }
}

async fn demo(driver: &Driver, notes: &Path, config: &Path) -> anyhow::Result<()> {
    let notes = notes.display().to_string();
    let app = App::launch_bin(Path::new("/usr/bin/outpost-app")).await?;
    app.wait_text("#welcome-title", "Welcome to Outpost")
        .await?;
    app.click_button(".first-run", "Try the local demo").await?;
    app.wait_text("#chat-title", "Outpost demo (scripted, not an AI)")
        .await?;
    app.wait_text("[data-testid=connection-state]", "Connected")
        .await?;
    // The demo's programs are the installed ones, children of the installed app.
    let programs = ["/usr/bin/outpost-room", "/usr/bin/outpost-agent"].map(Path::new);
    for p in programs {
        ensure!(
            common::running(p, config),
            "{} is not running for the app",
            p.display()
        );
    }

    app.say(&format!("read the file {notes}")).await?;
    let (text, paths) = app.wait_consent().await?;
    ensure!(paths == [notes.clone()], "the dialog lists {paths:?}");
    ensure!(text.contains(&format!("Read {notes}")), "dialog: {text}");
    app.answer_consent("Allow once").await?;
    app.wait_card("read", "completed", |c| {
        c["tool"] == "read_local_file" && c["text"].as_str().unwrap_or_default().contains(&notes)
    })
    .await?;
    app.wait_assistant(NOTE.trim()).await?;

    app.quit(driver, config).await?;
    wait_for("the demo's programs to end with the app", || async {
        Ok(programs
            .iter()
            .all(|p| !common::running(p, config))
            .then_some(()))
    })
    .await
}
