//! End to end: the system-wide push-to-talk shortcut of the real app under Xvfb (the
//! `app_e2e.rs` harness), pressed with xdotool while another X window has the focus.
//!
//! The app talks to an official-SDK voice agent (`tests/py/voice_agent.py`, listening all
//! the time: it reports each second of sound it hears on Outpost's microphone track), with
//! a private PulseAudio daemon as its sound card and a 440 Hz tone playing into its
//! microphone. Voice on, push-to-talk: while a GTK window of another program has the focus
//! (`tests/py/drag_source.py`, here just a window), the agent hears nothing; the default
//! shortcut Ctrl+Alt+Space held with `xdotool keydown` makes the microphone live (the chat's
//! voice bar says "Mic live") and the agent hears 440 Hz; released with `xdotool keyup`,
//! it hears nothing more.
//!
//! Twice: through the X11 key grab (`OUTPOST_SHORTCUT_BACKEND=x11`), and through the
//! desktop portal's GlobalShortcuts (`=portal`, what a Wayland session uses) against the
//! real portal stack on the test's session bus: `xdg-desktop-portal` with KDE's backend
//! `xdg-desktop-portal-kde` and KDE's shortcut daemon `kglobalaccel5` (which takes the key
//! on the X display). Settings → Voice says which one works; the portal case fails if the
//! app grabs the key itself. Needs what `voice_app_e2e.rs` needs plus xdotool, python3-gi
//! and, for the portal, xdg-desktop-portal, xdg-desktop-portal-kde and
//! libkf5globalaccel-bin (scripts/setup.sh).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use common::{App, Assistant, Bed, Driver, Profile, agent_command, wait_for};
use outpost_tests::lkclient::in_netns;
use outpost_tests::pulse::Pulse;
use outpost_tests::server::ServerKind;

const ROOM: &str = "shortcut-app-e2e";

/// Which way the app takes the key.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Backend {
    X11,
    Portal,
}

#[test]
fn the_shortcut_held_in_another_window_is_the_only_time_the_agent_hears_the_microphone() {
    held_only(Backend::X11);
}

#[test]
fn through_the_desktop_portal_the_shortcut_held_in_another_window_is_the_only_time_the_agent_hears()
{
    held_only(Backend::Portal);
}

fn held_only(backend: Backend) {
    let _one = common::serial();
    let pulse = Pulse::start().expect("pulseaudio");
    let bed = Bed::new(ServerKind::Room, ROOM).unwrap();
    let (root, profile, token) = (bed.root.clone(), bed.profile.clone(), bed.token.clone());
    let mut mic = pulse.play_tone("mic_in", 440.0, 300).unwrap();
    let (server_ns, client_ns) = (bed.pair.server_ns.clone(), bed.pair.client_ns.clone());
    let (url, pulse_server) = (bed.server.url.clone(), pulse.server());
    let outcome = in_netns(&client_ns.clone(), move || async move {
        let mut env = profile.env(Some(&token));
        env.push(("PULSE_SERVER", pulse_server.into()));
        let stack_env = env.clone();
        env.push((
            "OUTPOST_SHORTCUT_BACKEND",
            match backend {
                Backend::X11 => "x11",
                Backend::Portal => "portal",
            }
            .into(),
        ));
        if backend == Backend::Portal {
            // Also for whatever D-Bus starts on demand: the portal picks KDE's backend by it.
            env.extend(PORTAL_ENV.iter().map(|(k, v)| (*k, (*v).into())));
        }
        let driver = Driver::start(&client_ns, &root.join("logs"), &env).await?;
        let _stack = match backend {
            Backend::Portal => {
                let s = PortalStack::start(&driver, &stack_env).await;
                Some(driver.with_log(s, None)?)
            }
            Backend::X11 => None,
        };
        let py = outpost_tests::python::python()?;
        let mut cmd = agent_command(&py, "voice_agent.py", &server_ns, &url, ROOM, "voice-agent")?;
        cmd.env("LK_KEEP_LISTENING", "1")
            .env("LK_TALK_SECONDS", "280")
            .env("LK_TIMEOUT", "300");
        let agent = Assistant::spawn(cmd, &root.join("agent.stderr"))?;
        let r = scenario(&driver, &agent, &profile, backend).await;
        driver.with_log(r, Some(&agent))
    });
    let _ = mic.kill();
    let _ = mic.wait();
    drop(bed);
    outcome.unwrap_or_else(|e| common::fail(&e));
}

/// Seconds of sound the agent has reported hearing on Outpost's microphone.
fn heard(agent: &Assistant) -> usize {
    agent
        .events()
        .iter()
        .filter(|e| e["op"] == "hearing")
        .count()
}

/// `xdotool ARGS` on the test's display.
fn xdotool(driver: &Driver, args: &[&str]) -> anyhow::Result<String> {
    let out = driver
        .command(Path::new("xdotool"))
        .args(args)
        .output()
        .context("running xdotool (apt-get install xdotool)")?;
    ensure!(
        out.status.success(),
        "xdotool {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

async fn scenario(
    driver: &Driver,
    agent: &Assistant,
    profile: &Profile,
    backend: Backend,
) -> anyhow::Result<()> {
    let app = App::launch().await?;
    app.wait_text("[data-testid=connection-state]", "Connected")
        .await?;
    wait_for("the agent to be ready", || async {
        Ok(agent.events().into_iter().find(|e| e["op"] == "ready"))
    })
    .await
    .with_context(|| agent.report())?;
    // Settings → Voice: the shortcut works in every window, the way asked for.
    app.open_screen("Settings").await?;
    app.click_button(".subnav", "Voice").await?;
    let status = match backend {
        Backend::X11 => "Ctrl+Alt+Space works in every window (an X11 key grab)",
        Backend::Portal => {
            "Ctrl+Alt+Space works in every window through the desktop portal (GlobalShortcuts)"
        }
    };
    app.wait_text("[data-testid=shortcut-status]", status)
        .await?;
    let shot = match backend {
        Backend::X11 => "settings-voice",
        Backend::Portal => "settings-voice-portal",
    };
    driver.screenshot(&app, shot).await?;
    app.open_screen("Chat").await?;
    app.click("[data-testid=voice-toggle]").await?;
    app.wait_text("[data-testid=mic-state]", "Hold to talk")
        .await?;

    // Another program's window takes the focus.
    let other = driver
        .command(Path::new("/usr/bin/python3"))
        .arg(outpost_tests::python::scripts_dir().join("drag_source.py"))
        .args([
            profile.config.join("settings.toml").to_str().unwrap_or("/"),
            "1130",
            "60",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting another X window (tests/py/drag_source.py)")?;
    let mut other = Guard(other);
    let id = wait_for("the other window", || async {
        Ok(xdotool(driver, &["search", "--name", "^drag source$"])
            .ok()
            .and_then(|s| s.lines().next().map(str::to_owned)))
    })
    .await?;
    xdotool(driver, &["windowfocus", "--sync", &id])?;
    let focused = xdotool(driver, &["getwindowfocus", "getwindowname"])?;
    ensure!(focused == "drag source", "the focus is on {focused:?}");

    // Voice on but the key not held: nothing reaches the agent.
    tokio::time::sleep(Duration::from_secs(3)).await;
    ensure!(
        heard(agent) == 0,
        "the agent heard the microphone before the key was held"
    );

    // Held in the other window: the microphone is live and the agent hears 440 Hz.
    xdotool(driver, &["keydown", "ctrl+alt+space"])?;
    let held = async {
        app.wait_text("[data-testid=mic-state]", "Mic live").await?;
        wait_for("the agent to hear the microphone", || async {
            Ok(agent.events().into_iter().find(|e| e["op"] == "hearing"))
        })
        .await
    }
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    xdotool(driver, &["keyup", "ctrl+alt+space"])?;
    let first = held.with_context(|| agent.report())?;
    let f = first["freq_hz"].as_f64().unwrap_or(0.0);
    ensure!((f - 440.0).abs() <= 8.8, "the agent heard {f} Hz");
    let focused = xdotool(driver, &["getwindowfocus", "getwindowname"])?;
    ensure!(focused == "drag source", "the focus moved to {focused:?}");

    // Released: the microphone is off again, and the agent hears nothing more.
    app.wait_text("[data-testid=mic-state]", "Hold to talk")
        .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = heard(agent);
    tokio::time::sleep(Duration::from_secs(4)).await;
    ensure!(
        heard(agent) == after,
        "the agent kept hearing the microphone after the key came up ({after} → {})",
        heard(agent)
    );
    if backend == Backend::Portal {
        rebind(driver, &app, &id).await?;
    }
    let _ = other.0.kill();
    app.quit(driver, &profile.config).await?;
    Ok(())
}

/// Through the portal, a shortcut saved in Settings → Voice is bound anew and the old one
/// let go: the old key no longer talks, the new one does (held in the window `other`).
async fn rebind(driver: &Driver, app: &App, other: &str) -> anyhow::Result<()> {
    app.open_screen("Settings").await?;
    app.click_button(".subnav", "Voice").await?;
    let input = app.wait_css("[data-testid=shortcut]").await?;
    input.clear().await?;
    input.send_keys("Ctrl+Alt+K").await?;
    app.click_button("form[aria-label='System-wide shortcut']", "Save")
        .await?;
    let bound = "Ctrl+Alt+K works in every window through the desktop portal (GlobalShortcuts)";
    app.wait_text("[data-testid=shortcut-status]", bound)
        .await?;
    app.open_screen("Chat").await?;
    app.wait_text("[data-testid=mic-state]", "Hold to talk")
        .await?;
    xdotool(driver, &["windowfocus", "--sync", other])?;

    xdotool(driver, &["keydown", "ctrl+alt+space"])?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let state = app
        .wait_css("[data-testid=mic-state]")
        .await?
        .text()
        .await?;
    xdotool(driver, &["keyup", "ctrl+alt+space"])?;
    ensure!(
        state.contains("Hold to talk"),
        "the old shortcut still talks after the new one was saved: {state:?}"
    );

    xdotool(driver, &["keydown", "ctrl+alt+k"])?;
    let live = app.wait_text("[data-testid=mic-state]", "Mic live").await;
    xdotool(driver, &["keyup", "ctrl+alt+k"])?;
    live?;
    app.wait_text("[data-testid=mic-state]", "Hold to talk")
        .await?;
    Ok(())
}

/// Kills the child when dropped.
struct Guard(std::process::Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The real portal stack's environment: KDE's portal backend and its shortcut daemon on
/// the X display.
const PORTAL_ENV: &[(&str, &str)] = &[("XDG_CURRENT_DESKTOP", "KDE"), ("QT_QPA_PLATFORM", "xcb")];

/// `kglobalaccel5`, `xdg-desktop-portal-kde` and `xdg-desktop-portal` on the test's
/// display and session bus (their logs in the driver's folder), each up once it owns its
/// bus name; ended on drop. (The portal's own helpers, which D-Bus starts, end with the
/// bus.)
struct PortalStack(Vec<Guard>);

impl PortalStack {
    /// The programs and the bus name each takes.
    const PARTS: &[(&str, &str)] = &[
        ("/usr/bin/kglobalaccel5", "org.kde.kglobalaccel"),
        (
            "/usr/lib/x86_64-linux-gnu/libexec/xdg-desktop-portal-kde",
            "org.freedesktop.impl.portal.desktop.kde",
        ),
        (
            "/usr/libexec/xdg-desktop-portal",
            "org.freedesktop.portal.Desktop",
        ),
    ];

    /// `env`: the app's (its HOME keeps kglobalaccel's settings inside the test's folder).
    async fn start(driver: &Driver, env: &[(&str, std::ffi::OsString)]) -> anyhow::Result<Self> {
        let mut stack = PortalStack(Vec::new());
        for (program, name) in Self::PARTS {
            let path = Path::new(program);
            ensure!(
                path.exists(),
                "{program} is missing (apt-get install xdg-desktop-portal \
                 xdg-desktop-portal-kde libkf5globalaccel-bin, or scripts/setup.sh)"
            );
            let stem = path.file_name().unwrap_or_default().to_string_lossy();
            let log = std::fs::File::create(driver.dir.join(format!("{stem}.log")))?;
            let mut cmd = driver.command(path);
            cmd.envs(env.iter().map(|(k, v)| (k, v)))
                .envs(PORTAL_ENV.iter().copied())
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log);
            stack.0.push(Guard(
                cmd.spawn().with_context(|| format!("starting {program}"))?,
            ));
            wait_for(&format!("{name} on the session bus"), || async {
                let dbus_send = driver.command(Path::new("dbus-send"));
                Ok(outpost_tests::proc::bus_name_owned(dbus_send, name).then_some(()))
            })
            .await?;
        }
        Ok(stack)
    }
}
