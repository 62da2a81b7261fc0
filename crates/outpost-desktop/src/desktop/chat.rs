//! [`Desktop`]'s chat commands (`chat_*`).

use outpost_store::{ConversationId, now_ms};

use crate::contract::UserMessage;
use crate::error::{DesktopError, Result};

use super::{Desktop, lock};

impl Desktop {
    /// `chat_send`.
    pub async fn send(&self, text: String) -> Result<UserMessage> {
        if text.trim().is_empty() {
            return Err(DesktopError::invalid("text", "the message is empty"));
        }
        let session = self.session().await?;
        let first = {
            let live = lock(&self.inner.live);
            let asked = live.state.has_user_message();
            live.state
                .conversation_id()
                .filter(|_| !asked)
                .map(str::to_owned)
        };
        let id = session.send_message(text.clone())?;
        if let Some(conversation) = first {
            // The first thing said names the conversation in the history.
            let title: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let title = match title.char_indices().nth(80) {
                Some((cut, _)) => format!("{}…", &title[..cut]),
                None => title,
            };
            drop(
                self.inner
                    .core
                    .store()
                    .set_conversation_title(ConversationId(conversation), Some(title)),
            );
        }
        Ok(UserMessage {
            id,
            text,
            at: now_ms(),
        })
    }
}

/// `chat_open_link`'s check: only `http:`, `https:` and `mailto:` links leave the app,
/// and no mail link that attaches a file ([`outpost_policy::check_link`]).
pub fn check_link(url: &str) -> Result<()> {
    outpost_policy::check_link(url)
        .map_err(|why| DesktopError::invalid("url", format!("{why}, not \"{url}\"")))
}
