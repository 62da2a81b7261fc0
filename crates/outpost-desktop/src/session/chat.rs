//! [`Desktop`]'s chat commands (`chat_*`): messages, the files that go with them
//! (checked and staged by [`crate::attachments`]), links.

use std::path::{Path, PathBuf};

use outpost_store::{ConversationId, now_ms};

use crate::attachments;
use crate::contract::{AppEvent, AttachmentView, ErrorEvent, StagedAttachments, UserMessage};
use crate::error::{DesktopError, Result};

use crate::desktop::Desktop;
use outpost_sync::lock;

impl Desktop {
    /// `chat_send`: the text, with the staged files first. Text may be empty when files go.
    pub async fn send(&self, text: String) -> Result<UserMessage> {
        let session = self.session().await?;
        let files = self.inner.staged.take();
        if text.trim().is_empty() && files.is_empty() {
            return Err(DesktopError::invalid("text", "the message is empty"));
        }
        if !files.is_empty() {
            if let Err(e) = self.check_attachable() {
                self.inner.staged.restore(files);
                return Err(e);
            }
        }
        let (first, shown) = {
            let mut live = lock(&self.inner.live);
            let asked = live.state.has_user_message();
            let first = live
                .state
                .conversation_id()
                .filter(|_| !asked)
                .map(str::to_owned);
            let shown: Vec<AttachmentView> = files
                .iter()
                .map(|f| AttachmentView {
                    image: attachments::kept_image_url(&f.mime_type, &f.bytes),
                    ..f.view()
                })
                .collect();
            live.state.show_images(
                shown
                    .iter()
                    .filter_map(|v| Some((v.sha256.clone(), v.image.clone()?))),
            );
            (first, shown)
        };
        let outgoing = files
            .iter()
            .map(|f| (f.name.clone(), f.mime_type.clone(), f.bytes.clone()))
            .collect();
        let id = match session.send_message_with(text.clone(), outgoing) {
            Ok(id) => id,
            Err(e) => {
                self.inner.staged.restore(files);
                return Err(e.into());
            }
        };
        if !shown.is_empty() {
            self.emit_staged(Vec::new());
        }
        if let Some(conversation) = first {
            // The first thing said names the conversation in the history.
            let said = if text.trim().is_empty() {
                shown
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            } else {
                text.clone()
            };
            let title: String = said.split_whitespace().collect::<Vec<_>>().join(" ");
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
            attachments: shown,
        })
    }

    /// Refuses files when no assistant takes them (not connected, or an Outpost-protocol
    /// assistant that did not announce `attachments`).
    fn check_attachable(&self) -> Result<()> {
        let live = lock(&self.inner.live);
        match live.state.attachments_taken() {
            Some((true, _)) => Ok(()),
            Some((false, name)) => Err(DesktopError::Refused(format!(
                "{name} does not take files or images (it did not announce them)."
            ))),
            None => Err(DesktopError::Refused(
                "Connect to an assistant before giving it a file.".into(),
            )),
        }
    }

    fn emit_staged(&self, items: Vec<AttachmentView>) {
        lock(&self.inner.live).emit(AppEvent::Attachments(StagedAttachments { items }));
    }

    /// `chat_attach_pick` (after the shell's file dialog) and a file dropped on the window:
    /// checks and stages the file at `path`. Returns what goes with the next message.
    pub fn attach_path(&self, path: &Path) -> Result<Vec<AttachmentView>> {
        self.check_attachable()?;
        let perms = self.inner.core.permissions();
        let file = attachments::read_path(path, |p| perms.attachment_refused(p))?;
        let views = self.inner.staged.push(file)?;
        self.emit_staged(views.clone());
        Ok(views)
    }

    /// Files dropped on the window: each is staged or refused; a refusal is told to the
    /// user as an error notice (there is no command to answer).
    pub fn attach_dropped(&self, paths: &[PathBuf]) {
        for p in paths {
            if let Err(e) = self.attach_path(p) {
                tracing::info!(path = %p.display(), error = %e, "a dropped file was refused");
                lock(&self.inner.live).emit(AppEvent::Error(ErrorEvent {
                    code: e.code().into(),
                    message: e.to_string(),
                    fatal: None,
                }));
            }
        }
    }

    /// `chat_attach_data`: a pasted file (no path: its name is checked against the
    /// secrets list's name rules).
    pub fn attach_data(
        &self,
        name: &str,
        mime_type: Option<&str>,
        data: &str,
    ) -> Result<Vec<AttachmentView>> {
        self.check_attachable()?;
        let perms = self.inner.core.permissions();
        let file =
            attachments::from_paste(name, mime_type, data, |n| perms.attachment_name_refused(n))?;
        let views = self.inner.staged.push(file)?;
        self.emit_staged(views.clone());
        Ok(views)
    }

    /// `chat_attach_remove`: the file no longer goes with the next message.
    pub fn attach_remove(&self, id: &str) -> Vec<AttachmentView> {
        let views = self.inner.staged.remove(id);
        self.emit_staged(views.clone());
        views
    }

    /// What goes with the next message.
    pub fn attachments_staged(&self) -> Vec<AttachmentView> {
        self.inner.staged.views()
    }
}

/// `chat_open_link`'s check: only `http:`, `https:` and `mailto:` links leave the app,
/// and no mail link that attaches a file ([`outpost_policy::check_link`]).
pub fn check_link(url: &str) -> Result<()> {
    outpost_policy::check_link(url)
        .map_err(|why| DesktopError::invalid("url", format!("{why}, not \"{url}\"")))
}
