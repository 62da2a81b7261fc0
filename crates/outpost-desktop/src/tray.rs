//! What the tray icon shows, without Tauri: a fold of the app's events (the same ones the
//! web UI gets) into the tray's words and switches. The shell (`src-tauri/src/tray.rs`)
//! puts a [`TrayView`] on the icon and its menu, and turns the menu's clicks into the
//! desktop's commands; this module decides nothing else.
//!
//! A consent question while the window is away (closed to the tray, or in the background)
//! is shown here with the seconds left before the backend denies it by itself (the shell
//! refreshes the view every second while one waits), so the tray never suggests the
//! question waits longer than it does.

use crate::contract::{AppEvent, AssistantState, ConnectionStatus, Millis, VoiceStatus};

/// The tray's words and switches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrayView {
    /// The first (disabled) menu line: the link and the assistant's state, or the open
    /// question.
    pub status: String,
    /// The icon's tooltip (and title where the desktop shows one).
    pub tooltip: String,
    /// A consent question waits: the tray asks for attention.
    pub attention: bool,
    /// Voice is on.
    pub voice_on: bool,
    /// The microphone is muted.
    pub muted: bool,
    /// Voice can be switched (a session is live).
    pub voice_available: bool,
}

/// An open consent question.
#[derive(Debug, Clone)]
struct Waiting {
    id: String,
    summary: String,
    /// When the backend denies it by itself.
    deadline: Millis,
}

/// The fold.
#[derive(Debug, Clone)]
pub struct TrayModel {
    connection: ConnectionStatus,
    assistant: Option<String>,
    state: AssistantState,
    voice: Option<VoiceStatus>,
    waiting: Vec<Waiting>,
}

impl Default for TrayModel {
    fn default() -> Self {
        Self {
            connection: ConnectionStatus::Disconnected,
            assistant: None,
            state: AssistantState::Idle,
            voice: None,
            waiting: Vec::new(),
        }
    }
}

impl TrayModel {
    /// Applies one event at `now`; true when the view changed.
    pub fn apply(&mut self, ev: &AppEvent, now: Millis) -> bool {
        let before = self.view(now);
        match ev {
            AppEvent::Connection(c) => {
                self.connection = c.state;
                if matches!(
                    c.state,
                    ConnectionStatus::Disconnected | ConnectionStatus::Failed
                ) {
                    self.waiting.clear();
                    self.state = AssistantState::Idle;
                }
            }
            AppEvent::Session(s) => self.assistant = Some(s.assistant_name.clone()),
            AppEvent::Status(s) => self.state = s.state,
            AppEvent::Voice(v) => self.voice = Some(v.clone()),
            AppEvent::ConsentRequest(c) => {
                if !self.waiting.iter().any(|w| w.id == c.consent_id) {
                    self.waiting.push(Waiting {
                        id: c.consent_id.clone(),
                        summary: c.summary.clone(),
                        deadline: now + i64::try_from(c.expires_in_ms).unwrap_or(i64::MAX / 2),
                    });
                }
            }
            AppEvent::ConsentWithdrawn(w) => self.waiting.retain(|x| x.id != w.consent_id),
            _ => return false,
        }
        before != self.view(now)
    }

    /// Whether a question waits (the view then changes every second).
    pub fn counting_down(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// What to show at `now`.
    pub fn view(&self, now: Millis) -> TrayView {
        let who = self.assistant.as_deref().unwrap_or("the assistant");
        let link = match self.connection {
            ConnectionStatus::Disconnected => "Not connected".to_owned(),
            ConnectionStatus::Connecting => "Connecting…".to_owned(),
            ConnectionStatus::Reconnecting => "Reconnecting…".to_owned(),
            ConnectionStatus::Failed => "Could not connect".to_owned(),
            ConnectionStatus::Connected => {
                format!("Connected to {who} — {}", state_words(self.state))
            }
        };
        let voice = self.voice.as_ref();
        let voice_on = voice.is_some_and(|v| v.on);
        let muted = voice.is_some_and(|v| v.muted);
        let mic = match voice {
            Some(v) if v.on && v.muted => "; microphone muted",
            Some(v) if v.on && v.transmitting => "; microphone live",
            Some(v) if v.on => "; voice on",
            _ => "",
        };
        let (status, attention) = match self.waiting.first() {
            Some(w) => {
                let more = match self.waiting.len() {
                    1 => String::new(),
                    n => format!(" (+{} more)", n - 1),
                };
                let left = (w.deadline - now).max(0).div_euclid(1000);
                (
                    format!(
                        "Permission needed: {}{more} — denied in {left} s unless you answer",
                        w.summary
                    ),
                    true,
                )
            }
            None => (format!("{link}{mic}"), false),
        };
        TrayView {
            tooltip: format!("Outpost — {status}"),
            status,
            attention,
            voice_on,
            muted,
            voice_available: self.connection == ConnectionStatus::Connected,
        }
    }
}

fn state_words(s: AssistantState) -> &'static str {
    match s {
        AssistantState::Idle => "idle",
        AssistantState::Listening => "listening",
        AssistantState::Thinking => "thinking",
        AssistantState::Speaking => "speaking",
        AssistantState::UsingTool => "using a tool",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::contract::{
        ConnectionEvent, ConsentRequest, ConsentWithdrawn, DeviceStatus, SessionInfo, StatusEvent,
        VoiceMode, WithdrawnReason,
    };

    fn connected() -> AppEvent {
        AppEvent::Connection(ConnectionEvent {
            state: ConnectionStatus::Connected,
            detail: None,
            attempt: None,
            path: None,
            relayed: None,
        })
    }

    fn ask(id: &str, expires_in_ms: u64) -> AppEvent {
        AppEvent::ConsentRequest(ConsentRequest {
            consent_id: id.into(),
            request_id: "r".into(),
            conversation_id: "c".into(),
            tool: "read_local_file".into(),
            server_name: None,
            execution: None,
            description: None,
            claims: None,
            parameters: serde_json::Map::new(),
            summary: "Read /etc/hostname".into(),
            paths: Vec::new(),
            folder: None,
            reason: "outside".into(),
            options: Vec::new(),
            expires_in_ms,
            read_only: None,
            destructive: None,
            open_world: None,
        })
    }

    #[test]
    fn the_tray_follows_the_link_the_assistant_voice_and_open_questions() {
        let mut m = TrayModel::default();
        assert_eq!(m.view(5_000).status, "Not connected");
        assert!(!m.view(5_000).voice_available);
        assert!(m.apply(&connected(), 0));
        m.apply(
            &AppEvent::Session(SessionInfo {
                conversation_id: "c".into(),
                session_id: "s".into(),
                assistant_name: "Demo".into(),
                mode: crate::contract::AssistantMode::Outpost,
                attachments: false,
            }),
            0,
        );
        m.apply(
            &AppEvent::Status(StatusEvent {
                state: AssistantState::Thinking,
                tool_use_id: None,
                detail: None,
            }),
            0,
        );
        assert_eq!(m.view(5_000).status, "Connected to Demo — thinking");
        let off = DeviceStatus {
            state: crate::contract::DeviceState::Off,
            device: None,
            error: None,
        };
        m.apply(
            &AppEvent::Voice(VoiceStatus {
                on: true,
                mode: VoiceMode::PushToTalk,
                muted: true,
                talking: false,
                transmitting: false,
                input: off.clone(),
                output: off,
                echo_cancellation: true,
                echo_cancelling: false,
            }),
            0,
        );
        let v = m.view(5_000);
        assert!(v.voice_on && v.muted && v.voice_available);
        assert!(v.status.ends_with("; microphone muted"), "{}", v.status);

        // A question: the tray says what and until when, honestly (the backend's deadline).
        assert!(m.apply(&ask("k1", 60_000), 1_000));
        let v = m.view(5_000);
        assert!(v.attention);
        assert_eq!(
            v.status,
            "Permission needed: Read /etc/hostname — denied in 56 s unless you answer"
        );
        assert!(m.counting_down());
        assert!(m.view(60_500).status.contains("denied in 0 s"));
        assert!(
            m.view(90_000).status.contains("denied in 0 s"),
            "never negative"
        );
        assert!(v.tooltip.starts_with("Outpost — Permission needed"));
        m.apply(&ask("k2", 60_000), 2_000);
        assert!(m.view(5_000).status.contains("(+1 more)"));
        m.apply(
            &AppEvent::ConsentWithdrawn(ConsentWithdrawn {
                consent_id: "k1".into(),
                reason: WithdrawnReason::Answered,
            }),
            3_000,
        );
        m.apply(
            &AppEvent::ConsentWithdrawn(ConsentWithdrawn {
                consent_id: "k2".into(),
                reason: WithdrawnReason::TimedOut,
            }),
            3_000,
        );
        assert!(!m.view(5_000).attention);
        // Events that change nothing shown say so.
        assert!(!m.apply(
            &AppEvent::Status(StatusEvent {
                state: AssistantState::Thinking,
                tool_use_id: None,
                detail: None,
            }),
            4_000
        ));
    }
}
