//! The one place that knows `outpost-tools` and `outpost-policy`: builds the dispatcher
//! with the built-in tools, the policy and the consent broker, and maps their events to
//! the machine's [`ExecEvent`]s and the UI's consent events. If those crates change,
//! only this module follows.

use std::path::PathBuf;
use std::sync::Arc;

use outpost_policy::{
    ConsentBroker, ConsentEvent, ConsentInbox, Decision, Policy, PolicyContext, PolicyStore,
};
use outpost_protocol::{ToolDescriptor, ToolUseCancel, ToolUseRequest};
use outpost_tools::{
    AuditEvent, AuditOutcome, DesktopLauncher, DispatchEvent, DispatchReceivers, Dispatcher,
    ToolEnv,
};
use tokio::sync::mpsc;

use crate::error::{CoreError, Result};
use crate::events::{ConsentPrompt, UiEvent};
use crate::machine::ExecEvent;

/// Where the permission policy comes from.
#[derive(Debug, Clone)]
pub enum PolicySource {
    /// A policy file (created with commented defaults when missing). An invalid file is
    /// an error here, so a headless client never runs with rules it did not read.
    File(PathBuf),
    /// A policy held in memory ("always" answers are not written anywhere).
    InMemory(Policy),
}

/// How the executor is set up.
#[derive(Debug, Clone)]
pub struct ToolsConfig {
    /// The policy.
    pub policy: PolicySource,
    /// The user's home directory (for `~` and the secrets list).
    pub home: PathBuf,
    /// Outpost's own folders (data directory, config): never readable by tools.
    pub protected: Vec<PathBuf>,
}

impl ToolsConfig {
    /// The built-in default policy, `$HOME` as home.
    pub fn defaults() -> Self {
        Self {
            policy: PolicySource::InMemory(Policy::default()),
            home: std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from),
            protected: Vec::new(),
        }
    }
}

/// The policy and consent broker shared by every session of a [`crate::Core`].
#[derive(Debug, Clone)]
pub struct Permissions {
    policy: PolicyStore,
    broker: ConsentBroker,
    home: PathBuf,
}

impl Permissions {
    /// Opens the policy as configured.
    pub fn new(config: &ToolsConfig) -> Result<Self> {
        let ctx = PolicyContext::new(config.home.clone(), config.protected.clone());
        let policy = match &config.policy {
            PolicySource::File(path) => {
                let store =
                    PolicyStore::open(path.clone(), ctx).map_err(|e| CoreError::Policy {
                        path: path.clone(),
                        message: e.to_string(),
                    })?;
                let error = store.status().borrow().error.clone();
                if let Some(message) = error {
                    return Err(CoreError::Policy {
                        path: path.clone(),
                        message,
                    });
                }
                store
            }
            PolicySource::InMemory(p) => PolicyStore::in_memory(p.clone(), ctx),
        };
        Ok(Self {
            policy,
            broker: ConsentBroker::new(),
            home: config.home.clone(),
        })
    }

    /// Attaches a consent UI: questions arrive on the inbox (see [`consent_event`]).
    /// Without one, every question is denied at once.
    pub fn attach_consent(&self) -> ConsentInbox {
        self.broker.attach()
    }

    /// Answers a consent question with `allow_once`, `allow_for_conversation`,
    /// `always_allow`, `deny_once` or `always_deny`.
    pub fn answer_consent(&self, consent_id: &str, decision: &str) -> Result<()> {
        let d = parse_decision(decision).ok_or_else(|| CoreError::InvalidArgument {
            name: "decision",
            reason: format!(
                "'{decision}' is not one of allow_once, allow_for_conversation, always_allow, \
                 deny_once, always_deny"
            ),
        })?;
        self.broker
            .answer(consent_id, d)
            .map_err(|e| CoreError::Consent(e.to_string()))
    }

    /// The policy in force (read it, or edit it for a settings pane).
    pub fn policy(&self) -> &PolicyStore {
        &self.policy
    }

    /// The policy file, if the policy has one.
    pub fn policy_path(&self) -> Option<PathBuf> {
        self.policy.path().map(PathBuf::from)
    }
}

fn parse_decision(s: &str) -> Option<Decision> {
    Some(match s {
        "allow_once" => Decision::AllowOnce,
        "allow_for_conversation" => Decision::AllowForConversation,
        "always_allow" => Decision::AlwaysAllow,
        "deny_once" => Decision::DenyOnce,
        "always_deny" => Decision::AlwaysDeny,
        _ => return None,
    })
}

/// One session's tool executor.
#[derive(Debug, Clone)]
pub struct Executor {
    dispatcher: Dispatcher,
}

impl Executor {
    /// A dispatcher over the built-in tools except `disabled` (those are neither offered
    /// nor run: a request for one is an unknown tool). Must run inside a tokio runtime.
    pub fn new(
        perms: &Permissions,
        disabled: &[String],
    ) -> Result<(Self, mpsc::UnboundedReceiver<DispatchEvent>)> {
        let mut registry =
            outpost_tools::builtin_registry().map_err(|e| CoreError::Tools(e.to_string()))?;
        for name in disabled {
            registry.remove(name);
        }
        let env = ToolEnv {
            home: perms.home.clone(),
            launcher: Arc::new(DesktopLauncher),
        };
        let (dispatcher, receivers) =
            Dispatcher::new(registry, env, perms.policy.clone(), perms.broker.clone());
        Ok((Self { dispatcher }, merge_in_order(receivers)))
    }

    /// The catalogue for the hello.
    pub fn catalogue(&self) -> Vec<ToolDescriptor> {
        self.dispatcher.catalogue()
    }

    /// Starts (or deduplicates) a request.
    pub fn run(&self, conversation_id: &str, request: ToolUseRequest) {
        self.dispatcher.handle_request(conversation_id, request);
    }

    /// Stops a call.
    pub fn cancel(&self, cancel: &ToolUseCancel) -> bool {
        self.dispatcher.handle_cancel(cancel)
    }

    /// Calls still being decided or run.
    pub fn in_flight(&self) -> usize {
        self.dispatcher.in_flight()
    }
}

/// Merges the dispatcher's two channels into one stream in the order the events happened.
///
/// The dispatcher sends an audit event before the result or progress that follows it, from
/// the same task, and unbounded sends are visible at once; so draining every audit event
/// already queued before passing on a message keeps "decided/started" ahead of its result,
/// which the state machine relies on.
fn merge_in_order(receivers: DispatchReceivers) -> mpsc::UnboundedReceiver<DispatchEvent> {
    let DispatchReceivers {
        mut messages,
        mut audit,
    } = receivers;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut audit_open = true;
        loop {
            tokio::select! {
                biased;
                a = audit.recv(), if audit_open => match a {
                    Some(a) => {
                        if tx.send(DispatchEvent::Audit(a)).is_err() {
                            return;
                        }
                    }
                    None => audit_open = false,
                },
                m = messages.recv() => {
                    let Some(m) = m else {
                        // The dispatcher is gone: pass on its last audit events, then end.
                        while let Some(a) = audit.recv().await {
                            if tx.send(DispatchEvent::Audit(a)).is_err() {
                                return;
                            }
                        }
                        return;
                    };
                    while let Ok(a) = audit.try_recv() {
                        if tx.send(DispatchEvent::Audit(a)).is_err() {
                            return;
                        }
                    }
                    if tx.send(m).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// What the machine needs from a dispatcher event (audit details it does not use are
/// dropped here).
pub fn exec_event(ev: DispatchEvent) -> Option<ExecEvent> {
    Some(match ev {
        DispatchEvent::Result(r) => ExecEvent::Result(r),
        DispatchEvent::Progress(p) => ExecEvent::Progress(p),
        DispatchEvent::Audit(AuditEvent::Decided {
            request_id,
            outcome,
            by,
            reason,
            decision,
            ..
        }) => ExecEvent::Decided {
            request_id,
            allowed: outcome == AuditOutcome::Allowed,
            by,
            reason,
            decision: decision.map(|d| d.as_str().to_owned()),
        },
        DispatchEvent::Audit(AuditEvent::Started { request_id, .. }) => {
            ExecEvent::Started { request_id }
        }
        DispatchEvent::Audit(_) => return None,
    })
}

/// The UI event for a consent broker event.
pub fn consent_event(ev: ConsentEvent) -> UiEvent {
    match ev {
        ConsentEvent::Asked(q) => UiEvent::ConsentRequested(ConsentPrompt {
            consent_id: q.consent_id,
            request_id: q.request_id,
            tool: q.tool,
            parameters: q.parameters,
            summary: q.summary,
            paths: q.paths.iter().map(|p| p.display().to_string()).collect(),
            folder: q.folder.map(|p| p.display().to_string()),
            reason: q.reason,
            destructive: q.destructive,
            options: q.options.iter().map(|d| d.as_str().to_owned()).collect(),
            expires_in_ms: q.expires_in_ms,
        }),
        ConsentEvent::Withdrawn { consent_id, reason } => UiEvent::ConsentWithdrawn {
            consent_id,
            reason: match reason {
                outpost_policy::WithdrawReason::Cancelled => "cancelled".into(),
                outpost_policy::WithdrawReason::TimedOut => "timed_out".into(),
            },
        },
    }
}
