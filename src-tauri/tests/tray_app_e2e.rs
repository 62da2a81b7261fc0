//! End to end: the tray icon of the real app under Xvfb (the `app_e2e.rs` harness), driven
//! through D-Bus as a desktop panel drives it.
//!
//! `tests/py/sni_host.py` plays the panel on the test's session bus: it serves
//! org.kde.StatusNotifierWatcher, so libayatana-appindicator registers the app's
//! StatusNotifierItem with it, and it reads and clicks the item's com.canonical.dbusmenu
//! menu. With the local demo (its sound through a private PulseAudio daemon) and "keep
//! running in the tray" on:
//!
//! - Settings → Desktop's "Start Outpost when I log in" writes the XDG autostart entry
//!   (`~/.config/autostart/dev.outpost.app.desktop`, `Exec=<the app> --background`) and
//!   removes it again;
//! - the menu's first line follows the link and the assistant; Voice and Mute clicked in the
//!   menu switch voice on and mute the microphone (the chat's voice bar says so, and the
//!   menu's checks follow);
//! - the window closed (a WM_DELETE_WINDOW message, as a window manager's close button
//!   sends: `tests/py/close_window.py`) hides it and the session goes on; a consent
//!   question then goes out as a desktop notification saying how many seconds are left,
//!   and the tray shows it counting down (its label "Outpost: permission needed");
//! - "Open Outpost" brings the window back with the question, its countdown no longer than
//!   the notification said, and it is answered there; "Quit Outpost" ends the app and the
//!   demo's programs.
//!
//! Needs what `app_e2e.rs` needs plus pulseaudio, python3-gi and python3-xlib
//! (scripts/setup.sh).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Child, Stdio};

use anyhow::{Context as _, bail, ensure};
use common::{App, Driver, Profile, wait_for};
use outpost_tests::lkclient::in_netns;
use outpost_tests::netns::NetNs;
use outpost_tests::pulse::Pulse;
use serde_json::Value;

const NOTE: &str = "the kingfisher dives at dusk";

#[test]
fn the_tray_drives_voice_and_a_question_reaches_the_user_with_the_window_closed() {
    let _one = common::serial();
    common::require_demo_programs().unwrap();
    let pulse = Pulse::start().expect("pulseaudio");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let profile = Profile::new(&root).unwrap();
    std::fs::write(
        profile.config.join("settings.toml"),
        "configured = true\ndemo = true\nkeep_in_tray = true\n",
    )
    .unwrap();
    std::fs::write(
        profile.config.join("policy.toml"),
        "consent_timeout_secs = 300\n",
    )
    .unwrap();
    let notes = root.join("kingfisher.txt");
    std::fs::write(&notes, format!("{NOTE}\n")).unwrap();
    let ns = NetNs::create().expect("a network namespace (run as root)");
    let name = ns.name().to_owned();
    let server = pulse.server();
    let outcome = in_netns(&name.clone(), move || async move {
        let mut env = profile.env(None);
        env.push(("PULSE_SERVER", server.into()));
        let driver = Driver::start(&name, &root.join("logs"), &env).await?;
        let r = scenario(&driver, &profile, &notes).await;
        driver.with_log(r, None)
    });
    drop(ns);
    drop(pulse);
    outcome.unwrap_or_else(|e| common::fail(&e));
}

/// `tests/py/sni_host.py` on the test's display and session bus.
fn sni(driver: &Driver, args: &[&str]) -> anyhow::Result<Value> {
    let script = outpost_tests::python::scripts_dir().join("sni_host.py");
    let out = driver
        .command(Path::new("/usr/bin/python3"))
        .arg(&script)
        .args(args)
        .output()
        .context("running tests/py/sni_host.py (needs python3-gi)")?;
    if !out.status.success() {
        bail!(
            "sni_host.py {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).with_context(|| format!("sni_host.py said {text}"))
}

/// The panel stand-in serving the watcher; its JSON lines go to `log`.
struct Host {
    child: Child,
    log: std::path::PathBuf,
}

impl Host {
    async fn start(driver: &Driver) -> anyhow::Result<Host> {
        let log = driver.dir.join("sni_host.log");
        let child = driver
            .command(Path::new("/usr/bin/python3"))
            .arg(outpost_tests::python::scripts_dir().join("sni_host.py"))
            .arg("serve")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log)?)
            .stderr(std::fs::File::create(driver.dir.join("sni_host.err"))?)
            .spawn()
            .context("starting tests/py/sni_host.py")?;
        let host = Host { child, log };
        wait_for("the StatusNotifierWatcher on the session bus", || async {
            Ok(host
                .events()
                .iter()
                .any(|e| e["event"] == "ready")
                .then_some(()))
        })
        .await?;
        Ok(host)
    }

    fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tray menu's items: label → (enabled, checked).
fn menu(driver: &Driver, bus: &str, path: &str) -> anyhow::Result<Vec<(String, bool, bool)>> {
    let v = sni(driver, &["layout", bus, path])?;
    Ok(v["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|i| {
            (
                i["label"].as_str().unwrap_or_default().to_owned(),
                i["enabled"] == true,
                i["checked"] == true,
            )
        })
        .collect())
}

/// Waits until the menu has an item starting with `label` that `ok` accepts.
async fn menu_item(
    driver: &Driver,
    bus: &str,
    path: &str,
    label: &str,
    ok: impl Fn(&(String, bool, bool)) -> bool,
) -> anyhow::Result<(String, bool, bool)> {
    let mut last = Vec::new();
    let r = wait_for(&format!("the tray menu's {label:?}"), || {
        let items = menu(driver, bus, path);
        let found = items.as_ref().ok().and_then(|items| {
            items
                .iter()
                .find(|i| i.0.starts_with(label) && ok(i))
                .cloned()
        });
        if let Ok(items) = items {
            last = items;
        }
        async move { Ok(found) }
    })
    .await;
    r.with_context(|| format!("the menu: {last:?}"))
}

async fn scenario(driver: &Driver, profile: &Profile, notes: &Path) -> anyhow::Result<()> {
    let notes = notes.display().to_string();
    let host = Host::start(driver).await?;
    let app = App::launch().await?;
    app.wait_text("[data-testid=connection-state]", "Connected")
        .await?;
    // The app's indicator registered with the panel; its menu is on the bus.
    let item = wait_for("the app's StatusNotifierItem", || async {
        Ok(host.events().into_iter().find(|e| e["event"] == "item"))
    })
    .await?;
    let bus = item["bus"].as_str().unwrap_or_default().to_owned();
    let path = item["path"].as_str().unwrap_or_default().to_owned();
    let props = sni(driver, &["props", &bus, &path])?;
    let menu_path = props["menu"].as_str().unwrap_or_default().to_owned();
    ensure!(menu_path.starts_with('/'), "the item's properties: {props}");
    menu_item(
        driver,
        &bus,
        &menu_path,
        "Connected to Outpost demo",
        |_| true,
    )
    .await?;
    for label in ["Open Outpost", "Quit Outpost"] {
        menu_item(driver, &bus, &menu_path, label, |i| i.1).await?;
    }

    // Start at login (Settings → Desktop): the XDG autostart entry comes and goes.
    let entry = profile
        .home
        .join(".config/autostart/dev.outpost.app.desktop");
    app.open_screen("Settings").await?;
    app.click_button(".subnav", "Desktop").await?;
    let keep = app.wait_css("[data-testid=keep-in-tray]").await?;
    ensure!(
        keep.prop("checked").await?.as_deref() == Some("true"),
        "keep in tray is not shown as on"
    );
    app.click("[data-testid=start-at-login]").await?;
    wait_for("the autostart entry", || async {
        Ok(entry.is_file().then_some(()))
    })
    .await?;
    driver.screenshot(&app, "settings-desktop").await?;
    let text = std::fs::read_to_string(&entry)?;
    let exe = std::fs::canonicalize(&app.bin)?;
    ensure!(
        text.contains(&format!("Exec={} --background\n", exe.display())),
        "the entry: {text}"
    );
    app.click("[data-testid=start-at-login]").await?;
    wait_for("the autostart entry to go", || async {
        Ok((!entry.exists()).then_some(()))
    })
    .await?;
    app.open_screen("Chat").await?;

    // Voice and mute from the tray take effect in the app.
    sni(driver, &["click", &bus, &menu_path, "Voice"])?;
    app.wait_text("[data-testid=mic-state]", "Hold to talk")
        .await?;
    menu_item(driver, &bus, &menu_path, "Voice", |i| i.2).await?;
    let status = menu_item(driver, &bus, &menu_path, "Connected to", |_| true).await?;
    ensure!(status.0.contains("voice on"), "status line: {}", status.0);
    sni(driver, &["click", &bus, &menu_path, "Mute microphone"])?;
    app.wait_text("[data-testid=mic-state]", "Muted").await?;
    menu_item(driver, &bus, &menu_path, "Mute microphone", |i| i.2).await?;
    menu_item(driver, &bus, &menu_path, "Connected to", |i| {
        i.0.contains("microphone muted")
    })
    .await?;

    // The window closed: hidden, the app and its session go on.
    let closed = driver
        .command(Path::new("/usr/bin/python3"))
        .arg(outpost_tests::python::scripts_dir().join("close_window.py"))
        .arg("Outpost")
        .output()
        .context("running tests/py/close_window.py (needs python3-xlib)")?;
    ensure!(
        closed.status.success(),
        "no window to close: {}",
        String::from_utf8_lossy(&closed.stderr)
    );
    wait_for("the window to close to the tray", || async {
        Ok(driver
            .log()
            .contains("window closed to the tray")
            .then_some(()))
    })
    .await?;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    ensure!(
        common::running(&app.bin, &profile.config),
        "the app quit when its window closed"
    );

    // A question while the window is away: a notification with the time left, and the
    // tray counting down. (The message is sent through the page, which lives on.)
    let ask = serde_json::to_string(&format!("read the file {notes}"))?;
    let sent = app
        .js(&format!(
            "const t = document.querySelector('#composer-input'); t.value = {ask}; \
             t.dispatchEvent(new Event('input', {{ bubbles: true }})); \
             t.closest('form').requestSubmit(); return 'ok';"
        ))
        .await?;
    ensure!(sent == "ok", "{sent}");
    let (summary, body) = wait_for("a Notify call on the session bus", || async {
        Ok(driver.notifications().into_iter().next())
    })
    .await?;
    ensure!(summary == "Outpost needs your permission", "{summary}");
    let prefix = format!("Read {notes} — denied in ");
    let told: u64 = body
        .strip_prefix(&prefix)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("the notification said {body:?}"))?;
    ensure!(told <= 300 && told > 250, "{body}");
    let waiting = menu_item(driver, &bus, &menu_path, "Permission needed", |_| true).await?;
    ensure!(
        waiting
            .0
            .starts_with(&format!("Permission needed: Read {notes} — denied in ")),
        "{}",
        waiting.0
    );
    // Beside the icon (the indicator's label: Tauri's tray title on Linux).
    let label = sni(driver, &["props", &bus, &path])?;
    ensure!(
        label["label"] == "Outpost: permission needed",
        "the item: {label}"
    );

    // Open from the tray: the question is there, honest about the time left; answered.
    sni(driver, &["click", &bus, &menu_path, "Open Outpost"])?;
    app.wait_consent().await?;
    let left = app
        .wait_css("[data-testid=countdown] strong")
        .await?
        .text()
        .await?;
    let (m, s) = left.split_once(':').context("a countdown M:SS")?;
    let left_secs: u64 = m.parse::<u64>()? * 60 + s.parse::<u64>()?;
    ensure!(
        left_secs <= told && left_secs > 0,
        "the dialog says {left} left; the notification said {told} s"
    );
    app.answer_consent("Allow once").await?;
    app.wait_assistant(NOTE).await?;
    menu_item(driver, &bus, &menu_path, "Connected to", |_| true).await?;

    // Quit from the tray: the app and the demo's programs end.
    sni(driver, &["click", &bus, &menu_path, "Quit Outpost"])?;
    let bin_dir = app.bin.parent().context("the app's folder")?.to_path_buf();
    let programs = [
        app.bin.clone(),
        bin_dir.join("outpost-room"),
        bin_dir.join("outpost-agent"),
    ];
    wait_for("the app and the demo's programs to end", || async {
        Ok(programs
            .iter()
            .all(|p| !common::running(p, &profile.config))
            .then_some(()))
    })
    .await?;
    drop(app);
    Ok(())
}
