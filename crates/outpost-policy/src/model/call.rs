//! One tool call as the policy sees it ([`AccessRequest`]), the answers a user may give
//! ([`Decision`]), who decided ([`Decider`]) and what came of it ([`Verdict`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Hints of a tool that shape its defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolHints {
    /// Changes nothing.
    pub read_only: bool,
    /// May change or delete data: off by default, asks every time, never "always allow".
    pub destructive: bool,
    /// Reaches outside the machine or into other applications.
    pub open_world: bool,
    /// Asks every time whatever the rules say (e.g. launching another application).
    pub asks_every_time: bool,
}

impl ToolHints {
    /// A tool that only reads: the hints of most built-in tools.
    pub const READ_ONLY: Self = Self {
        read_only: true,
        destructive: false,
        open_world: false,
        asks_every_time: false,
    };
}

/// What an MCP server says about one of its tools (the MCP annotations `readOnlyHint`,
/// `destructiveHint`, `idempotentHint`, `openWorldHint`). Claims shown to the user, never
/// used to allow or deny anything: `None` means the server did not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(optional_fields))]
pub struct ServerClaims {
    /// `readOnlyHint`: the tool changes nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// `destructiveHint`: the tool may delete or overwrite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// `idempotentHint`: calling it again with the same arguments changes nothing more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// `openWorldHint`: the tool reaches outside (the web, other systems).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

/// One tool call, as the policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct AccessRequest<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The MCP server that provides the tool (its name in `mcp.toml`); `None` for a
    /// built-in tool.
    pub server: Option<&'a str>,
    /// Its hints.
    pub hints: ToolHints,
    /// Canonical paths the call reads, lists or writes.
    pub paths: &'a [PathBuf],
    /// The folder "always allow" and "allow for this conversation" would cover.
    pub folder: Option<&'a Path>,
    /// A reason that forces a question even where a rule would allow (e.g. hard links).
    pub force_ask: Option<&'a str>,
}

/// A user's answer to a consent question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "ConsentDecision"))]
pub enum Decision {
    /// Run this call only.
    AllowOnce,
    /// Run this and later calls of this tool in this folder during this conversation.
    AllowForConversation,
    /// Run this tool in this folder from now on (written to the policy file).
    AlwaysAllow,
    /// Do not run this call.
    DenyOnce,
    /// Never run this tool in this folder (written to the policy file).
    AlwaysDeny,
}

impl Decision {
    /// The wire / file spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AllowOnce => "allow_once",
            Self::AllowForConversation => "allow_for_conversation",
            Self::AlwaysAllow => "always_allow",
            Self::DenyOnce => "deny_once",
            Self::AlwaysDeny => "always_deny",
        }
    }

    /// Whether the call may run.
    pub fn allows(self) -> bool {
        matches!(
            self,
            Self::AllowOnce | Self::AllowForConversation | Self::AlwaysAllow
        )
    }
}

impl std::str::FromStr for Decision {
    type Err = crate::PolicyError;

    /// Parses the wire / file spelling ([`Decision::as_str`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| crate::PolicyError::UnknownDecision(s.to_owned()))
    }
}

impl Decision {
    /// Every decision, in the order a prompt offers them.
    pub const ALL: [Decision; 5] = [
        Self::AllowOnce,
        Self::AllowForConversation,
        Self::AlwaysAllow,
        Self::DenyOnce,
        Self::AlwaysDeny,
    ];
}

/// Who (or what) decided whether a call runs. The audit log records exactly this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decider {
    /// A rule of the user's policy: a tool rule, a folder rule, a system path, a harmless
    /// tool's default, or a destructive tool left off.
    Policy,
    /// The built-in secrets deny list.
    SecretsList,
    /// The user, answering a consent prompt.
    User,
    /// The user's earlier "allow for this conversation" answer.
    ConversationGrant,
    /// Nobody answered the consent prompt before it expired.
    ConsentTimeout,
    /// The call needed consent and no consent prompt was attached (a headless client).
    NoConsentUi,
}

impl Decider {
    /// The stable spelling (audit log, UI contract).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Policy => "policy",
            Self::SecretsList => "secrets_list",
            Self::User => "user",
            Self::ConversationGrant => "conversation_grant",
            Self::ConsentTimeout => "consent_timeout",
            Self::NoConsentUi => "no_consent_ui",
        }
    }

    /// How the decider is named to people and in `permission_denied` messages.
    pub fn phrase(self) -> &'static str {
        match self {
            Self::Policy => "your policy",
            Self::SecretsList => "the built-in secrets list",
            Self::User => "the user",
            Self::ConversationGrant => "the user (allowed for this conversation)",
            Self::ConsentTimeout => "the consent timeout",
            Self::NoConsentUi => "Outpost",
        }
    }
}

/// Why a call was allowed without asking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Allowance {
    /// The tool is set to "allow".
    ToolRule,
    /// Every path is inside this allowed folder.
    Folder {
        /// The folder.
        path: PathBuf,
    },
    /// The user allowed it for this conversation.
    Conversation,
    /// A harmless tool with no paths (calculator, system_info).
    Default,
}

/// The outcome of evaluating one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Allow(Allowance),
    /// Ask the user, offering exactly these decisions.
    Ask {
        /// Why the question is asked, for the prompt.
        reason: String,
        /// The decisions the UI may offer.
        options: Vec<Decision>,
    },
    /// Do not run it.
    Deny {
        /// Who denied: the policy or the built-in secrets list.
        by: Decider,
        /// Why.
        reason: String,
    },
}

/// What a user allowed for one conversation.
#[derive(Debug, Clone, Default)]
pub struct ConversationGrants {
    grants: Vec<(String, Option<PathBuf>)>,
}

impl ConversationGrants {
    /// Records "allow for this conversation" for `tool` in `folder`.
    pub fn grant(&mut self, tool: &str, folder: Option<&Path>) {
        let g = (tool.to_owned(), folder.map(Path::to_path_buf));
        if !self.grants.contains(&g) {
            self.grants.push(g);
        }
    }

    pub(crate) fn covers(&self, tool: &str, paths: &[PathBuf]) -> bool {
        self.grants.iter().any(|(t, folder)| {
            t == tool
                && match folder {
                    None => paths.is_empty(),
                    Some(f) => !paths.is_empty() && paths.iter().all(|p| p.starts_with(f)),
                }
        })
    }
}
