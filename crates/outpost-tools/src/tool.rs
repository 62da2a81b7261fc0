//! The tool abstraction: a [`Tool`] describes itself with a [`ToolSpec`] and turns
//! validated parameters into a [`Prepared`] call: what the call touches ([`Access`], for
//! the policy and the consent prompt) and the blocking job that does it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use outpost_policy::{CompiledPolicy, ServerClaims, ToolHints};
use outpost_protocol::{Map, ProgressState, ToolDescriptor, ToolUseProgress, Value};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::error::{Result, ToolError};
use crate::launcher::Launcher;

/// A tool's description: the catalogue entry plus the hints the policy uses.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// What goes into the client hello.
    pub descriptor: ToolDescriptor,
    /// Defaults for the policy.
    pub hints: ToolHints,
    /// For a tool of an MCP server (`descriptor.server_name` names it): what the server
    /// claims about it, for the consent prompt only.
    pub claims: Option<ServerClaims>,
}

impl ToolSpec {
    /// A spec whose parameter and result schemas are generated from `P` and `O`.
    pub fn new<P: JsonSchema, O: JsonSchema>(
        name: &str,
        description: &str,
        hints: ToolHints,
        timeout_ms: u32,
    ) -> Self {
        Self {
            descriptor: ToolDescriptor {
                name: name.to_owned(),
                description: description.to_owned(),
                parameters: schema_map::<P>(),
                result_schema: Some(schema_map::<O>()),
                read_only: hints.read_only,
                destructive: hints.destructive,
                open_world: hints.open_world,
                server_name: None,
                timeout_ms: Some(timeout_ms),
            },
            hints,
            claims: None,
        }
    }
}

fn schema_map<T: JsonSchema>() -> Map {
    match schemars::schema_for!(T).to_value() {
        Value::Object(m) => m,
        // A boolean schema ("anything"): spell it as an empty object schema.
        _ => Map::new(),
    }
}

/// What the tools may use from the outside world: the home directory for `~` and the
/// launcher for open_path / open_url. Injectable so tests never touch the real ones.
#[derive(Clone)]
pub struct ToolEnv {
    /// The user's home directory.
    pub home: PathBuf,
    /// Opens paths and URLs with the desktop's default handler.
    pub launcher: Arc<dyn Launcher>,
}

impl fmt::Debug for ToolEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolEnv")
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

/// What a call touches, for the policy and for the consent prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// Resolved paths the call reads, lists or writes: canonical as far as they exist, read
    /// from the handles the job keeps ([`paths::Resolved`](crate::paths::Resolved)).
    pub paths: Vec<PathBuf>,
    /// The folder a grant for this call would cover.
    pub folder: Option<PathBuf>,
    /// One line saying what will happen.
    pub summary: String,
    /// A reason to ask even where a rule would allow.
    pub force_ask: Option<String>,
}

/// What a running job may consult: the cancellation flag and the policy in force (for
/// tools that walk directories and must skip protected entries).
#[derive(Debug, Clone)]
pub struct RunContext {
    /// Set when the call is cancelled or passes its deadline; jobs check it between chunks.
    pub cancel: CancellationToken,
    /// The policy in force when the call was allowed.
    pub policy: Arc<CompiledPolicy>,
    /// The tool's name, for policy lookups.
    pub tool: String,
    /// Where a job reports how far it got (a ToolUseProgress `running` with a detail).
    pub progress: ProgressSink,
}

/// Where a [`ProgressSink`] hands its messages.
type SendProgress = Arc<dyn Fn(ToolUseProgress) + Send + Sync>;

/// Sends a running job's progress to the assistant. The default sends nowhere.
#[derive(Clone, Default)]
pub struct ProgressSink {
    to: Option<(String, SendProgress)>,
}

impl fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProgressSink")
            .field("request", &self.to.as_ref().map(|(id, _)| id))
            .finish()
    }
}

impl ProgressSink {
    /// A sink for request `id` that hands each progress message to `send`.
    pub fn new(id: &str, send: impl Fn(ToolUseProgress) + Send + Sync + 'static) -> Self {
        Self {
            to: Some((id.to_owned(), Arc::new(send))),
        }
    }

    /// Reports `detail` (e.g. "3/10: copying") for the running call.
    pub fn report(&self, detail: String) {
        if let Some((id, send)) = &self.to {
            send(ToolUseProgress {
                id: id.clone(),
                state: ProgressState::Running,
                detail: Some(detail),
            });
        }
    }
}

impl RunContext {
    /// `Err(Cancelled)` once the call is cancelled.
    pub fn check(&self) -> Result<()> {
        if self.cancel.is_cancelled() {
            Err(ToolError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Whether `path` must be left out of a listing or search, and why.
    pub fn withheld(&self, path: &Path) -> bool {
        self.policy.hard_deny(&self.tool, path).is_some()
    }
}

/// The blocking work of one call.
pub type Job = Box<dyn FnOnce(&RunContext) -> Result<Map> + Send>;

/// A call ready for the policy: what it touches, and the job to run once allowed.
pub struct Prepared {
    /// What the call touches.
    pub access: Access,
    /// The work.
    pub job: Job,
}

impl fmt::Debug for Prepared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prepared")
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

/// A tool. `prepare` may stat and resolve paths but must not read or change anything, and
/// must not fail because of what exists at a path (or does not): the policy judges the call
/// first, so errors such as "not found" or "is a directory" are returned by the job. A path
/// is resolved once, in `prepare`, into a [`paths::Resolved`](crate::paths::Resolved) that the
/// job moves in and works through; the job never looks a path up again.
pub trait Tool: Send + Sync + 'static {
    /// The tool's description; called once, when the tool is registered.
    fn spec(&self) -> ToolSpec;
    /// Checks the (schema-valid) parameters and resolves what the call touches.
    fn prepare(&self, params: Map, env: &ToolEnv) -> Result<Prepared>;
}

/// Deserializes schema-valid parameters into the tool's type.
pub fn parse_params<P: DeserializeOwned>(params: Map) -> Result<P> {
    serde_json::from_value(Value::Object(params))
        .map_err(|e| ToolError::InvalidParameters(format!("parameters: {e}")))
}

/// Serializes a tool's output into a result map.
pub fn to_map<O: Serialize>(output: &O) -> Result<Map> {
    match serde_json::to_value(output) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ToolError::exec("the tool's output is not a map")),
        Err(e) => Err(ToolError::exec(format!(
            "cannot serialize the tool's output: {e}"
        ))),
    }
}
