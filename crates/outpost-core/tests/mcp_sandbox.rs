//! Issue 28 with the real policy: a sandboxed MCP server reaches the policy's allowed
//! folders split around everything the policy denies (the roots' rule), so a file on the
//! secrets list inside an allowed folder, or inside a folder its own `read` names, stays
//! out of reach; and when the user takes a folder back, the server is restarted without
//! it. Servers: the npm reference filesystem server told `/` is its folder (no roots
//! offered, so only the sandbox holds it) and `tests/mcp/hostile_server.py`.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use outpost_core::{Core, PolicySource, ToolsConfig};
use outpost_mcp::sandbox::Support;
use outpost_mcp::{
    CallOptions, ConfigValue, ConnectOptions, HostOptions, McpHost, MemorySecrets, SandboxOptions,
    ServerConfig, Transport,
};
use outpost_policy::{FolderAccess, FolderRule, Policy};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> PathBuf {
    std::env::var_os("OUTPOST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv/bin/python"))
}

fn with_home(mut c: ServerConfig, home: &Path) -> ServerConfig {
    if let Transport::Stdio { env, .. } = &mut c.transport {
        env.insert(
            "HOME".into(),
            ConfigValue::Plain(home.display().to_string()),
        );
    }
    c
}

fn filesystem_at_root(home: &Path) -> ServerConfig {
    let js =
        repo().join("tests/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        js.exists(),
        "{} is missing: run scripts/setup.sh",
        js.display()
    );
    with_home(
        ServerConfig::stdio("node", vec![js.display().to_string(), "/".into()]),
        home,
    )
}

fn hostile(home: &Path, read: Vec<PathBuf>) -> ServerConfig {
    let mut c = with_home(
        ServerConfig::stdio(
            python().display().to_string(),
            vec![
                repo()
                    .join("tests/mcp/hostile_server.py")
                    .display()
                    .to_string(),
            ],
        ),
        home,
    );
    c.sandbox_mut().unwrap().read = read;
    c
}

struct World {
    dir: tempfile::TempDir,
    core: Core,
}

impl World {
    /// A home with an SSH key; an allowed folder `work` holding notes, a `.env` and a key
    /// file; a folder `refs` (not allowed) holding a reference and a `.env`.
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        for (p, text) in [
            ("home/.ssh/id_rsa", "PRIVATE KEY sandbox"),
            ("work/docs/notes.txt", "work notes"),
            ("work/docs/old.txt", "old"),
            ("work/.env", "API_KEY=env-secret"),
            ("work/deploy/id_ed25519", "ANOTHER KEY"),
            ("work/deploy/readme.txt", "deploy readme"),
            ("refs/sub/ref.txt", "a reference"),
            ("refs/.env", "REF_SECRET=1"),
        ] {
            let path = dir.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let work = dir.path().join("work").canonicalize().unwrap();
        let policy = Policy {
            folders: vec![FolderRule {
                path: work.display().to_string(),
                access: FolderAccess::Allow,
                tools: None,
            }],
            ..Policy::default()
        };
        let core = Core::open(
            Some(dir.path().join("data")),
            ToolsConfig {
                policy: PolicySource::InMemory(policy),
                home: dir.path().join("home"),
                protected: Vec::new(),
            },
        )
        .unwrap();
        World { dir, core }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir
            .path()
            .join(rel)
            .canonicalize()
            .unwrap_or_else(|_| self.dir.path().join(rel))
    }

    /// A host as `outpost connect` makes one, but offering no roots.
    async fn host(&self) -> McpHost {
        let roots = self.core.mcp_roots().await;
        let connect = ConnectOptions {
            log_dir: Some(self.dir.path().join("logs")),
            sandbox: SandboxOptions {
                folders: roots.folders,
                gate: self.core.mcp_gate(),
                ..SandboxOptions::default()
            },
            ..ConnectOptions::default()
        };
        McpHost::new(
            HostOptions::new(connect, Arc::new(MemorySecrets::default())),
            Vec::new(),
        )
    }
}

async fn call(host: &McpHost, server: &str, tool: &str, args: serde_json::Value) -> (bool, String) {
    let out = host
        .call(
            server,
            tool,
            args.as_object().cloned(),
            CallOptions::with_timeout(WAIT),
        )
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let text = out.result["text"].as_str().unwrap_or_default().to_owned();
    (out.is_error, text)
}

fn refused((is_error, text): (bool, String), what: &str) {
    assert!(is_error, "{what} was not refused: {text}");
    assert!(
        text.contains("ermission denied") || text.contains("EACCES"),
        "{what}: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_inside_an_allowed_folder_stays_out_of_reach() {
    if Support::detect().landlock == 0 {
        eprintln!("skipped: this kernel has no Landlock");
        return;
    }
    let w = World::new();
    let home = w.path("home");
    let host = w.host().await;
    host.start("fs", filesystem_at_root(&home)).unwrap();
    host.start("hostile", hostile(&home, vec![w.path("refs")]))
        .unwrap();
    host.wait_running("fs", WAIT).await.unwrap();
    host.wait_running("hostile", WAIT).await.unwrap();
    let read = |server: &'static str, rel: &str| {
        let (host, path) = (host.clone(), w.path(rel).display().to_string());
        async move {
            match server {
                "fs" => call(&host, "fs", "read_text_file", json!({"path": path})).await,
                _ => call(&host, "hostile", "read_file", json!({"path": path})).await,
            }
        }
    };
    for server in ["fs", "hostile"] {
        let (err, text) = read(server, "work/docs/notes.txt").await;
        assert!(!err && text.contains("work notes"), "{server}: {text}");
        // A folder holding a secret is split, and files directly in a split folder are
        // not reachable (a grant is a whole folder), as for the roots.
        refused(read(server, "work/deploy/readme.txt").await, "beside a key");
        refused(
            read(server, "work/.env").await,
            "a .env inside the allowed folder",
        );
        refused(
            read(server, "work/deploy/id_ed25519").await,
            "a key inside it",
        );
        refused(read(server, "home/.ssh/id_rsa").await, "~/.ssh/id_rsa");
        refused(
            read(server, "data/outpost.sqlite3").await,
            "Outpost's own data",
        );
    }
    // The server's own `read` folder is split the same way.
    let (err, text) = read("hostile", "refs/sub/ref.txt").await;
    assert!(!err && text.contains("a reference"), "{text}");
    refused(
        read("hostile", "refs/.env").await,
        "a .env inside its read folder",
    );
    // Writing: inside the allowed folder (an existing file: the filesystem server checks
    // a new name from its folder, `/`, down), never the .env.
    let wrote = call(
        &host,
        "fs",
        "write_file",
        json!({"path": w.path("work/docs/old.txt").display().to_string(), "content": "new"}),
    )
    .await;
    assert!(!wrote.0, "{}", wrote.1);
    refused(
        call(
            &host,
            "hostile",
            "write_file",
            json!({"path": w.path("work/.env").display().to_string(), "text": "X=1"}),
        )
        .await,
        "writing the .env",
    );
    assert_eq!(
        std::fs::read_to_string(w.path("work/.env")).unwrap(),
        "API_KEY=env-secret"
    );

    // The user takes the folder back: the sandboxed servers restart without it.
    let task = w.core.follow_mcp_roots(host.clone());
    w.core
        .permissions()
        .policy()
        .update(|p| p.folders.clear())
        .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let snap = host.snapshot();
        let st = &snap["hostile"];
        if st.starts >= 2 && st.status == outpost_mcp::ServerStatus::Running {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{st:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(host.folders().is_empty());
    refused(
        read("hostile", "work/docs/notes.txt").await,
        "a folder taken back",
    );
    task.abort();
    host.shutdown();
}
