//! End to end: the real `outpost-app` binary under Xvfb, driven through tauri-driver and
//! WebKitWebDriver like a person would (DOM text, clicks on the real buttons, keys in
//! the real inputs). See `common/mod.rs` for the harness.
//!
//! - `official_sdk_assistant_through_the_app`: the example Python assistant
//!   (`examples/python-agent/agent.py`, official LiveKit SDK) asks to read a file outside
//!   the allowed folders; the consent dialog answers Allow once, Deny and Always allow reach
//!   the assistant; a notification goes out over D-Bus while the window is minimized;
//!   settings changed in the settings pane survive a restart; history search finds the
//!   message with the highlight. libwebrtc ignores loopback, so the room server and the
//!   assistant run in one network namespace and the app (with its display and D-Bus
//!   session) in another, joined by a veth pair.
//! - `local_demo_from_first_run`: an empty config shows the first-run screen; "Try the
//!   local demo" starts the room server and the scripted assistant (`outpost-room` and
//!   `outpost-agent` from beside the app binary, as its child processes); a whole
//!   scripted conversation follows (help, a server-side calculation, a file read with
//!   consent, the refused SSH key); when the app quits, both programs are gone too. With
//!   `OUTPOST_SCREENSHOTS=1` it saves docs/screenshots/app-*.png.
//!
//! - `second_start_focuses_or_waits`: two real starts on one profile. A second start while
//!   the app runs brings the first window forward and exits at once; a second start while
//!   the first instance is quitting (SIGTERM, which quits like closing the window; the
//!   process lingering on `OUTPOST_TEST_EXIT_DELAY_MS`) waits for it and then shows its own window; a third
//!   start while that one does not answer (stopped with SIGSTOP, like one stuck shutting
//!   down) waits, and once it is gone shows its own window. A start never ends windowless.
//!
//! `installed_package.rs` runs the demo scenario's first part against the installed .deb.
//!
//! Needs root (network namespaces), iproute2, xvfb-run, dbus-run-session, dunst,
//! WebKitWebDriver, tauri-driver and the venv with the official SDK (scripts/setup.sh
//! installs them). The tests run one after the other.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use common::{APP_BIN, App, Assistant, Driver, RoomServer, WINDOW, wait_for};
use fantoccini::key::Key;
use outpost_tests::lkclient::{NsPair, in_netns};
use outpost_tests::netns::NetNs;
use serde_json::{Value, json};

const ROOM: &str = "app-e2e";
const NOTE: &str = "the zebra crossing is at noon\n";

/// The app's folders and the files the tools read, in one temporary folder.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    config: PathBuf,
    data: PathBuf,
    home: PathBuf,
    /// A file outside every allowed folder: reading it needs consent.
    notes: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let config = root.join("config");
        let data = root.join("data");
        let home = root.join("home");
        let outside = root.join("outside");
        for d in [&config, &data, &home, &outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        let notes = outside.join("zebra-notes.txt");
        std::fs::write(&notes, NOTE).unwrap();
        Fixture {
            _dir: dir,
            root,
            config,
            data,
            home,
            notes,
        }
    }

    /// The app's environment: its folders, secrets in memory, and a home of its own (the
    /// window-state plugin and WebKit keep files there).
    fn env(&self, token: Option<&str>) -> Vec<(&'static str, OsString)> {
        common::Profile {
            config: self.config.clone(),
            data: self.data.clone(),
            home: self.home.clone(),
        }
        .env(token)
    }

    fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
}

/// The error's cause first, then what it happened during, then the logs.
fn report(e: &anyhow::Error) -> String {
    let parts: Vec<String> = e.chain().map(ToString::to_string).collect();
    parts.into_iter().rev().collect::<Vec<_>>().join("\n")
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

// --- scenario A: the official-SDK Python assistant -----------------------------------------

#[test]
fn official_sdk_assistant_through_the_app() {
    let _one = common::serial();
    let fx = Fixture::new();
    let pair = NsPair::create().expect("network namespaces (run as root)");
    let server = RoomServer::start(&pair.server_ns, pair.server_ip).unwrap();
    let token = server.token(ROOM, "outpost-app").unwrap();
    // A saved connection: the app connects at start, with the token from the
    // environment (the keyring has none).
    std::fs::write(
        fx.config.join("settings.toml"),
        format!(
            "configured = true\n\n[connection]\nauth_mode = \"token\"\nlivekit_url = \"{}\"\n\
             room = \"{ROOM}\"\nidentity = \"outpost-app\"\n",
            server.url
        ),
    )
    .unwrap();
    // Long enough that no question times out while the test answers it.
    std::fs::write(
        fx.config.join("policy.toml"),
        "consent_timeout_secs = 600\n",
    )
    .unwrap();
    let notes = path(&fx.notes);
    let read = |id: &str, wait_ms: u32, expect: Value| {
        json!({"name": id, "op": "request", "id": id, "toolName": "read_local_file",
               "execution": "client", "parameters": {"filePath": notes},
               "wait_ms": wait_ms, "expect": expect})
    };
    let steps = json!([
        {"op": "wait_user", "text": "Please read my zebra notes", "wait_ms": 120_000},
        read("r-allow", 300_000, json!({"success": true, "result": {"content": NOTE}})),
        {"op": "say", "text": "Thanks, I could read it."},
        {"op": "wait_user", "text": "Ask again, I will say no", "wait_ms": 120_000},
        read("r-deny", 300_000, json!({"success": false, "errorCode": "permission_denied"})),
        {"op": "say", "text": "Understood, I will not read it."},
        {"op": "wait_user", "text": "Ask once more, I will always allow it", "wait_ms": 120_000},
        read("r-always", 300_000, json!({"success": true, "result": {"content": NOTE}})),
        // Answered without a question; a question would wait for the 600 s timeout.
        read("r-again", 120_000, json!({"success": true, "result": {"content": NOTE}})),
        {"op": "say", "text": "All checks are done, thank you."}
    ]);
    let server_ns = pair.server_ns.clone();
    let client_ns = pair.client_ns.clone();
    let url = server.url.clone();
    let outcome = in_netns(&pair.client_ns.clone(), move || async move {
        let env = fx.env(Some(&token));
        let driver = Driver::start(&client_ns, &fx.logs(), &env).await?;
        let mut assistant = Assistant::start(&server_ns, &url, ROOM, &steps, &fx.root)?;
        let r = assistant_scenario(&driver, &mut assistant, &fx).await;
        driver.with_log(r, Some(&assistant))
    });
    drop(server);
    drop(pair);
    if let Err(e) = outcome {
        panic!("{}", report(&e));
    }
}

async fn assistant_scenario(
    driver: &Driver,
    assistant: &mut Assistant,
    fx: &Fixture,
) -> anyhow::Result<()> {
    let notes = path(&fx.notes);
    // Let the assistant join first, so the app finds it in the room.
    wait_for("the assistant to join", || async {
        Ok(assistant
            .events()
            .into_iter()
            .find(|e| e["event"] == "ready"))
    })
    .await
    .with_context(|| assistant.report())?;

    let app = App::launch().await?;
    // The saved connection: no first-run screen, connected to the example assistant.
    app.wait_text("#chat-title", "Example Assistant").await?;
    app.wait_text("[data-testid=connection-state]", "Connected")
        .await?;

    // 1. Allow once: the dialog shows the path; the result reaches the assistant.
    app.say("Please read my zebra notes").await?;
    app.wait_assistant("You said: Please read my zebra notes")
        .await?;
    let (text, paths) = app.wait_consent().await?;
    ensure!(paths == [notes.clone()], "the dialog lists {paths:?}");
    ensure!(text.contains("read_local_file"), "dialog: {text}");
    app.answer_consent("Allow once").await?;
    let card = app
        .wait_card("r-allow", "completed", |c| c["id"] == "r-allow")
        .await?;
    ensure!(
        card["text"]
            .as_str()
            .unwrap_or_default()
            .contains("zebra crossing"),
        "{card}"
    );
    let o = assistant.outcome("r-allow").await?;
    ensure!(
        o["ok"] == true && o["success"] == true,
        "the assistant got {o}"
    );
    app.wait_assistant("Thanks, I could read it.").await?;
    ensure!(
        driver.notifications().is_empty(),
        "a notification while the window had the focus: {:?}",
        driver.notifications()
    );

    // 2. Deny, with the window minimized (WebDriver's minimize unmaps it under Xvfb, so
    //    it loses the focus): the question also goes out as a desktop notification.
    app.type_message("Ask again, I will say no").await?;
    app.client.minimize_window().await?;
    app.press_enter_in_composer().await?;
    let (summary, body) = wait_for("a Notify call on the session bus", || async {
        Ok(driver.notifications().into_iter().next())
    })
    .await?;
    ensure!(summary == "Outpost needs your permission", "{summary}");
    ensure!(
        body.starts_with(&format!("Read {notes} — denied in ")),
        "{body}"
    );
    let (w, h) = WINDOW;
    app.client.set_window_rect(0, 0, w, h).await?;
    app.wait_consent().await?;
    app.answer_consent("Deny").await?;
    app.wait_card("r-deny", "denied", |c| c["id"] == "r-deny")
        .await?;
    let o = assistant.outcome("r-deny").await?;
    ensure!(
        o["ok"] == true && o["errorCode"] == "permission_denied",
        "the assistant got {o}"
    );
    app.wait_assistant("Understood, I will not read it.")
        .await?;

    // 3. Always allow: the next read does not ask.
    app.say("Ask once more, I will always allow it").await?;
    app.wait_consent().await?;
    app.answer_consent("Always allow").await?;
    app.wait_card("r-always", "completed", |c| c["id"] == "r-always")
        .await?;
    let asked_again = wait_for("r-again to complete (or a question)", || async {
        if app.consent_dialog().await?.is_some() {
            return Ok(Some(true));
        }
        let done = app
            .tool_cards()
            .await?
            .iter()
            .any(|c| c["id"] == "r-again" && c["status"] == "completed");
        Ok(done.then_some(false))
    })
    .await?;
    ensure!(!asked_again, "the app asked again after Always allow");
    for id in ["r-always", "r-again"] {
        let o = assistant.outcome(id).await?;
        ensure!(
            o["ok"] == true && o["success"] == true,
            "{id}: the assistant got {o}"
        );
    }
    app.wait_assistant("All checks are done").await?;
    let status = assistant.finish().await?;
    ensure!(
        status.success(),
        "the assistant's scenario failed ({status})"
    );
    // Back in front after the restore: the later question did not notify.
    ensure!(
        driver.notifications().len() == 1,
        "notifications: {:?}",
        driver.notifications()
    );

    // 4. Settings: change the consent timeout and add a folder in the settings pane.
    let projects = fx.root.join("projects");
    std::fs::create_dir_all(&projects)?;
    let projects = path(&projects);
    app.open_screen("Settings").await?;
    app.click_button(".subnav", "Tools & permissions").await?;
    let timeout = app.wait_css("input[type=number][max='86400']").await?;
    // Replace the value with keys (no Ctrl chords: Ctrl+digit switches screens), then
    // Tab out: the change event saves.
    let keys = format!(
        "{}{}240{}",
        char::from(Key::End),
        char::from(Key::Backspace).to_string().repeat(8),
        char::from(Key::Tab)
    );
    timeout.send_keys(&keys).await?;
    app.wait_text(".notices", "Settings saved.").await?;
    app.wait_text("ul[aria-label='Remembered decisions']", "read_local_file")
        .await?;
    app.click_button(".subnav", "Folders").await?;
    app.wait_css("#new-folder")
        .await?
        .send_keys(&projects)
        .await?;
    app.click_button("form.add", "Add").await?;
    app.wait_text("ul[aria-label=Folders]", &projects).await?;

    // 5. Quit and start again: the settings are still there.
    app.quit(driver, &fx.config).await?;
    let app = App::launch().await?;
    // Still configured: the main screens, not the first-run screen. (The assistant has
    // left the room by now.)
    app.wait_css("nav[aria-label=Main]").await?;
    app.open_screen("Settings").await?;
    app.click_button(".subnav", "Tools & permissions").await?;
    let value = wait_for("the saved consent timeout", || async {
        let Some(el) = app.find("input[type=number][max='86400']").await? else {
            return Ok(None);
        };
        Ok(el.prop("value").await?)
    })
    .await?;
    ensure!(value == "240", "consent timeout after a restart: {value}");
    app.wait_text("ul[aria-label='Remembered decisions']", "Always allow")
        .await?;
    app.click_button(".subnav", "Folders").await?;
    app.wait_text("ul[aria-label=Folders]", &projects).await?;

    // 6. History: search finds the message, with the match highlighted.
    app.open_screen("History").await?;
    app.wait_css("#history-search")
        .await?
        .send_keys("zebra")
        .await?;
    let mark = app
        .wait_text("ul[aria-label='Search results'] mark", "zebra")
        .await?;
    ensure!(mark.eq_ignore_ascii_case("zebra"), "highlighted: {mark}");
    app.wait_text(
        "ul[aria-label='Search results'] .snippet",
        "Please read my zebra notes",
    )
    .await?;
    app.click("ul[aria-label='Search results'] button.item")
        .await?;
    app.wait_text(".detail-body", "Please read my zebra notes")
        .await?;
    app.quit(driver, &fx.config).await?;
    Ok(())
}

// --- scenario B: the local demo from the first-run screen --------------------------------

#[test]
fn local_demo_from_first_run() {
    let _one = common::serial();
    common::require_demo_programs().unwrap();
    let fx = Fixture::new();
    let ns = NetNs::create().expect("a network namespace (run as root)");
    let name = ns.name().to_owned();
    let outcome = in_netns(&name.clone(), move || async move {
        let driver = Driver::start(&name, &fx.logs(), &fx.env(None)).await?;
        let r = demo_scenario(&driver, &fx).await;
        r.map_err(|e| e.context(format!("--- driver and app log ---\n{}", driver.log())))
    });
    drop(ns);
    if let Err(e) = outcome {
        panic!("{}", report(&e));
    }
}

async fn demo_scenario(driver: &Driver, fx: &Fixture) -> anyhow::Result<()> {
    let notes = path(&fx.notes);
    let app = App::launch().await?;

    // An empty config: the first-run screen.
    app.wait_text("#welcome-title", "Welcome to Outpost")
        .await?;
    driver.screenshot(&app, "first-run").await?;
    app.click_button(".first-run", "Try the local demo").await?;
    app.wait_text("#chat-title", "Outpost demo (scripted, not an AI)")
        .await?;
    app.wait_text("[data-testid=connection-state]", "Connected")
        .await?;
    // An empty conversation: the voice bar sits with the message box.
    driver.screenshot(&app, "chat-empty").await?;

    // The help text.
    app.say("help").await?;
    app.wait_assistant("I am a scripted demo, not an AI")
        .await?;

    // A calculation on the assistant's server: shown, not run by the app.
    app.say("calculate 6*7").await?;
    let card = app
        .wait_card("server_calculator", "completed", |c| {
            c["tool"] == "server_calculator"
        })
        .await?;
    ensure!(
        card["text"].as_str().unwrap_or_default().contains("42"),
        "{card}"
    );
    app.wait_assistant("= 42 (worked out by the assistant's server)")
        .await?;

    // A file outside the allowed folders: the dialog asks; Allow once; the answer
    // quotes the file.
    app.say(&format!("read the file {notes}")).await?;
    let (text, paths) = app.wait_consent().await?;
    ensure!(paths == [notes.clone()], "the dialog lists {paths:?}");
    ensure!(text.contains(&format!("Read {notes}")), "dialog: {text}");
    driver.screenshot(&app, "consent").await?;
    app.answer_consent("Allow once").await?;
    app.wait_card("read", "completed", |c| {
        c["tool"] == "read_local_file" && c["text"].as_str().unwrap_or_default().contains(&notes)
    })
    .await?;
    app.wait_assistant(NOTE.trim()).await?;
    driver.screenshot(&app, "chat").await?;

    // The SSH key: refused by the secrets list, without a question.
    app.say("ssh").await?;
    app.wait_card("ssh", "denied", |c| {
        c["tool"] == "read_local_file"
            && c["text"]
                .as_str()
                .unwrap_or_default()
                .contains(".ssh/id_rsa")
    })
    .await?;
    app.wait_assistant("The app refused the").await?;
    ensure!(
        app.consent_dialog().await?.is_none(),
        "the SSH key read asked for consent"
    );

    // Settings and history, for the screenshots (and a quick look).
    app.open_screen("Settings").await?;
    app.click_button(".subnav", "Tools & permissions").await?;
    app.wait_text("ul[aria-label=Tools]", "read_local_file")
        .await?;
    driver.screenshot(&app, "settings").await?;
    app.open_screen("History").await?;
    app.wait_css("#history-search")
        .await?
        .send_keys("zebra")
        .await?;
    app.wait_text("ul[aria-label='Search results'] mark", "zebra")
        .await?;
    app.click("ul[aria-label='Search results'] button.item")
        .await?;
    app.wait_text(".detail-body", NOTE.trim()).await?;
    driver.screenshot(&app, "history").await?;
    let bin_dir = app
        .bin
        .parent()
        .context("the app has no folder")?
        .to_path_buf();
    let programs = [bin_dir.join("outpost-room"), bin_dir.join("outpost-agent")];
    for p in &programs {
        ensure!(
            common::running(p, &fx.config),
            "the demo's {} is not running as the app's child",
            p.display()
        );
    }
    app.quit(driver, &fx.config).await?;
    wait_for("the demo's programs to end with the app", || async {
        Ok(programs
            .iter()
            .all(|p| !common::running(p, &fx.config))
            .then_some(()))
    })
    .await?;
    Ok(())
}

// --- scenario C: a second start -----------------------------------------------------------

/// How long the first instance lingers while quitting, holding its instance lock.
const EXIT_DELAY: Duration = Duration::from_secs(4);

#[test]
fn second_start_focuses_or_waits() {
    let _one = common::serial();
    let fx = Fixture::new();
    let ns = NetNs::create().expect("a network namespace (run as root)");
    let name = ns.name().to_owned();
    let outcome = in_netns(&name.clone(), move || async move {
        let mut env = fx.env(None);
        // Only the instance WebDriver starts lingers on exit; the ones started below do not.
        env.push((
            "OUTPOST_TEST_EXIT_DELAY_MS",
            EXIT_DELAY.as_millis().to_string().into(),
        ));
        let driver = Driver::start(&name, &fx.logs(), &env).await?;
        let r = second_start_scenario(&driver, &fx).await;
        r.map_err(|e| e.context(format!("--- driver and app log ---\n{}", driver.log())))
    });
    drop(ns);
    if let Err(e) = outcome {
        panic!("{}", report(&e));
    }
}

/// A start of the app beside the WebDriver one: same display, bus and profile.
struct Start {
    child: Child,
    log: PathBuf,
}

impl Start {
    fn new(driver: &Driver, fx: &Fixture, name: &str) -> anyhow::Result<Start> {
        let mut cmd = driver.command(Path::new(APP_BIN));
        for (k, v) in fx.env(None) {
            cmd.env(k, v);
        }
        cmd.env("RUST_LOG", "outpost_app=info,warn");
        let log = fx.logs().join(format!("{name}.log"));
        let file = std::fs::File::create(&log)?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()?;
        Ok(Start { child, log })
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until its page is up and talking to the backend ("ui subscribed": the window
    /// exists and its UI runs).
    async fn wait_window(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + common::PATIENCE;
        while !self.log().contains("ui subscribed") {
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!("it exited ({status}) without a window: {}", self.log());
            }
            ensure!(
                Instant::now() < deadline,
                "no window within {:?}: {}",
                common::PATIENCE,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }
}

impl Drop for Start {
    fn drop(&mut self) {
        // `ip netns exec` execs the app, so this is the app's own process.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn second_start_scenario(driver: &Driver, fx: &Fixture) -> anyhow::Result<()> {
    let bin = Path::new(APP_BIN);
    let app = App::launch().await?;
    app.wait_text("#welcome-title", "Welcome to Outpost")
        .await?;
    let first = common::processes(bin, &fx.config);
    ensure!(first.len() == 1, "app processes: {first:?}");
    let first = first[0];

    // 1. The first runs: the second brings its window forward and exits, successfully.
    let mut second = Start::new(driver, fx, "second")?;
    let deadline = Instant::now() + common::PATIENCE;
    let status = loop {
        if let Some(status) = second.child.try_wait()? {
            break status;
        }
        ensure!(
            Instant::now() < deadline,
            "the second start did not exit while the first runs: {}",
            second.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    ensure!(
        status.success(),
        "the second start exited with {status}: {}",
        second.log()
    );
    ensure!(
        second
            .log()
            .contains("already running; brought its window forward"),
        "second start's log: {}",
        second.log()
    );
    ensure!(
        common::processes(bin, &fx.config) == [first],
        "the first instance is not the only one left"
    );
    wait_for("the first instance to log the request", || async {
        Ok(driver
            .log()
            .contains("another start asked for the window")
            .then_some(()))
    })
    .await?;
    app.wait_text("#welcome-title", "Welcome to Outpost")
        .await?;

    // 2. The first quits (its window closes; it lingers EXIT_DELAY holding the lock): a
    //    start now waits for it and then shows its own window.
    // SIGTERM quits the app the way closing its window does (WebDriver cannot close the
    // window without also killing the app).
    std::process::Command::new("kill")
        .args(["-TERM", &first.to_string()])
        .status()?;
    let closed = Instant::now();
    let mut third = Start::new(driver, fx, "third")?;
    third.wait_window().await?;
    ensure!(
        third.log().contains("quitting; waiting for it to end")
            && third
                .log()
                .contains("the previous Outpost has ended; starting"),
        "the start during the shutdown did not wait for it: {}",
        third.log()
    );
    ensure!(
        closed.elapsed() >= EXIT_DELAY - Duration::from_millis(500),
        "the third start had its window before the first ended"
    );
    let left = common::processes(bin, &fx.config);
    ensure!(
        left == [third.child.id()],
        "app processes after the hand-over: {left:?}"
    );

    // 3. The running one does not answer (stopped): a fourth start waits, and once the
    //    stopped one is gone it shows its own window.
    let kill = |sig: &str, pid: u32| {
        std::process::Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
    };
    kill("-STOP", third.child.id())?;
    let mut fourth = Start::new(driver, fx, "fourth")?;
    tokio::time::sleep(Duration::from_secs(8)).await;
    ensure!(
        fourth.child.try_wait()?.is_none(),
        "the fourth start exited while the running one did not answer: {}",
        fourth.log()
    );
    ensure!(
        fourth
            .log()
            .contains("does not answer; waiting for it to end"),
        "fourth start's log: {}",
        fourth.log()
    );
    kill("-KILL", third.child.id())?;
    fourth.wait_window().await?;
    drop(third);
    drop(fourth);
    drop(app);
    Ok(())
}
