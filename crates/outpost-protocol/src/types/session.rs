//! The session handshake: ClientHello (with the tool catalogue) and ServerWelcome.

use serde::{Deserialize, Serialize};

use crate::error::FieldError;
use crate::limits::{
    MAX_CAPABILITIES, MAX_HISTORY_MESSAGES, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION,
};
use crate::validate::{self, Validate};
use crate::{Map, Version};
use outpost_enum::closed_enum;

/// One tool the client offers, so the assistant can describe it to its model and knows which
/// `either` tools the client will run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDescriptor {
    /// The name used in `ToolUseRequest.toolName`.
    pub name: String,
    /// What the tool does, written for a language model.
    pub description: String,
    /// JSON Schema (draft 2020-12) of the `parameters` map.
    pub parameters: Map,
    /// JSON Schema of the `result` map, when the tool documents one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_schema: Option<Map>,
    /// The tool only reads; it changes nothing on the user's machine.
    #[serde(default)]
    pub read_only: bool,
    /// The tool may change or delete the user's data.
    #[serde(default)]
    pub destructive: bool,
    /// The tool reaches outside the machine (network, other apps).
    #[serde(default)]
    pub open_world: bool,
    /// The MCP server providing the tool; absent for Outpost's built-in tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// The timeout the client suggests for this tool, in milliseconds.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "validate::de_timeout"
    )]
    pub timeout_ms: Option<u32>,
}

impl ToolDescriptor {
    fn check_at(&self, at: &str, values_scanned: bool) -> Result<(), FieldError> {
        let f = |name: &str| format!("{at}.{name}");
        validate::name(&f("name"), &self.name)?;
        // Levels: message 1, `tools` 2, descriptor 3, schema 4.
        if !values_scanned {
            validate::map_value(&f("parameters"), &self.parameters, 4)?;
            if let Some(schema) = &self.result_schema {
                validate::map_value(&f("resultSchema"), schema, 4)?;
            }
        }
        if let Some(server) = &self.server_name {
            validate::name(&f("serverName"), server)?;
        }
        Ok(())
    }
}

/// Type 2: the client's first message. Nothing else may be sent before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientHello {
    /// The highest protocol version the client speaks.
    pub protocol_version: u32,
    /// The lowest protocol version the client speaks; defaults to `protocolVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_protocol_version: Option<u32>,
    /// Product name, e.g. "Outpost".
    pub client_name: String,
    /// Product version, e.g. "0.1.0".
    pub client_version: String,
    /// The tools this client can run, in preference order.
    #[serde(default)]
    pub tools: Vec<ToolDescriptor>,
    /// A conversation to continue (from an earlier welcome); absent for a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// With `conversationId`: what was said in it so far, oldest first, for a server that no
    /// longer holds the conversation (it restarted, or another server had it). Sent once,
    /// when the user picks a stored conversation to continue; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryMessage>,
}

closed_enum! {
    #[ts_if_feature]
    /// Who said a message of a conversation's earlier part.
    pub enum HistoryRole {
        /// The user.
        User => "user",
        /// The assistant.
        Assistant => "assistant",
    }
}

/// One message of a conversation's earlier part ([`ClientHello::history`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryMessage {
    /// Who said it.
    pub role: HistoryRole,
    /// What was said (the assistant's words as Markdown).
    pub text: String,
}

impl ClientHello {
    /// A hello for this crate's protocol versions.
    pub fn new(
        client_name: impl Into<String>,
        client_version: impl Into<String>,
        tools: Vec<ToolDescriptor>,
    ) -> Self {
        Self {
            protocol_version: PROTOCOL_VERSION,
            min_protocol_version: Some(MIN_PROTOCOL_VERSION),
            client_name: client_name.into(),
            client_version: client_version.into(),
            tools,
            conversation_id: None,
            history: Vec::new(),
        }
    }

    /// The version range the client offered.
    pub fn versions(&self) -> std::ops::RangeInclusive<Version> {
        self.min_protocol_version.unwrap_or(self.protocol_version)..=self.protocol_version
    }
}

impl Validate for ClientHello {
    fn check(&self, values_scanned: bool) -> Result<(), FieldError> {
        let min = self.min_protocol_version.unwrap_or(self.protocol_version);
        if self.protocol_version == 0 {
            return Err(FieldError::new("protocolVersion", "must be at least 1"));
        }
        if min == 0 || min > self.protocol_version {
            return Err(FieldError::new(
                "minProtocolVersion",
                format!(
                    "must be between 1 and protocolVersion ({}), got {min}",
                    self.protocol_version
                ),
            ));
        }
        validate::name("clientName", &self.client_name)?;
        validate::name("clientVersion", &self.client_version)?;
        check_tools(&self.tools, values_scanned)?;
        if let Some(c) = &self.conversation_id {
            validate::id("conversationId", c)?;
        }
        if !self.history.is_empty() && self.conversation_id.is_none() {
            return Err(FieldError::new(
                "history",
                "is only allowed with a conversationId",
            ));
        }
        if self.history.len() > MAX_HISTORY_MESSAGES {
            return Err(FieldError::new(
                "history",
                format!(
                    "holds {} messages; at most {MAX_HISTORY_MESSAGES} are allowed",
                    self.history.len()
                ),
            ));
        }
        Ok(())
    }
}

/// Every descriptor valid, names unique.
fn check_tools(tools: &[ToolDescriptor], values_scanned: bool) -> Result<(), FieldError> {
    let mut seen = std::collections::HashSet::new();
    for (i, tool) in tools.iter().enumerate() {
        tool.check_at(&format!("tools[{i}]"), values_scanned)?;
        if !seen.insert(tool.name.as_str()) {
            return Err(FieldError::new(
                format!("tools[{i}].name"),
                format!("repeats the tool name '{}'", tool.name),
            ));
        }
    }
    Ok(())
}

/// Type 12 (protocol version 2): the client's whole tool catalogue, sent when it changed
/// since the hello (or the last ToolsChanged) because a tool source (an MCP server) came,
/// went or changed its list. Replaces the hello's `tools`. Sent only in a session whose
/// negotiated version is at least 2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsChanged {
    /// The tools the client can run now, as in [`ClientHello::tools`].
    pub tools: Vec<ToolDescriptor>,
}

impl Validate for ToolsChanged {
    fn check(&self, values_scanned: bool) -> Result<(), FieldError> {
        check_tools(&self.tools, values_scanned)
    }
}

/// Type 3: the server's answer to hello, fixing the version for the rest of the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerWelcome {
    /// The negotiated version: the highest both sides speak.
    pub protocol_version: u32,
    /// Identifies this session (one hello/welcome exchange).
    pub session_id: String,
    /// The conversation the session belongs to: the one hello asked for, or a new one.
    pub conversation_id: String,
    /// What the UI calls the assistant.
    pub assistant_name: String,
    /// Optional message types the server reads, by name (e.g. `attachments`: type 13); a
    /// client sends such a message only to a server that lists it. Unknown names are
    /// ignored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
}

impl ServerWelcome {
    /// Whether the server announced `capability`.
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }
}

impl Validate for ServerWelcome {
    fn check(&self, _values_scanned: bool) -> Result<(), FieldError> {
        if self.protocol_version == 0 {
            return Err(FieldError::new("protocolVersion", "must be at least 1"));
        }
        validate::id("sessionId", &self.session_id)?;
        validate::id("conversationId", &self.conversation_id)?;
        validate::name("assistantName", &self.assistant_name)?;
        if self.capabilities.len() > MAX_CAPABILITIES {
            return Err(FieldError::new(
                "capabilities",
                format!(
                    "lists {}; at most {MAX_CAPABILITIES} are allowed",
                    self.capabilities.len()
                ),
            ));
        }
        for (i, c) in self.capabilities.iter().enumerate() {
            validate::name(&format!("capabilities[{i}]"), c)?;
        }
        Ok(())
    }
}

/// Picks the version for a session: the highest in both ranges, or `None` if they don't meet.
pub fn negotiate(
    client: std::ops::RangeInclusive<Version>,
    server: std::ops::RangeInclusive<Version>,
) -> Option<Version> {
    let hi = (*client.end()).min(*server.end());
    let lo = (*client.start()).max(*server.start());
    (lo <= hi).then_some(hi)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_picks_highest_common_version() {
        assert_eq!(negotiate(1..=3, 2..=5), Some(3));
        assert_eq!(negotiate(1..=1, 1..=1), Some(1));
        assert_eq!(negotiate(4..=6, 1..=3), None);
    }
}
