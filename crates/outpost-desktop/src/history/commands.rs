//! [`Desktop`]'s history commands (`history_*`).

use outpost_protocol::{HistoryMessage, HistoryRole, MAX_HISTORY_MESSAGES};
use outpost_store::{ConversationId, ExportFormat, ExportScope, SearchQuery, SearchSyntax, now_ms};

use crate::contract::{
    ConversationDetail, ConversationSummary, ExportResult, SearchHit, SearchHitKind,
    TranscriptEntry,
};
use crate::error::{DesktopError, Result};

use crate::desktop::Desktop;
use outpost_sync::lock;

impl Desktop {
    /// Waits until every write queued so far is committed (for tests and before exit).
    pub async fn store_flush(&self) {
        if let Err(e) = self.inner.core.store().flush().await {
            tracing::warn!(error = %e, "history flush failed");
        }
    }

    /// The newest `want` conversations (all of them with `usize::MAX`), following the
    /// store's pages (it returns at most `MAX_PAGE` at a time).
    async fn conversations(&self, want: usize) -> Result<Vec<outpost_store::ConversationSummary>> {
        let store = self.inner.core.store();
        let mut out = Vec::new();
        let mut before = None;
        while out.len() < want {
            let page = store
                .list_conversations(outpost_store::query::MAX_PAGE, before)
                .await?;
            out.extend(page.items);
            match page.next {
                Some(next) => before = Some(next),
                None => break,
            }
        }
        out.truncate(want);
        Ok(out)
    }

    /// `history_list`.
    pub async fn history_list(&self, limit: u32, offset: u32) -> Result<Vec<ConversationSummary>> {
        let limit = limit.clamp(1, 500) as usize;
        let all = self.conversations(offset as usize + limit).await?;
        Ok(all
            .iter()
            .skip(offset as usize)
            .map(crate::history::summary)
            .collect())
    }

    /// `history_search`.
    pub async fn history_search(
        &self,
        query: String,
        limit: u32,
        highlight_start: String,
        highlight_end: String,
    ) -> Result<Vec<SearchHit>> {
        if query.trim().is_empty() {
            return Ok(Vec::new());
        }
        let mut q = SearchQuery::new(query);
        q.syntax = SearchSyntax::Plain;
        q.limit = limit.clamp(1, 200);
        q.highlight_start = highlight_start;
        q.highlight_end = highlight_end;
        let store = self.inner.core.store();
        let hits = store.search(q).await?;
        let mut out = Vec::with_capacity(hits.len());
        let mut titles = std::collections::HashMap::new();
        for h in hits {
            let cid = h.conversation_id.as_str().to_owned();
            if !titles.contains_key(&cid) {
                let title = store
                    .conversation(h.conversation_id.clone())
                    .await?
                    .map(|c| crate::history::title(&c))
                    .unwrap_or_default();
                titles.insert(cid.clone(), title);
            }
            out.push(SearchHit {
                kind: match h.kind {
                    outpost_store::HitKind::Message => SearchHitKind::Message,
                    outpost_store::HitKind::ToolCall => SearchHitKind::ToolCall,
                },
                conversation_title: titles.get(&cid).cloned().unwrap_or_default(),
                conversation_id: cid,
                id: h.id,
                at: h.at,
                tool_name: h.tool_name,
                snippet: h.snippet,
            });
        }
        Ok(out)
    }

    /// `history_get`.
    pub async fn history_get(&self, conversation_id: &str) -> Result<ConversationDetail> {
        let id = ConversationId(conversation_id.to_owned());
        let store = self.inner.core.store();
        if store.conversation(id.clone()).await?.is_none() {
            return Err(DesktopError::NotFound(format!(
                "There is no conversation {conversation_id} in the history."
            )));
        }
        let timeline = store.timeline(id).await?;
        let transcript = crate::history::transcript(&timeline.items);
        let messages = transcript
            .iter()
            .filter(|e| !matches!(e, crate::contract::TranscriptEntry::Tool { .. }))
            .count();
        let calls = transcript.len() - messages;
        let summary = crate::history::summary(&outpost_store::ConversationSummary {
            conversation: timeline.conversation,
            message_count: messages as u64,
            tool_call_count: calls as u64,
        });
        Ok(ConversationDetail {
            summary,
            transcript,
        })
    }

    /// `history_continue`: the chat shows the stored conversation `conversation_id` (its
    /// messages and tool cards) and the next message goes on in it; the assistant is told
    /// what was said (docs/PROTOCOL.md ClientHello `history`; in LiveKit Agents mode
    /// `outpost.conversation`, docs/AGENTS.md). Needs a live session.
    pub async fn history_continue(&self, conversation_id: &str) -> Result<()> {
        let session = self.session().await?;
        let detail = self.history_get(conversation_id).await?;
        let mut history: Vec<HistoryMessage> = detail
            .transcript
            .iter()
            .filter_map(|e| match e {
                TranscriptEntry::User { text, .. } => Some(HistoryMessage {
                    role: HistoryRole::User,
                    text: text.clone(),
                }),
                TranscriptEntry::Assistant { text, .. } => Some(HistoryMessage {
                    role: HistoryRole::Assistant,
                    text: text.clone(),
                }),
                TranscriptEntry::Tool { .. } => None,
            })
            .collect();
        let drop_oldest = history.len().saturating_sub(MAX_HISTORY_MESSAGES);
        history.drain(..drop_oldest);
        {
            let mut live = lock(&self.inner.live);
            let ev = live
                .state
                .continue_with(conversation_id.to_owned(), detail.transcript);
            live.emit(ev);
        }
        session.continue_conversation(conversation_id.to_owned(), history)?;
        Ok(())
    }

    /// `history_export`: writes into `dir` (the shell passes the downloads folder).
    pub async fn history_export(
        &self,
        conversation_id: Option<String>,
        format: crate::contract::ExportFormat,
        dir: &std::path::Path,
    ) -> Result<ExportResult> {
        let (fmt, ext) = match format {
            crate::contract::ExportFormat::Json => (ExportFormat::Json, "json"),
            crate::contract::ExportFormat::Markdown => (ExportFormat::Markdown, "md"),
        };
        let (scope, stem) = match &conversation_id {
            Some(id) => {
                let cid = ConversationId(id.clone());
                if self
                    .inner
                    .core
                    .store()
                    .conversation(cid.clone())
                    .await?
                    .is_none()
                {
                    return Err(DesktopError::NotFound(format!(
                        "There is no conversation {id} in the history."
                    )));
                }
                (
                    ExportScope::Conversation(cid),
                    format!("outpost-{}", export_file_stem(id)),
                )
            }
            None => (ExportScope::All, "outpost-history".to_owned()),
        };
        let text = self.inner.core.store().export(scope, fmt).await?;
        std::fs::create_dir_all(dir).map_err(|source| DesktopError::Io {
            action: "create",
            path: dir.display().to_string(),
            source,
        })?;
        let stamp = outpost_store::export::format_time(now_ms())
            .replace([':', ' '], "-")
            .replace(['T', 'Z'], "");
        let path = dir.join(format!("{stem}-{stamp}.{ext}"));
        std::fs::write(&path, &text).map_err(|source| DesktopError::Io {
            action: "write",
            path: path.display().to_string(),
            source,
        })?;
        Ok(ExportResult {
            path: path.display().to_string(),
            bytes: text.len() as u64,
        })
    }

    /// `history_delete_all`.
    pub async fn history_delete_all(&self) -> Result<u64> {
        let all = self.conversations(usize::MAX).await?;
        let store = self.inner.core.store();
        let live = lock(&self.inner.live)
            .state
            .conversation_id()
            .map(str::to_owned);
        let mut deleted = 0;
        for s in all {
            if Some(s.conversation.id.as_str()) == live.as_deref() {
                continue;
            }
            if store.delete_conversation(s.conversation.id).await? {
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}

/// Longest conversation-id part of an export file name, in bytes.
const EXPORT_STEM_MAX: usize = 64;

/// The conversation id (chosen by the assistant, so anything) as one readable file-name
/// part that cannot leave the export folder: ASCII letters, digits, `_` and single dots
/// kept, every other run of characters (`/`, `\`, `:`, spaces, controls, non-ASCII) one
/// `-`, no dot or dash at either end, at most [`EXPORT_STEM_MAX`] bytes, and
/// `conversation` when nothing is left.
fn export_file_stem(id: &str) -> String {
    let mut out = String::with_capacity(id.len().min(EXPORT_STEM_MAX));
    for c in id.chars() {
        let next = if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
            c
        } else {
            '-'
        };
        // Runs collapse: "a//b" is "a-b", and ".." never survives to look like a parent.
        if (next == '-' || next == '.') && out.ends_with(next) {
            continue;
        }
        out.push(next);
        if out.len() >= EXPORT_STEM_MAX {
            break;
        }
    }
    let stem = out.trim_matches(|c| c == '-' || c == '.');
    if stem.is_empty() {
        "conversation".to_owned()
    } else {
        stem.to_owned()
    }
}
