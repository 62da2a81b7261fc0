//! Consent in the app: the questions open now as the UI sees them (built from the core's
//! prompts, kept for a reloaded page's snapshot), and [`crate::Desktop`]'s `consent_*`
//! commands in `commands`. The core's broker decides and closes questions; this copy only
//! follows its events.

mod commands;

use outpost_core::ConsentPrompt;

use crate::contract::{AppEvent, ConsentRequest, ConsentWithdrawn, ExecutionMode, WithdrawnReason};

/// What the live view knows of the call a question is about: the conversation on screen,
/// how the call runs, and the tool's hints (read-only, destructive, open-world).
pub(crate) struct Known {
    pub(crate) conversation_id: String,
    pub(crate) execution: Option<ExecutionMode>,
    pub(crate) hints: (Option<bool>, Option<bool>, Option<bool>),
}

/// The UI's question for the core's `prompt`.
pub(crate) fn request(p: ConsentPrompt, known: Known) -> ConsentRequest {
    let (read_only, destructive, open_world) = known.hints;
    ConsentRequest {
        consent_id: p.consent_id,
        request_id: p.request_id,
        conversation_id: known.conversation_id,
        tool: p.tool,
        server_name: p.server,
        description: (!p.description.is_empty()).then_some(p.description),
        claims: p.claims,
        execution: known.execution,
        parameters: p.parameters,
        summary: p.summary,
        paths: p.paths,
        folder: p.folder,
        reason: p.reason,
        options: p.options,
        expires_in_ms: p.expires_in_ms,
        read_only,
        destructive: Some(p.destructive || destructive.unwrap_or(false)),
        open_world,
    }
}

/// The questions open now, in the order they were asked.
#[derive(Debug, Clone, Default)]
pub(crate) struct OpenQuestions {
    asked: Vec<ConsentRequest>,
}

impl OpenQuestions {
    /// Opens `req`; the event that shows it, unless it is open already.
    pub(crate) fn ask(&mut self, req: ConsentRequest) -> Option<AppEvent> {
        if self.asked.iter().any(|c| c.consent_id == req.consent_id) {
            return None;
        }
        self.asked.push(req.clone());
        Some(AppEvent::ConsentRequest(req))
    }

    /// Closes the question `consent_id`; the event that takes it off the screen.
    pub(crate) fn withdraw(&mut self, consent_id: String, reason: WithdrawnReason) -> AppEvent {
        self.asked.retain(|c| c.consent_id != consent_id);
        AppEvent::ConsentWithdrawn(ConsentWithdrawn { consent_id, reason })
    }

    /// The session is over: no question of it is open any more.
    pub(crate) fn clear(&mut self) {
        self.asked.clear();
    }

    /// The open questions, oldest first.
    pub(crate) fn list(&self) -> Vec<ConsentRequest> {
        self.asked.clone()
    }
}
