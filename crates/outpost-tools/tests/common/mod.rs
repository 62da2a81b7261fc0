//! Shared test harness: a temporary home directory, a dispatcher over it, a fake launcher
//! and helpers to send requests and collect what comes back.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use outpost_policy::{ConsentBroker, Policy, PolicyContext, PolicyStore};
use outpost_protocol::{Execution, Map, ToolUseRequest, ToolUseResult, Value};
use outpost_tools::{DispatchEvent, Dispatcher, Handled, Launcher, Registry, ToolEnv};
use tokio::sync::mpsc::UnboundedReceiver;

/// Records what would have been opened; never starts anything.
#[derive(Debug, Default)]
pub struct FakeLauncher {
    pub opened: Mutex<Vec<OsString>>,
}

impl Launcher for FakeLauncher {
    fn open(&self, target: &OsStr) -> std::io::Result<()> {
        self.opened.lock().unwrap().push(target.to_os_string());
        Ok(())
    }
}

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    pub dispatcher: Dispatcher,
    pub rx: UnboundedReceiver<DispatchEvent>,
    pub launcher: Arc<FakeLauncher>,
    /// Every event received so far, in order.
    pub events: Vec<DispatchEvent>,
}

pub fn home_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(dir.path()).unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    (dir, home)
}

impl Harness {
    /// A harness whose policy is built by `policy(home)`.
    pub fn new(policy: impl FnOnce(&Path) -> Policy) -> Self {
        Self::with_registry(policy, outpost_tools::builtin_registry().unwrap())
    }

    pub fn with_registry(policy: impl FnOnce(&Path) -> Policy, registry: Registry) -> Self {
        let (dir, home) = home_dir();
        let ctx = PolicyContext::new(&home, vec![home.join(".config/outpost")]);
        let store = PolicyStore::in_memory(policy(&home), ctx);
        Self::with_store(dir, home, store, registry)
    }

    pub fn with_store(
        dir: tempfile::TempDir,
        home: PathBuf,
        store: PolicyStore,
        registry: Registry,
    ) -> Self {
        let launcher = Arc::new(FakeLauncher::default());
        let env = ToolEnv {
            home: home.clone(),
            launcher: launcher.clone(),
        };
        let (dispatcher, rx) = Dispatcher::new(registry, env, store, ConsentBroker::new());
        Self {
            dir,
            home,
            dispatcher,
            rx,
            launcher,
            events: Vec::new(),
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.home.join(rel)
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p
    }

    pub fn send(&self, id: &str, tool: &str, params: Value) -> Handled {
        self.send_full("c1", id, tool, Execution::Client, params, None)
    }

    pub fn send_full(
        &self,
        conversation: &str,
        id: &str,
        tool: &str,
        execution: Execution,
        params: Value,
        timeout_ms: Option<u32>,
    ) -> Handled {
        self.dispatcher.handle_request(
            conversation,
            request(id, tool, execution, params, timeout_ms),
        )
    }

    /// Waits (up to 10 s) for the next result for `id`, keeping every event seen.
    pub async fn result(&mut self, id: &str) -> ToolUseResult {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let ev = tokio::time::timeout_at(deadline, self.rx.recv())
                .await
                .unwrap_or_else(|_| panic!("no result for {id} within 10 s"))
                .expect("dispatcher dropped");
            self.events.push(ev.clone());
            if let DispatchEvent::Result(r) = ev {
                if r.id == id {
                    return r;
                }
            }
        }
    }

    /// Collects events for `dur`.
    pub async fn drain(&mut self, dur: Duration) {
        let deadline = tokio::time::Instant::now() + dur;
        while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, self.rx.recv()).await {
            self.events.push(ev);
        }
    }

    pub fn results_for(&self, id: &str) -> Vec<&ToolUseResult> {
        self.events
            .iter()
            .filter_map(|e| match e {
                DispatchEvent::Result(r) if r.id == id => Some(r),
                _ => None,
            })
            .collect()
    }
}

pub fn request(
    id: &str,
    tool: &str,
    execution: Execution,
    params: Value,
    timeout_ms: Option<u32>,
) -> ToolUseRequest {
    ToolUseRequest {
        id: id.into(),
        message_id: "msg_1".into(),
        tool_name: tool.into(),
        execution,
        parameters: map(params),
        timeout_ms,
    }
}

pub fn map(v: Value) -> Map {
    match v {
        Value::Object(m) => m,
        other => panic!("not a map: {other}"),
    }
}

/// A policy allowing every tool inside `home/docs`.
pub fn docs_policy(home: &Path) -> Policy {
    Policy {
        folders: vec![outpost_policy::FolderRule {
            path: home.join("docs").to_string_lossy().into_owned(),
            access: outpost_policy::FolderAccess::Allow,
            tools: None,
        }],
        ..Policy::default()
    }
}

pub fn code(r: &ToolUseResult) -> &str {
    r.error_code.as_ref().map_or("", |c| c.as_str())
}

pub fn msg(r: &ToolUseResult) -> &str {
    r.error_message.as_deref().unwrap_or("")
}

pub fn field<'a>(r: &'a ToolUseResult, name: &str) -> &'a Value {
    r.result
        .as_ref()
        .and_then(|m| m.get(name))
        .unwrap_or_else(|| panic!("no field {name} in {r:?}"))
}

/// The next question the UI receives (fails after 10 s).
pub async fn asked(ui: &mut outpost_policy::ConsentInbox) -> outpost_policy::ConsentRequest {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), ui.next()).await {
            Ok(Some(outpost_policy::ConsentEvent::Asked(q))) => return *q,
            Ok(Some(_)) => continue,
            Ok(None) => panic!("consent inbox closed"),
            Err(_) => panic!("no consent question within 10 s"),
        }
    }
}

/// A test tool: sleeps `sleepMs` in small steps (honouring cancellation), records that it
/// ran under `tag`, and fails when `fail` is set (with partial output).
#[derive(Debug, Clone)]
pub struct Probe {
    pub name: &'static str,
    pub ran: Arc<Mutex<Vec<String>>>,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProbeParams {
    pub tag: String,
    pub sleep_ms: Option<u64>,
    pub fail: Option<bool>,
}

#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub struct ProbeOut {
    pub tag: String,
}

impl outpost_tools::Tool for Probe {
    fn spec(&self) -> outpost_tools::ToolSpec {
        outpost_tools::ToolSpec::new::<ProbeParams, ProbeOut>(
            self.name,
            "test probe",
            outpost_policy::ToolHints {
                read_only: true,
                ..Default::default()
            },
            1000,
        )
    }

    fn prepare(
        &self,
        params: Map,
        _env: &ToolEnv,
    ) -> outpost_tools::Result<outpost_tools::Prepared> {
        let p: ProbeParams = outpost_tools::parse_params(params)?;
        let ran = self.ran.clone();
        Ok(outpost_tools::Prepared {
            access: outpost_tools::Access {
                summary: format!("probe {}", p.tag),
                ..Default::default()
            },
            job: Box::new(move |cx| {
                cx.check()?;
                ran.lock().unwrap().push(p.tag.clone());
                let until =
                    std::time::Instant::now() + Duration::from_millis(p.sleep_ms.unwrap_or(0));
                while std::time::Instant::now() < until {
                    cx.check()?;
                    std::thread::sleep(Duration::from_millis(2));
                }
                if p.fail.unwrap_or(false) {
                    let mut partial = Map::new();
                    partial.insert("done".into(), Value::from(1));
                    return Err(outpost_tools::ToolError::Execution {
                        message: format!("probe {} failed", p.tag),
                        partial: Some(partial),
                    });
                }
                outpost_tools::to_map(&ProbeOut { tag: p.tag })
            }),
        })
    }
}

/// A registry with the built-ins plus `probe` (asks: set to "ask" by [`probe_policy`]) and
/// `probe_free` (allowed by default), sharing one execution log.
pub fn probe_registry() -> (Registry, Arc<Mutex<Vec<String>>>) {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let mut r = outpost_tools::builtin_registry().unwrap();
    r.register(Probe {
        name: "probe",
        ran: ran.clone(),
    })
    .unwrap();
    r.register(Probe {
        name: "probe_free",
        ran: ran.clone(),
    })
    .unwrap();
    (r, ran)
}

pub fn probe_policy(home: &Path) -> Policy {
    let mut p = docs_policy(home);
    p.tools.insert("probe".into(), outpost_policy::Rule::Ask);
    p
}
