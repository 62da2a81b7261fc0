//! Harness for the end-to-end tests of the real app: a virtual display, a D-Bus session
//! with a notification daemon, tauri-driver, and a WebDriver client (fantoccini) that
//! drives the app's web view like a person would.
//!
//! Everything runs inside a network namespace the test made: `xvfb-run` (Xvfb), then
//! `dbus-run-session` (D-Bus auto-starts `dunst` for notifications), then a shell that
//! starts `dbus-monitor` on the notification interface and `exec`s tauri-driver, which
//! starts WebKitWebDriver, which launches the app binary. The WebDriver client runs on a
//! tokio runtime inside the same namespace (`outpost_tests::lkclient::in_netns`) and talks
//! to tauri-driver on the namespace's own loopback, so port 4444 never collides with
//! anything outside, and the app's WebRTC traffic stays in the namespace.
//!
//! [`Driver`] owns that process tree and ends it on drop; [`App`] is one WebDriver
//! session (one run of the app). [`Assistant`] is the example Python assistant
//! (official LiveKit SDK) in scenario mode; [`RoomServer`] an in-process `outpost-room`.
//!
//! Shared by `app_e2e.rs` and `installed_package.rs`; each uses a part of it.
#![allow(dead_code)]

use std::ffi::OsString;
use std::io::{BufRead as _, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// The app binary Cargo built for these tests.
pub const APP_BIN: &str = env!("CARGO_BIN_EXE_outpost-app");

/// Xvfb's options (`xvfb-run -s`): a screen larger than the window, so dunst's
/// notifications sit beside it rather than over it.
const XVFB_ARGS: &str = "-screen 0 1280x800x24";

/// The app window's size (tauri.conf.json); screenshots are cropped to it.
pub const WINDOW: (u32, u32) = (1100, 760);

/// How long any single UI expectation may take before the test fails. Generous: a cold
/// WebKit start on a loaded 2-core CI machine takes seconds.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// The WebDriver scenarios run one at a time: each starts a display, WebKit and the app,
/// which is all a 2-core machine can carry at once.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Ends a test that failed: the error's cause first, then what it happened during, then
/// the logs.
pub fn fail(e: &anyhow::Error) -> ! {
    let parts: Vec<String> = e.chain().map(ToString::to_string).collect();
    panic!("{}", parts.into_iter().rev().collect::<Vec<_>>().join("\n"));
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    outpost_tests::python::workspace_root()
}

/// Fails with setup advice when a program the tests need is missing.
pub fn require_tools() -> anyhow::Result<()> {
    let needed = [
        ("xvfb-run", "apt-get install xvfb xauth"),
        (
            "dbus-run-session",
            "apt-get install dbus-x11 (or dbus-daemon)",
        ),
        ("dbus-monitor", "apt-get install dbus-x11 (or dbus-bin)"),
        ("dbus-send", "apt-get install dbus-x11 (or dbus-bin)"),
        ("dunst", "apt-get install dunst"),
        ("WebKitWebDriver", "apt-get install webkit2gtk-driver"),
        (
            "tauri-driver",
            "cargo install tauri-driver --version ^2 --locked",
        ),
    ];
    for (prog, how) in needed {
        if which(prog).is_none() {
            bail!("{prog} is not on PATH; install it ({how}) or run scripts/setup.sh");
        }
    }
    Ok(())
}

fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    // `cargo install` puts tauri-driver here; PATH may not have it (e.g. under sudo).
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".cargo/bin"));
    }
    dirs.into_iter().map(|d| d.join(prog)).find(|p| p.is_file())
}

/// Polls `probe` until it yields a value; fails naming `what` after `PATIENCE`.
pub async fn wait_for<T, F, Fut>(what: &str, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + PATIENCE;
    let mut last_err = None;
    loop {
        // A probe that never returns (a WebDriver call to an app that died) must not hang
        // the test.
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, probe()).await {
            Ok(Ok(Some(v))) => return Ok(v),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => last_err = Some(e),
            Err(_) => last_err = Some(anyhow::anyhow!("the last check did not return")),
        }
        if Instant::now() > deadline {
            let why = last_err.map(|e| format!(" (last error: {e:#})"));
            bail!(
                "{what} did not happen within {PATIENCE:?}{}",
                why.unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// --- the display, D-Bus session and tauri-driver ---------------------------------------

/// Xvfb + D-Bus session (with dunst and a `dbus-monitor` on notifications) + tauri-driver,
/// in network namespace `netns`. The whole process tree is ended on drop.
#[derive(Debug)]
pub struct Driver {
    child: Child,
    netns: String,
    /// Logs: `driver.log` (tauri-driver, WebKitWebDriver and the app's stderr),
    /// `notify.log` (the monitored `Notify` calls), `display.env`.
    pub dir: PathBuf,
    display: String,
    xauthority: String,
    bus: String,
}

impl Driver {
    /// The session bus the app runs with (dbus-run-session's: an abstract socket in the
    /// namespace, so a daemon joining it must start there too).
    pub fn bus(&self) -> &str {
        &self.bus
    }
}

/// Started inside `dbus-run-session`: note the display, watch notifications, become
/// tauri-driver (its pid is this shell's, so it can be asked to stop first).
const INNER: &str = r#"set -e
printf '%s\n%s\n%s\n' "$DISPLAY" "$XAUTHORITY" "$DBUS_SESSION_BUS_ADDRESS" \
  > "$E2E_DIR/display.env.tmp"
mv "$E2E_DIR/display.env.tmp" "$E2E_DIR/display.env"
dbus-monitor --session "interface='org.freedesktop.Notifications',member='Notify'" \
  > "$E2E_DIR/notify.log" 2>&1 &
echo $$ > "$E2E_DIR/driver.pid"
exec tauri-driver --port 4444 --native-port 4445
"#;

impl Driver {
    /// Starts everything in `netns`; `env` goes to the app (and everything else). Call
    /// from a runtime inside `netns`: it waits until tauri-driver accepts connections on
    /// the namespace's loopback.
    pub async fn start(netns: &str, dir: &Path, env: &[(&str, OsString)]) -> anyhow::Result<Self> {
        require_tools()?;
        std::fs::create_dir_all(dir)?;
        let log = std::fs::File::create(dir.join("driver.log"))?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", netns, "xvfb-run", "-a", "-s"])
            // One argument on purpose: xvfb-run passes it on to Xvfb, which splits it.
            .arg(XVFB_ARGS)
            .args(["dbus-run-session", "--", "sh", "-c", INNER])
            .env("E2E_DIR", dir)
            // OUTPOST_APP_LOG, when set, replaces the app's log filter (to chase a failure).
            .env(
                "RUST_LOG",
                std::env::var("OUTPOST_APP_LOG")
                    .unwrap_or_else(|_| "outpost=info,outpost_app=info,warn".into()),
            )
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY");
        if let Some(p) = which("tauri-driver").and_then(|p| p.parent().map(Path::to_path_buf)) {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
            dirs.push(p);
            cmd.env("PATH", std::env::join_paths(dirs)?);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting xvfb-run")?;
        let mut driver = Driver {
            child,
            netns: netns.to_owned(),
            dir: dir.to_path_buf(),
            display: String::new(),
            xauthority: String::new(),
            bus: String::new(),
        };
        let env_file = dir.join("display.env");
        let text = wait_for("the virtual display", || {
            let f = env_file.clone();
            async move { Ok(std::fs::read_to_string(&f).ok()) }
        })
        .await
        .with_context(|| driver.log())?;
        let mut lines = text.lines();
        driver.display = lines.next().unwrap_or_default().to_owned();
        driver.xauthority = lines.next().unwrap_or_default().to_owned();
        driver.bus = lines.next().unwrap_or_default().to_owned();
        // tauri-driver (4444) starts WebKitWebDriver (4445) and forwards to it: a session
        // request before both listen fails.
        for port in [4444, 4445] {
            let r = wait_for(
                &format!("a WebDriver listening on 127.0.0.1:{port}"),
                || async {
                    let conn = tokio::net::TcpStream::connect(("127.0.0.1", port)).await;
                    Ok(conn.ok().map(drop))
                },
            )
            .await;
            r.with_context(|| driver.log())?;
        }
        Ok(driver)
    }

    /// `program` as a command inside the test's namespace, on its display and session bus
    /// (for starting the app without WebDriver).
    pub fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.netns])
            .arg(program)
            .env("DISPLAY", &self.display)
            .env("XAUTHORITY", &self.xauthority)
            .env("DBUS_SESSION_BUS_ADDRESS", &self.bus)
            .env_remove("WAYLAND_DISPLAY");
        cmd
    }

    /// `r`, with this run's log (and `agent`'s output) added to a failure.
    pub fn with_log<T>(
        &self,
        r: anyhow::Result<T>,
        agent: Option<&Assistant>,
    ) -> anyhow::Result<T> {
        r.map_err(|e| {
            let agent = agent.map(|a| format!("\n--- {}", a.report()));
            e.context(format!(
                "--- driver and app log ---\n{}{}",
                self.log(),
                agent.unwrap_or_default()
            ))
        })
    }

    /// Drops the file `path` on the app window at `to` (screen pixels) the way a person
    /// drags it from a file manager: `tests/py/drag_source.py` (a GTK window beside the
    /// app offering the file as `text/uri-list`) is the source, and `xdotool` holds the
    /// mouse button down on it, moves onto the app and lets go (real X input, XDND).
    /// Returns what the source printed.
    pub async fn drop_file(&self, path: &Path, to: (u32, u32)) -> anyhow::Result<String> {
        if which("xdotool").is_none() {
            bail!(
                "xdotool is not on PATH; install it (apt-get install xdotool) or run scripts/setup.sh"
            );
        }
        let script = outpost_tests::python::scripts_dir().join("drag_source.py");
        let out = self.dir.join("drag_source.log");
        let mut source = self
            .command(Path::new("/usr/bin/python3"))
            .arg(&script)
            .arg(path)
            .args(["1130", "60"])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out)?)
            .stderr(std::fs::File::create(self.dir.join("drag_source.err"))?)
            .spawn()
            .context("starting tests/py/drag_source.py (needs python3-gi and GTK 3)")?;
        let said = || std::fs::read_to_string(&out).unwrap_or_default();
        let ready = wait_for("the drag source's window", || async {
            Ok(said().contains("ready").then_some(()))
        })
        .await;
        if let Err(e) = ready {
            let _ = source.kill();
            let _ = source.wait();
            let err = std::fs::read_to_string(self.dir.join("drag_source.err")).unwrap_or_default();
            return Err(e.context(err));
        }
        // Give the window a moment to settle at its place, then drag in small steps: GTK
        // starts a drag only after the pointer moved past its threshold with the button
        // held, and the target sees the motion in between.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (x, y) = (to.0.to_string(), to.1.to_string());
        let steps: Vec<String> = [
            "mousemove 1200 110",
            "sleep 0.2",
            "mousedown 1",
            "sleep 0.2",
            "mousemove 1190 115",
            "sleep 0.2",
            "mousemove 1170 130",
            "sleep 0.2",
            "mousemove 1050 200",
            "sleep 0.3",
            "mousemove 800 300",
            "sleep 0.3",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([
            format!("mousemove {x} {y}"),
            "sleep 0.4".to_owned(),
            format!("mousemove {} {}", to.0 + 5, to.1 + 5),
            "sleep 0.4".to_owned(),
            "mouseup 1".to_owned(),
        ])
        .collect();
        let args: Vec<&str> = steps.iter().flat_map(|s| s.split(' ')).collect();
        let status = self
            .command(Path::new("xdotool"))
            .args(&args)
            .status()
            .context("running xdotool")?;
        let done = wait_for("the drag to end", || async {
            Ok(said().contains("done").then_some(()))
        })
        .await;
        let _ = source.kill();
        let _ = source.wait();
        if !status.success() {
            bail!("xdotool failed ({status})");
        }
        done.with_context(|| format!("the drag source said: {}", said()))?;
        Ok(said())
    }

    /// tauri-driver's log, which includes the app's stderr.
    pub fn log(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("driver.log")).unwrap_or_default();
        // The end is what matters; keep failure messages readable.
        let keep = text.len().saturating_sub(12_000);
        let start = (keep..text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text[start..].to_owned()
    }

    /// The `Notify` calls seen on the session bus so far (summary and body of each).
    pub fn notifications(&self) -> Vec<(String, String)> {
        let text = std::fs::read_to_string(self.dir.join("notify.log")).unwrap_or_default();
        let mut out = Vec::new();
        for call in text.split("member=Notify").skip(1) {
            // Notify(app_name, replaces_id, app_icon, summary, body, actions, hints, timeout)
            let strings: Vec<&str> = call
                .lines()
                .filter_map(|l| l.trim().strip_prefix("string \""))
                .map(|s| s.strip_suffix('"').unwrap_or(s))
                .collect();
            if strings.len() >= 4 {
                out.push((strings[2].to_owned(), strings[3].to_owned()));
            }
        }
        out
    }

    /// Saves `docs/screenshots/app-NAME.png` (the app window's part of the screen) when
    /// `OUTPOST_SCREENSHOTS=1`; otherwise does nothing.
    pub async fn screenshot(&self, app: &App, name: &str) -> anyhow::Result<()> {
        if std::env::var("OUTPOST_SCREENSHOTS").as_deref() != Ok("1") {
            return Ok(());
        }
        app.settle().await?;
        let dir = workspace_root().join("docs/screenshots");
        std::fs::create_dir_all(&dir)?;
        let out = dir.join(format!("app-{name}.png"));
        let (w, h) = WINDOW;
        let status = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.netns,
                "/usr/bin/import",
                "-window",
                "root",
            ])
            .args(["-crop", &format!("{w}x{h}+0+0"), "+repage"])
            .arg(&out)
            .env("DISPLAY", &self.display)
            .env("XAUTHORITY", &self.xauthority)
            .status()
            .context("running /usr/bin/import (apt-get install imagemagick)")?;
        if !status.success() {
            bail!("import failed ({status}) for {}", out.display());
        }
        Ok(())
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // tauri-driver first, so dbus-run-session and xvfb-run end normally (xvfb-run
        // then stops Xvfb and removes its temporary folder); then whatever is left.
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("driver.pid")) {
            let _ = Command::new("kill").args(["-TERM", pid.trim()]).status();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// --- one run of the app (a WebDriver session) ------------------------------------------

/// The app, launched by a WebDriver session.
#[derive(Debug)]
pub struct App {
    /// The WebDriver client.
    pub client: Client,
    /// The app's executable.
    pub bin: PathBuf,
}

impl App {
    /// Launches the app Cargo built ([`APP_BIN`]) through tauri-driver (inside the
    /// namespace's runtime).
    pub async fn launch() -> anyhow::Result<Self> {
        Self::launch_bin(Path::new(APP_BIN)).await
    }

    /// Launches the app executable `bin` (e.g. an installed package's) through
    /// tauri-driver.
    pub async fn launch_bin(bin: &Path) -> anyhow::Result<Self> {
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("wry"));
        caps.insert("tauri:options".into(), json!({ "application": bin }));
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        // One attempt (tauri-driver is listening already): WebKitWebDriver answers once
        // the app's web view is up, and never if the app fails to start.
        let client = tokio::time::timeout(
            PATIENCE,
            ClientBuilder::new(connector)
                .capabilities(caps)
                .connect("http://127.0.0.1:4444"),
        )
        .await
        .context("the app did not come up within the time allowed (see its log below)")?
        .context("starting a WebDriver session with the app")?;
        let app = App {
            client,
            bin: bin.to_path_buf(),
        };
        // The UI is up once it has rendered something other than "Loading…".
        wait_for("the UI to load", || async {
            let busy = app
                .js("return !!document.querySelector('[aria-busy=true].center')")
                .await?;
            let body = app.body_text().await?;
            Ok((busy == json!(false) && !body.trim().is_empty()).then_some(()))
        })
        .await?;
        Ok(app)
    }

    /// Launches the app (with a saved connection) and waits until it is connected and
    /// talks to `agent` (`tests/py/lk_agent.py`, started) in LiveKit Agents mode.
    pub async fn launch_with_lk_agent(agent: &Assistant) -> anyhow::Result<Self> {
        let app = Self::launch().await?;
        app.wait_text("[data-testid=connection-state]", "Connected")
            .await?;
        agent.wait_event("ready").await?;
        app.wait_text("[data-testid=assistant-mode]", "LiveKit Agents")
            .await?;
        Ok(app)
    }

    /// Ends the session (the app quits) and waits until the app's process is gone: a
    /// launch while the old instance still runs would hand over to it and exit (the
    /// instance lock in the data folder, src/single_instance.rs, ends with the process).
    pub async fn quit(self, _driver: &Driver, config_dir: &Path) -> anyhow::Result<()> {
        anyhow::ensure!(
            running(&self.bin, config_dir),
            "the app is not running before quitting; is OUTPOST_CONFIG_DIR passed on?"
        );
        self.client.close().await?;
        wait_for("the app to exit", || async {
            Ok((!running(&self.bin, config_dir)).then_some(()))
        })
        .await
    }

    /// What a scenario ended with, the app quit when it ended well
    /// ([`App::quit`]): the one way each test winds its app down.
    pub async fn quit_after(
        r: anyhow::Result<App>,
        driver: &Driver,
        config_dir: &Path,
    ) -> anyhow::Result<()> {
        match r {
            Ok(app) => app.quit(driver, config_dir).await,
            Err(e) => Err(e),
        }
    }

    /// Runs `script` (a function body) in the page and returns its value.
    pub async fn js(&self, script: &str) -> anyhow::Result<Value> {
        Ok(self.client.execute(script, vec![]).await?)
    }

    /// The whole page's visible text.
    pub async fn body_text(&self) -> anyhow::Result<String> {
        let v = self.js("return document.body.innerText").await?;
        Ok(v.as_str().unwrap_or_default().to_owned())
    }

    /// The first element matching `css`, if any.
    pub async fn find(&self, css: &str) -> anyhow::Result<Option<Element>> {
        Ok(self
            .client
            .find_all(Locator::Css(css))
            .await?
            .into_iter()
            .next())
    }

    /// Waits for an element matching `css`.
    pub async fn wait_css(&self, css: &str) -> anyhow::Result<Element> {
        let r = wait_for(&format!("an element {css}"), || self.find(css)).await;
        self.on_page(r).await
    }

    /// Waits until `css` has an element whose text contains `text`; returns its text.
    pub async fn wait_text(&self, css: &str, text: &str) -> anyhow::Result<String> {
        let what = format!("{css} containing {text:?}");
        let r = wait_for(&what, || async {
            for el in self.client.find_all(Locator::Css(css)).await? {
                let t = el.text().await?;
                if t.contains(text) {
                    return Ok(Some(t));
                }
            }
            Ok(None)
        })
        .await;
        self.on_page(r).await
    }

    /// Clicks the button whose text is `label`, inside `scope` (a CSS selector).
    pub async fn click_button(&self, scope: &str, label: &str) -> anyhow::Result<()> {
        let r = wait_for(&format!("a button {label:?} in {scope}"), || async {
            for b in self
                .client
                .find_all(Locator::Css(&format!("{scope} button")))
                .await?
            {
                if b.text().await?.trim() == label && b.is_enabled().await? {
                    return Ok(Some(b));
                }
            }
            Ok(None)
        })
        .await;
        let el = self.on_page(r).await?;
        el.click().await?;
        Ok(())
    }

    /// Clicks the first element matching `css` (waiting for it).
    pub async fn click(&self, css: &str) -> anyhow::Result<()> {
        self.wait_css(css).await?.click().await?;
        Ok(())
    }

    /// Opens a main screen from the sidebar ("Chat", "History", "Settings").
    pub async fn open_screen(&self, label: &str) -> anyhow::Result<()> {
        self.click_button("nav[aria-label=Main]", label).await
    }

    /// Types `text` into the composer and presses Enter; waits until the message shows.
    pub async fn say(&self, text: &str) -> anyhow::Result<()> {
        self.type_message(text).await?;
        self.press_enter_in_composer().await?;
        self.wait_user_message(text).await
    }

    /// Types into the composer without sending.
    pub async fn type_message(&self, text: &str) -> anyhow::Result<()> {
        let r = wait_for("the composer to be enabled", || async {
            match self.find("#composer-input").await? {
                Some(el) if el.is_enabled().await? => Ok(Some(el)),
                _ => Ok(None),
            }
        })
        .await;
        let input = self.on_page(r).await?;
        input.send_keys(text).await?;
        Ok(())
    }

    /// Presses Enter in the composer (sends the draft).
    pub async fn press_enter_in_composer(&self) -> anyhow::Result<()> {
        let input = self.wait_css("#composer-input").await?;
        input
            .send_keys(&char::from(fantoccini::key::Key::Enter).to_string())
            .await?;
        Ok(())
    }

    /// Waits for the user's message `text` in the transcript.
    pub async fn wait_user_message(&self, text: &str) -> anyhow::Result<()> {
        self.wait_text("[data-testid=user-message]", text)
            .await
            .map(drop)
    }

    /// Waits for a complete (no longer streaming) assistant message containing `text`.
    pub async fn wait_assistant(&self, text: &str) -> anyhow::Result<String> {
        self.wait_text("[data-testid=assistant-message][aria-busy=false]", text)
            .await
    }

    /// Every tool card: `{id, status, tool, text}`.
    pub async fn tool_cards(&self) -> anyhow::Result<Vec<Value>> {
        let v = self
            .js(
                "return Array.from(document.querySelectorAll('[data-testid=tool-card]')).map(e => ({\
                   id: e.dataset.callId, status: e.dataset.status,\
                   tool: e.querySelector('.name').textContent, text: e.innerText }))",
            )
            .await?;
        Ok(v.as_array().cloned().unwrap_or_default())
    }

    /// Waits for a tool card (the first `pick` accepts) to reach `status`.
    pub async fn wait_card(
        &self,
        what: &str,
        status: &str,
        pick: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        let r = wait_for(&format!("the {what} card to be {status}"), || async {
            Ok(self
                .tool_cards()
                .await?
                .into_iter()
                .find(|c| pick(c) && c["status"] == status))
        })
        .await;
        self.on_page(r).await
    }

    /// The open consent dialog, if any.
    pub async fn consent_dialog(&self) -> anyhow::Result<Option<Element>> {
        self.find("[data-testid=consent-dialog]").await
    }

    /// Waits for the consent dialog; returns its text and the paths it lists.
    pub async fn wait_consent(&self) -> anyhow::Result<(String, Vec<String>)> {
        let dialog = self.wait_css("[data-testid=consent-dialog]").await?;
        let text = dialog.text().await?;
        let mut paths = Vec::new();
        for li in dialog.find_all(Locator::Css(".paths li")).await? {
            paths.push(li.text().await?);
        }
        Ok((text, paths))
    }

    /// Answers the open consent dialog with the button `label`, and waits until it is
    /// gone.
    pub async fn answer_consent(&self, label: &str) -> anyhow::Result<()> {
        self.click_button("[data-testid=consent-dialog]", label)
            .await?;
        wait_for("the consent dialog to close", || async {
            Ok(self.consent_dialog().await?.is_none().then_some(()))
        })
        .await
    }

    /// Waits until the page has painted its latest state (screenshots only).
    pub async fn settle(&self) -> anyhow::Result<()> {
        self.client
            .execute_async(
                "const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(() => done(true)));",
                vec![],
            )
            .await?;
        // WebKit paints to the X window after the frame; give it a moment (cosmetic).
        tokio::time::sleep(Duration::from_millis(700)).await;
        Ok(())
    }

    /// Adds the page's text to a failure.
    async fn on_page<T>(&self, r: anyhow::Result<T>) -> anyhow::Result<T> {
        match r {
            Ok(v) => Ok(v),
            Err(e) => {
                let page = self.body_text().await.unwrap_or_else(|e| format!("({e})"));
                Err(e.context(format!("the page said:\n{page}\n")))
            }
        }
    }
}

/// Whether a process of the executable `bin` started with this config folder in its
/// environment is running (the app, or a demo program it started: they inherit it).
pub fn running(bin: &Path, config_dir: &Path) -> bool {
    !processes(bin, config_dir).is_empty()
}

/// The ids of the processes [`running`] looks for.
pub fn processes(bin: &Path, config_dir: &Path) -> Vec<u32> {
    let bin = std::fs::canonicalize(bin).unwrap_or_else(|_| bin.to_path_buf());
    let needle = format!("OUTPOST_CONFIG_DIR={}", config_dir.display());
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter(|p| {
            let dir = p.path();
            let exe_matches = std::fs::read_link(dir.join("exe")).is_ok_and(|e| e == bin);
            exe_matches
                && std::fs::read(dir.join("environ"))
                    .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
        })
        .filter_map(|p| p.file_name().to_str()?.parse().ok())
        .collect()
}

/// A script that sends `kind` (pointerdown/pointerup) to the talk button, as holding it
/// with the mouse does.
pub fn press(kind: &str) -> String {
    format!(
        "var b = document.querySelector('[data-testid=talk-button]'); \
         if (!b) {{ return 'no talk button'; }} \
         b.dispatchEvent(new Event('{kind}', {{ bubbles: true }})); return 'ok';"
    )
}

/// Fails with advice when the local demo's programs are not beside [`APP_BIN`], where the
/// app looks for them: `cargo test` builds only the app's own binaries.
pub fn require_demo_programs() -> anyhow::Result<()> {
    let dir = Path::new(APP_BIN)
        .parent()
        .context("APP_BIN has no folder")?;
    for name in ["outpost-room", "outpost-agent"] {
        if !dir.join(name).is_file() {
            bail!(
                "{} is missing: the app's local demo starts it from beside the app. Run \
                 `cargo build -p outpost-room -p outpost-agent` (same profile) first; \
                 scripts/test.sh does.",
                dir.join(name).display()
            );
        }
    }
    Ok(())
}

// --- the room server and the Python assistant -------------------------------------------

/// The LiveKit server of an app test (dev keys): `outpost-room` running in-process on a
/// thread inside a namespace, or a livekit-server process there
/// ([`RoomServer::start_on`]).
#[derive(Debug)]
pub struct RoomServer {
    /// `ws://IP:PORT`.
    pub url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
    livekit: Option<outpost_tests::server::LkServer>,
}

impl RoomServer {
    /// A server of `kind` in the pair's server namespace, on `server_ip:7880`.
    pub fn start_on(
        kind: outpost_tests::server::ServerKind,
        pair: &outpost_tests::lkclient::NsPair,
    ) -> anyhow::Result<Self> {
        match kind {
            outpost_tests::server::ServerKind::Room => Self::start(&pair.server_ns, pair.server_ip),
            outpost_tests::server::ServerKind::LiveKit => {
                // The outpost-room binary is not needed for this kind.
                let lk = outpost_tests::server::LkServer::start_in(
                    pair,
                    kind,
                    Path::new("outpost-room"),
                    &[],
                )?;
                Ok(Self {
                    url: lk.url.clone(),
                    stop: None,
                    thread: None,
                    livekit: Some(lk),
                })
            }
        }
    }

    /// The server's log (livekit-server's; outpost-room's goes to the test's own).
    pub fn log(&self) -> String {
        self.livekit
            .as_ref()
            .map(|lk| lk.proc.stderr())
            .unwrap_or_default()
    }

    /// Starts the server on `ip:7880` inside `netns`.
    pub fn start(netns: &str, ip: Ipv4Addr) -> anyhow::Result<Self> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<String>>();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let ns = netns.to_owned();
        let thread = std::thread::spawn(move || {
            outpost_tests::lkclient::in_netns(&ns, move || async move {
                let addr = SocketAddr::from((ip, 7880));
                let config = outpost_room::Config::default();
                let server = match outpost_room::Server::bind(addr, config).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = ready_tx.send(Err(anyhow::anyhow!("room server: {e}")));
                        return Ok(());
                    }
                };
                let _ = ready_tx.send(Ok(server.url()));
                let _ = stop_rx.await;
                server.shutdown().await;
                Ok(())
            })
        });
        let url = ready_rx
            .recv_timeout(Duration::from_secs(30))
            .context("the room server did not start")??;
        Ok(Self {
            url,
            stop: Some(stop_tx),
            thread: Some(thread),
            livekit: None,
        })
    }

    /// A token for `identity` in `room`, signed with the dev keys the server uses.
    pub fn token(&self, room: &str, identity: &str) -> anyhow::Result<String> {
        outpost_tests::lkclient::token(room, identity, outpost_tests::lkclient::DEV_SECRET)
    }
}

impl Drop for RoomServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `examples/python-agent/agent.py --scenario`, in a namespace; its JSON lines collected.
#[derive(Debug)]
pub struct Assistant {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    stderr: PathBuf,
}

impl Assistant {
    /// Starts the assistant as `identity` in `room`, running `steps`.
    pub fn start(
        netns: &str,
        url: &str,
        room: &str,
        steps: &Value,
        dir: &Path,
    ) -> anyhow::Result<Self> {
        let py = outpost_tests::python::python()?;
        let scenario = dir.join("scenario.json");
        std::fs::write(&scenario, serde_json::to_vec_pretty(steps)?)?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", netns])
            .arg(py)
            .arg(workspace_root().join("examples/python-agent/agent.py"))
            .args(["--url", url, "--room", room, "--identity", "assistant"])
            .arg("--scenario")
            .arg(&scenario)
            .args(["--timeout", "400"])
            .env("LK_API_KEY", outpost_tests::lkclient::DEV_KEY)
            .env("LK_API_SECRET", outpost_tests::lkclient::DEV_SECRET);
        Self::spawn(cmd, &dir.join("assistant.stderr"))
    }

    /// Runs `cmd` (another assistant program printing JSON lines), its stdout collected and
    /// its stderr kept in the file `stderr`.
    pub fn spawn(mut cmd: Command, stderr: &Path) -> anyhow::Result<Self> {
        let stderr = stderr.to_path_buf();
        let mut child = cmd
            .env("PYTHONWARNINGS", "ignore")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()
            .context("starting the assistant")?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().context("stdout")?;
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap_or_else(|p| p.into_inner()).push(line);
            }
        });
        Ok(Self {
            child,
            lines,
            stderr,
        })
    }

    /// Every JSON line printed so far.
    pub fn events(&self) -> Vec<Value> {
        self.lines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Waits for its first JSON line with `"event": event`.
    pub async fn wait_event(&self, event: &str) -> anyhow::Result<Value> {
        wait_for(&format!("the assistant's {event:?} event"), || async {
            Ok(self.events().into_iter().find(|e| e["event"] == event))
        })
        .await
        .with_context(|| self.report())
    }

    /// Waits for the outcome line of the step with request id `id` (or name).
    pub async fn outcome(&self, key: &str) -> anyhow::Result<Value> {
        wait_for(&format!("the assistant's outcome for {key}"), || async {
            Ok(self
                .events()
                .into_iter()
                .find(|e| e["id"] == key || e["name"] == key))
        })
        .await
        .with_context(|| self.report())
    }

    /// Everything it said, for failure messages.
    pub fn report(&self) -> String {
        format!(
            "assistant stdout:\n{}\nassistant stderr:\n{}",
            self.lines
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .join("\n"),
            std::fs::read_to_string(&self.stderr).unwrap_or_default()
        )
    }

    /// Waits for it to exit; its exit status.
    pub async fn finish(&mut self) -> anyhow::Result<std::process::ExitStatus> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                bail!(
                    "the assistant did not finish its scenario within {PATIENCE:?}\n{}",
                    self.report()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Assistant {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// --- an app profile and a LiveKit Agents agent ----------------------------------------------

/// The app's folders under one root: config, data and a home of its own (the window-state
/// plugin and WebKit keep files there).
#[derive(Debug, Clone)]
pub struct Profile {
    /// `OUTPOST_CONFIG_DIR`.
    pub config: PathBuf,
    /// `OUTPOST_DATA_DIR`.
    pub data: PathBuf,
    /// `HOME` (with the XDG folders beneath it).
    pub home: PathBuf,
}

impl Profile {
    /// Creates the folders under `root`.
    pub fn new(root: &Path) -> anyhow::Result<Self> {
        let p = Profile {
            config: root.join("config"),
            data: root.join("data"),
            home: root.join("home"),
        };
        for d in [&p.config, &p.data, &p.home] {
            std::fs::create_dir_all(d)?;
        }
        Ok(p)
    }

    /// A saved token connection to `url`, room `room`, as `outpost-app` (the token comes
    /// from the environment: [`Profile::env`]), and a consent timeout long enough for a
    /// test to answer.
    pub fn save_connection(&self, url: &str, room: &str) -> anyhow::Result<()> {
        self.save_settings(url, room)?;
        std::fs::write(
            self.config.join("policy.toml"),
            "consent_timeout_secs = 600\n",
        )?;
        Ok(())
    }

    /// [`Profile::save_connection`] without the policy (the app's defaults).
    pub fn save_settings(&self, url: &str, room: &str) -> anyhow::Result<()> {
        std::fs::write(
            self.config.join("settings.toml"),
            format!(
                "configured = true\n\n[connection]\nauth_mode = \"token\"\nlivekit_url = \"{url}\"\n\
                 room = \"{room}\"\nidentity = \"outpost-app\"\n"
            ),
        )?;
        Ok(())
    }

    /// The app's environment: these folders, secrets in memory, and `token` in place of
    /// the keyring's.
    pub fn env(&self, token: Option<&str>) -> Vec<(&'static str, OsString)> {
        let mut env = vec![
            ("OUTPOST_CONFIG_DIR", self.config.clone().into_os_string()),
            ("OUTPOST_DATA_DIR", self.data.clone().into_os_string()),
            ("OUTPOST_SECRETS", "memory".into()),
            ("HOME", self.home.clone().into_os_string()),
            (
                "XDG_CONFIG_HOME",
                self.home.join(".config").into_os_string(),
            ),
            (
                "XDG_DATA_HOME",
                self.home.join(".local/share").into_os_string(),
            ),
            ("XDG_CACHE_HOME", self.home.join(".cache").into_os_string()),
        ];
        if let Some(t) = token {
            env.push(("OUTPOST_LIVEKIT_TOKEN", t.into()));
        }
        env
    }

    /// [`Profile::env`] with the system keyring (the session bus's Secret Service) in
    /// place of secrets in memory.
    pub fn keyring_env(&self, token: Option<&str>) -> Vec<(&'static str, OsString)> {
        let mut env = self.env(token);
        env.retain(|(k, _)| *k != "OUTPOST_SECRETS");
        env
    }
}

/// A connected app's test bed: a throw-away root whose [`Profile`] is saved to connect to
/// a LiveKit server of `kind` in a fresh namespace pair, as `outpost-app` with `token`.
/// Fields drop in order: the server, the namespaces, then the folders.
#[derive(Debug)]
pub struct Bed {
    /// The server (`url`).
    pub server: RoomServer,
    /// The namespaces: the app runs in `client_ns`.
    pub pair: outpost_tests::lkclient::NsPair,
    /// The app's token for the room.
    pub token: String,
    /// The app's folders, under `root`.
    pub profile: Profile,
    /// The folder everything of the test goes under (logs too).
    pub root: PathBuf,
    /// `root` itself, removed last.
    pub dir: tempfile::TempDir,
}

impl Bed {
    /// A bed for `room` on a server of `kind` ([`Profile::save_connection`]).
    pub fn new(kind: outpost_tests::server::ServerKind, room: &str) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().to_path_buf();
        let profile = Profile::new(&root)?;
        let pair = outpost_tests::lkclient::NsPair::create()
            .context("network namespaces (run as root)")?;
        let server = RoomServer::start_on(kind, &pair)?;
        let token = server.token(room, "outpost-app")?;
        profile.save_connection(&server.url, room)?;
        Ok(Bed {
            server,
            pair,
            token,
            profile,
            root,
            dir,
        })
    }
}

/// The Python peer `script` (in tests/py) run by `python` in namespace `netns`, joining
/// `url`'s `room` as the agent `identity` (`LK_URL`, `LK_ROOM`, `LK_IDENTITY`, `LK_TOKEN`,
/// with a dev-keys token of the agent kind), talking to the app as `outpost-app`
/// (`OUTPOST_IDENTITY`). Add the script's own variables, then [`Assistant::spawn`] it.
pub fn agent_command(
    python: &Path,
    script: &str,
    netns: &str,
    url: &str,
    room: &str,
    identity: &str,
) -> anyhow::Result<Command> {
    let token = outpost_room::Keys::dev().mint_with_kind(
        room,
        identity,
        None,
        Duration::from_secs(3600),
        "agent",
    )?;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", netns])
        .arg(python)
        .arg(outpost_tests::python::scripts_dir().join(script))
        .current_dir(outpost_tests::python::scripts_dir())
        .env("LK_URL", url)
        .env("LK_ROOM", room)
        .env("LK_IDENTITY", identity)
        .env("LK_TOKEN", token)
        .env("OUTPOST_IDENTITY", "outpost-app");
    Ok(cmd)
}

/// `tests/py/lk_agent.py` (a real LiveKit Agents `AgentSession` with a scripted LLM) as
/// `agent` in `room`, in namespace `netns`; its JSON lines collected, its stderr in
/// `dir/agent.stderr`.
pub fn start_lk_agent(netns: &str, url: &str, room: &str, dir: &Path) -> anyhow::Result<Assistant> {
    let py = outpost_tests::python::agents_python()?;
    let mut cmd = agent_command(&py, "lk_agent.py", netns, url, room, "agent")?;
    cmd.env("LK_TIMEOUT", "400");
    Assistant::spawn(cmd, &dir.join("agent.stderr"))
}

/// The app's scenario against a LiveKit Agents agent (see [`with_lk_agent`]).
pub type AgentScenario = for<'a> fn(
    &'a Driver,
    &'a Assistant,
    &'a Profile,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = anyhow::Result<()>> + 'a>,
>;

/// Runs `scenario` with the app's profile under `root` (a saved connection to a fresh
/// `outpost-room` in a server namespace, the token in the environment), its display and
/// tauri-driver in a client namespace, and `tests/py/lk_agent.py` in `room`; a failure
/// panics with the logs.
pub fn with_lk_agent(room: &str, root: &Path, scenario: AgentScenario) {
    let profile = Profile::new(root).expect("the app's folders");
    let pair = outpost_tests::lkclient::NsPair::create().expect("network namespaces (run as root)");
    let server = RoomServer::start(&pair.server_ns, pair.server_ip).expect("the room server");
    let token = server.token(room, "outpost-app").expect("a token");
    profile
        .save_connection(&server.url, room)
        .expect("the settings file");
    let (server_ns, client_ns) = (pair.server_ns.clone(), pair.client_ns.clone());
    let (url, room, root) = (server.url.clone(), room.to_owned(), root.to_path_buf());
    let outcome = outpost_tests::lkclient::in_netns(&pair.client_ns.clone(), move || async move {
        let env = profile.env(Some(&token));
        let driver = Driver::start(&client_ns, &root.join("logs"), &env).await?;
        let agent = start_lk_agent(&server_ns, &url, &room, &root)?;
        let r = scenario(&driver, &agent, &profile).await;
        driver.with_log(r, Some(&agent))
    });
    drop(server);
    drop(pair);
    outcome.unwrap_or_else(|e| fail(&e));
}
