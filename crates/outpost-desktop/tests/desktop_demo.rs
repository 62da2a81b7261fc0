//! The desktop backend end to end, headless: the demo (the real outpost-room server on
//! loopback and the scripted reference assistant, as child processes, over real WebRTC), the real
//! policy file and SQLite store in a temporary folder. What the Tauri commands do, without
//! a window.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use outpost_desktop::contract::{
    AppEvent, ConnectionStatus, ConsentRequest, Decision, RememberedKind, Settings, ToolResult,
    ToolRule,
};
use outpost_desktop::demo::DemoPrograms;
use outpost_desktop::paths::Paths;
use outpost_desktop::secrets::MemorySecrets;
use outpost_desktop::{Desktop, DesktopError, Notifier};
use tokio::sync::mpsc;

#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<(String, String)>>);

impl Notifier for Recorder {
    fn notify(&self, title: &str, body: &str) {
        self.0.lock().unwrap().push((title.into(), body.into()));
    }
}

struct App {
    desktop: Desktop,
    events: mpsc::UnboundedReceiver<AppEvent>,
    notes: Arc<Recorder>,
}

fn open(paths: &Paths) -> App {
    let notes = Arc::new(Recorder::default());
    let desktop = Desktop::open(
        paths.clone(),
        Arc::new(MemorySecrets::default()),
        notes.clone(),
    )
    .unwrap();
    let (tx, events) = mpsc::unbounded_channel();
    let snap = desktop.subscribe(Box::new(move |ev| {
        let _ = tx.send(ev);
    }));
    assert!(snap.transcript.is_empty());
    App {
        desktop,
        events,
        notes,
    }
}

impl App {
    /// The next event `pick` accepts (others are skipped); fails after 30 s.
    async fn wait<T>(&mut self, what: &str, mut pick: impl FnMut(&AppEvent) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let ev = tokio::time::timeout_at(deadline, self.events.recv())
                .await
                .unwrap_or_else(|_| panic!("no {what} within 30 s"))
                .expect("event channel closed");
            if let Some(t) = pick(&ev) {
                return t;
            }
        }
    }

    async fn consent(&mut self) -> ConsentRequest {
        self.wait("consent request", |e| match e {
            AppEvent::ConsentRequest(c) => Some(c.clone()),
            _ => None,
        })
        .await
    }

    async fn result(&mut self) -> ToolResult {
        self.wait("tool result", |e| match e {
            AppEvent::ToolResult(r) => Some(r.clone()),
            AppEvent::ConsentRequest(c) => panic!("unexpected consent request {c:?}"),
            _ => None,
        })
        .await
    }

    /// The assistant's final words of a turn. Text that followed a tool call is its own
    /// segment (a second message right after the first): both arrive together at the end
    /// of the turn and are joined here.
    async fn reply(&mut self) -> String {
        let mut text = self
            .wait("assistant message", |e| match e {
                AppEvent::AssistantMessage(m) => Some(m.text.clone()),
                _ => None,
            })
            .await;
        while let Ok(Some(ev)) =
            tokio::time::timeout(Duration::from_millis(300), self.events.recv()).await
        {
            if let AppEvent::AssistantMessage(m) = ev {
                text.push_str(&m.text);
            }
        }
        text
    }
}

/// A temporary folder with the app's config and data folders in it.
fn temp_paths() -> (tempfile::TempDir, Paths) {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths {
        config_dir: dir.path().join("config"),
        data_dir: dir.path().join("data"),
    };
    (dir, paths)
}

/// Opens the app at `paths` and starts the local demo; returns it with its first session.
async fn with_demo(paths: &Paths) -> (App, outpost_desktop::contract::SessionInfo) {
    let mut app = open(paths);
    app.desktop.set_demo_programs(demo_programs());
    app.desktop.start_demo().await.unwrap();
    let session = app
        .wait("session", |e| match e {
            AppEvent::Session(s) => Some(s.clone()),
            _ => None,
        })
        .await;
    (app, session)
}

/// `outpost-room` and `outpost-agent` as cargo built them, beside this test's folder
/// (`target/<profile>/deps/..`), or in `OUTPOST_DEMO_BIN_DIR`.
fn demo_programs() -> DemoPrograms {
    let dir = std::env::var_os(outpost_desktop::demo::BIN_DIR_ENV)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().unwrap();
            exe.parent().unwrap().parent().unwrap().to_path_buf()
        });
    let programs = DemoPrograms {
        room: dir.join("outpost-room"),
        agent: dir.join("outpost-agent"),
    };
    for p in [&programs.room, &programs.agent] {
        assert!(
            p.is_file(),
            "{} is missing: run `cargo build -p outpost-room -p outpost-agent` first \
             (scripts/test.sh does)",
            p.display()
        );
    }
    programs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_consent_history_settings_and_notifications() {
    let (dir, paths) = temp_paths();
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let notes_file = files.join("notes.txt");
    std::fs::write(&notes_file, "the zebra crossing is at noon\n").unwrap();

    let (mut app, session) = with_demo(&paths).await;
    assert!(!session.conversation_id.is_empty());

    // 1. Allow once: the dialog shows the path; the result reaches the assistant.
    let ask = format!("read the file {}", notes_file.display());
    app.desktop.send(ask.clone()).await.unwrap();
    let c = app.consent().await;
    assert_eq!(c.tool, "read_local_file");
    assert!(c.paths.iter().any(|p| p.ends_with("notes.txt")), "{c:?}");
    assert_eq!(c.conversation_id, session.conversation_id);
    assert!(c.options.contains(&Decision::AlwaysAllow));
    // Something that is not a decision never reaches the question (the UI's answer is
    // parsed into the policy's enum at the edge, naming the choices).
    let err = "maybe".parse::<Decision>().unwrap_err();
    assert!(err.to_string().contains("allow_once"), "{err}");
    app.desktop
        .answer_consent(&c.consent_id, Decision::AllowOnce)
        .unwrap();
    let err = app
        .desktop
        .answer_consent(&c.consent_id, Decision::AllowOnce)
        .unwrap_err();
    assert_eq!(err.code(), "unknown_consent");
    let r = app.result().await;
    assert!(r.success, "{r:?}");
    assert!(app.reply().await.contains("zebra crossing"));

    // 2. Deny: permission_denied reaches the assistant. The window is unfocused, so a
    //    notification asks for attention.
    app.desktop.set_focused(false);
    app.desktop.send(ask.clone()).await.unwrap();
    let c = app.consent().await;
    // The notification goes out just after the UI event, from the session's task: wait
    // for it rather than race it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while app.notes.0.lock().unwrap().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no notification");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(app.notes.0.lock().unwrap().len(), 1, "one notification");
    app.desktop.set_focused(true);
    app.desktop
        .answer_consent(&c.consent_id, Decision::DenyOnce)
        .unwrap();
    let r = app.result().await;
    assert_eq!(r.error_code.as_deref(), Some("permission_denied"), "{r:?}");
    assert!(app.reply().await.contains("refused"));

    // 3. Always allow: the next read does not ask; the rule is listed and revocable.
    app.desktop.send(ask.clone()).await.unwrap();
    let c = app.consent().await;
    app.desktop
        .answer_consent(&c.consent_id, Decision::AlwaysAllow)
        .unwrap();
    assert!(app.result().await.success);
    app.desktop.send(ask.clone()).await.unwrap();
    let r = app.result().await; // panics on a consent request
    assert!(r.success);
    let remembered = app.desktop.remembered();
    assert_eq!(remembered.len(), 1, "{remembered:?}");
    assert_eq!(remembered[0].decision, RememberedKind::AlwaysAllow);
    app.desktop.revoke(&remembered[0].id).unwrap();
    assert!(app.desktop.remembered().is_empty());
    assert_eq!(
        app.desktop.revoke(&remembered[0].id).unwrap_err().code(),
        "not_found"
    );

    // 4. History: the message is found, with markers around the match.
    app.desktop.store_flush().await;
    let hits = app
        .desktop
        .history_search("zebra".into(), 20, "<<".into(), ">>".into())
        .await
        .unwrap();
    assert!(
        hits.iter().any(|h| h.snippet.contains("<<zebra>>")),
        "{hits:?}"
    );
    let list = app.desktop.history_list(10, 0).await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(
        list[0].title, ask,
        "the first message names the conversation"
    );
    let detail = app.desktop.history_get(&list[0].id).await.unwrap();
    assert!(detail.transcript.len() >= 8, "{:?}", detail.transcript);
    let export = app
        .desktop
        .history_export(
            Some(list[0].id.clone()),
            outpost_desktop::contract::ExportFormat::Markdown,
            &dir.path().join("out"),
        )
        .await
        .unwrap();
    let text = std::fs::read_to_string(&export.path).unwrap();
    assert!(text.contains("zebra crossing"));
    assert_eq!(
        app.desktop.history_get("nope").await.unwrap_err().code(),
        "not_found"
    );

    // 5. Settings: bad values are refused naming the field; good ones survive a restart.
    let mut s: Settings = app.desktop.settings();
    s.consent_timeout_secs = 0;
    let err = app.desktop.set_settings(s.clone()).await.unwrap_err();
    assert!(err.to_string().contains("consentTimeoutSecs"), "{err}");
    s.consent_timeout_secs = 75;
    s.folders.push(outpost_desktop::contract::FolderScope {
        path: "relative".into(),
        access: outpost_desktop::contract::FolderAccess::Allow,
        tools: None,
    });
    let err = app.desktop.set_settings(s.clone()).await.unwrap_err();
    assert!(err.to_string().contains("folders[0].path"), "{err}");
    s.folders[0].path = files.display().to_string();
    s.notifications.long_task_secs = 42;
    s.connection.livekit_url = "javascript:alert(1)".into();
    assert_eq!(
        app.desktop
            .set_settings(s.clone())
            .await
            .unwrap_err()
            .code(),
        "invalid_argument"
    );
    s.connection.livekit_url = "wss://example.livekit.cloud".into();
    let saved = app.desktop.set_settings(s.clone()).await.unwrap();
    assert_eq!(saved.consent_timeout_secs, 75);
    let tool = app
        .desktop
        .set_tool(
            "list_directory",
            false,
            outpost_desktop::contract::ToolRule::Deny,
        )
        .unwrap();
    assert!(!tool.enabled);
    let err = app
        .desktop
        .set_tool(
            "write_file",
            true,
            outpost_desktop::contract::ToolRule::Allow,
        )
        .unwrap_err();
    assert_eq!(
        err.code(),
        "invalid_argument",
        "destructive tools always ask: {err}"
    );

    app.desktop.disconnect().await;
    // Voice let go of the session that left: it says so rather than publishing there.
    assert!(
        matches!(
            app.desktop.voice_start().await,
            Err(outpost_desktop::DesktopError::NotConnected)
        ),
        "voice after a disconnect"
    );
    drop(app);
    let again = open(&paths);
    let s2 = again.desktop.settings();
    assert_eq!(s2.consent_timeout_secs, 75);
    assert_eq!(s2.folders.len(), 1);
    assert_eq!(s2.notifications.long_task_secs, 42);
    assert_eq!(s2.connection.livekit_url, "wss://example.livekit.cloud");
    let t = again
        .desktop
        .tools()
        .into_iter()
        .find(|t| t.name == "list_directory")
        .unwrap();
    assert!(!t.enabled);
    assert_eq!(t.rule, ToolRule::Deny);
}

/// This process's children whose stderr goes to a log in `logs`: the demo's room server
/// and assistant of the app whose data folder holds `logs` (other tests run their own demos
/// in this process at the same time).
fn demo_children(logs: &std::path::Path) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let writes_there = std::fs::read_link(format!("/proc/{pid}/fd/2"))
            .is_ok_and(|target| target.starts_with(logs));
        let running = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')').next().unwrap_or("").split_whitespace().next() != Some("Z")
        });
        if writes_there && running {
            pids.push(pid);
        }
    }
    pids
}

/// One owner for a session's lifetime: the demo's children are pieces of the demo's
/// session, so a connection to somewhere else ends them with it (before, they ran on
/// until a disconnect, a new demo or the app's exit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_ends_the_demo_children_with_the_demo_session() {
    let (_dir, paths) = temp_paths();
    let (app, _) = with_demo(&paths).await;
    let logs = paths.data_dir.join("logs");
    let children = demo_children(&logs);
    assert_eq!(
        children.len(),
        2,
        "the room server and the assistant: {children:?}"
    );
    let mut s = app.desktop.settings();
    // Nothing listens there: the new session fails, after the old one has ended.
    s.connection.livekit_url = "ws://127.0.0.1:9".into();
    app.desktop.set_settings(s).await.unwrap();
    app.desktop
        .set_secret("livekit_token", "not-a-token")
        .unwrap();
    assert!(app.desktop.connect().await.is_err());
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !demo_children(&logs).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the demo's children run on: {:?}",
            demo_children(&logs)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A disconnect while the join hangs (a server on loopback that accepts and never
/// answers) gives the join up: the connect ends saying it was cancelled, rather than the
/// disconnect waiting for it to time out and fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnect_gives_up_a_join_that_hangs() {
    let (_dir, paths) = temp_paths();
    let mut app = open(&paths);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
        }
    });
    let mut s = app.desktop.settings();
    s.connection.livekit_url = format!("ws://127.0.0.1:{port}");
    app.desktop.set_settings(s).await.unwrap();
    app.desktop
        .set_secret("livekit_token", "not-a-token")
        .unwrap();
    let desktop = app.desktop.clone();
    let joining = tokio::spawn(async move { desktop.connect().await });
    app.wait("the join under way", |e| match e {
        AppEvent::Connection(c) if c.state == ConnectionStatus::Connecting => Some(()),
        _ => None,
    })
    .await;
    app.desktop.disconnect().await;
    let joined = joining.await.unwrap();
    assert!(
        matches!(joined, Err(DesktopError::Cancelled(_))),
        "{joined:?}"
    );
    app.wait("the disconnect shown", |e| match e {
        AppEvent::Connection(c) if c.state == ConnectionStatus::Disconnected => Some(()),
        _ => None,
    })
    .await;
    silent.abort();
}

#[test]
fn only_web_and_mail_links_open() {
    use outpost_desktop::check_link;
    assert!(check_link("https://livekit.io/docs").is_ok());
    assert!(check_link("mailto:team@example.org").is_ok());
    for bad in [
        "javascript:alert(1)",
        "file:///etc/passwd",
        "data:text/html,hi",
        "http://x\n.example",
        "",
        "mailto:team@example.org?attach=/home/u/.ssh/id_rsa",
        "mailto:team@example.org?subject=x&Attachment=file:///etc/passwd",
    ] {
        assert_eq!(
            check_link(bad).unwrap_err().code(),
            "invalid_argument",
            "{bad}"
        );
    }
}

/// More conversations than one store page: the list pages on, and "delete history" removes
/// every one of them, not just the first page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_pages_past_the_store_page_and_delete_all_removes_everything() {
    let (_dir, paths) = temp_paths();
    let app = open(&paths);
    let store = app.desktop.core().store().clone();
    let page = outpost_store::query::MAX_PAGE;
    let total = page as usize + 5;
    for i in 0..total {
        store
            .begin_conversation(outpost_store::NewConversation {
                id: outpost_store::ConversationId(format!("c{i:05}")),
                title: Some(format!("conversation {i}")),
                room: None,
                assistant_identity: None,
                started_at: 1_000 + i as i64,
            })
            .await
            .unwrap();
    }
    let tail = app.desktop.history_list(10, page).await.unwrap();
    assert_eq!(
        tail.len(),
        5,
        "the oldest five are past the first store page"
    );
    assert_eq!(tail[4].id, "c00000");
    assert_eq!(
        app.desktop.history_delete_all().await.unwrap(),
        total as u64
    );
    assert!(app.desktop.history_list(10, 0).await.unwrap().is_empty());
}

/// A file the user gives the demo assistant (Outpost protocol, capability `attachments`):
/// refused before anything is read when it is on the secrets list or too large; staged and
/// shown exactly (name, type, size, hash, the image) otherwise; sent with the next message,
/// where the agent's model is told its name, type, size and hash; kept in the history with
/// the bytes of a small image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_reach_the_demo_assistant_and_the_history_keeps_them() {
    use outpost_desktop::contract::TranscriptEntry;
    let (dir, paths) = temp_paths();
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let png: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01";
    let dot = files.join("dot.png");
    std::fs::write(&dot, png).unwrap();
    let key = files.join("id_rsa");
    std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----").unwrap();

    // Before a session no assistant takes anything.
    let err = open(&paths).desktop.attach_path(&dot).unwrap_err();
    assert_eq!(err.code(), "attachment_refused");
    let (mut app, session) = with_demo(&paths).await;
    assert!(session.attachments, "the demo agent announces attachments");

    let err = app.desktop.attach_path(&key).unwrap_err();
    assert_eq!(err.code(), "attachment_refused");
    assert!(
        err.to_string()
            .starts_with("Outpost will not send id_rsa: files named like 'id_rsa'"),
        "{err}"
    );
    assert!(
        app.desktop.attachments_staged().is_empty(),
        "nothing staged"
    );

    let staged = app.desktop.attach_path(&dot).unwrap();
    assert_eq!(staged.len(), 1);
    let sha = outpost_protocol::sha256_hex(png);
    assert_eq!(
        (
            staged[0].name.as_str(),
            staged[0].mime_type.as_str(),
            staged[0].size
        ),
        ("dot.png", "image/png", png.len() as u64)
    );
    assert_eq!(staged[0].sha256, sha);
    assert!(
        staged[0]
            .image
            .as_deref()
            .unwrap()
            .starts_with("data:image/png;base64,")
    );
    // A pasted one, then removed again.
    let pasted = app
        .desktop
        .attach_data("note.txt", Some("text/plain"), "aGk=")
        .unwrap();
    assert_eq!(pasted.len(), 2);
    assert_eq!(app.desktop.attach_remove(&pasted[1].id).len(), 1);

    let sent = app
        .desktop
        .send("what did I give you?".into())
        .await
        .unwrap();
    assert_eq!(sent.attachments.len(), 1);
    assert!(
        app.desktop.attachments_staged().is_empty(),
        "sent with the message"
    );
    let reply = app.reply().await;
    assert!(
        reply.contains(&format!(
            "You gave me: dot.png, image/png, {} bytes, sha256 {sha}",
            png.len()
        )),
        "{reply}"
    );

    app.desktop.store_flush().await;
    let list = app.desktop.history_list(10, 0).await.unwrap();
    let detail = app.desktop.history_get(&list[0].id).await.unwrap();
    let kept = detail
        .transcript
        .iter()
        .find_map(|e| match e {
            TranscriptEntry::User { attachments, .. } if !attachments.is_empty() => {
                Some(attachments.clone())
            }
            _ => None,
        })
        .expect("the user message keeps its file");
    assert_eq!(kept[0].sha256, sha);
    assert_eq!(
        kept[0].image, staged[0].image,
        "a small image's bytes are kept"
    );
    app.desktop.disconnect().await;
}
