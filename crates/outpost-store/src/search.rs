//! Full-text search over messages and tool calls (FTS5), with snippets.
//!
//! By default the user's text is treated as plain words, never as FTS5 syntax: each word
//! becomes a quoted FTS5 string, `"quoted phrases"` stay phrases, a trailing `*` makes a
//! prefix search, and everything else (AND/OR/NOT/NEAR, parentheses, colons, a lone quote)
//! is matched literally. [`SearchSyntax::Fts5`] passes the query through for power users and
//! turns FTS5's syntax errors into [`Error::InvalidSearchQuery`].

use rusqlite::{Connection, params};

use crate::error::{Error, Result, SqlContext};
use crate::model::{ConversationId, HitKind, SearchHit};

/// How the query text is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SearchSyntax {
    /// Plain words, "phrases" and prefix* (safe for any user input).
    #[default]
    Plain,
    /// Raw FTS5 query syntax; syntax errors are reported, not panicked on.
    Fts5,
}

/// How hits are ordered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SearchOrder {
    /// Newest first. FTS5 walks the index backwards and stops after `limit` hits, so even a
    /// word in every message costs only `limit` rows.
    #[default]
    Newest,
    /// Best BM25 score first. Every match is scored before the best `limit` are kept: slow
    /// for words that occur in most messages.
    Relevance,
}

/// A search request.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    /// What to look for.
    pub text: String,
    /// How to read it.
    pub syntax: SearchSyntax,
    /// Hit order.
    pub order: SearchOrder,
    /// Only in this conversation.
    pub conversation_id: Option<ConversationId>,
    /// Search messages.
    pub messages: bool,
    /// Search tool calls (name, server, arguments, result, error message).
    pub tool_calls: bool,
    /// Maximum hits (capped at 1000; 0 means 20).
    pub limit: u32,
    /// Marker placed before each match in snippets.
    pub highlight_start: String,
    /// Marker placed after each match in snippets.
    pub highlight_end: String,
    /// Approximate number of words in a snippet (1..=64).
    pub snippet_words: u8,
}

impl SearchQuery {
    /// Plain-text search across messages and tool calls, 20 hits, `[`/`]` markers.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            syntax: SearchSyntax::Plain,
            order: SearchOrder::Newest,
            conversation_id: None,
            messages: true,
            tool_calls: true,
            limit: 20,
            highlight_start: "[".to_owned(),
            highlight_end: "]".to_owned(),
            snippet_words: 12,
        }
    }
}

/// Builds a safe FTS5 expression from plain user text.
pub fn plain_to_fts5(text: &str) -> Result<String> {
    let mut terms: Vec<String> = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        if let Some(after_quote) = rest.strip_prefix('"') {
            // A phrase runs to the next quote; a lone quote runs to the end of the text.
            let (phrase, tail) = match after_quote.find('"') {
                Some(end) => (&after_quote[..end], &after_quote[end + 1..]),
                None => (after_quote, ""),
            };
            if has_word(phrase) {
                terms.push(quote(phrase));
            }
            rest = tail;
        } else {
            let end = rest
                .find(|c: char| c.is_whitespace() || c == '"')
                .unwrap_or(rest.len());
            let word = &rest[..end];
            rest = &rest[end..];
            let (stem, prefix) = match word.strip_suffix('*') {
                Some(stem) if has_word(stem) => (stem, true),
                _ => (word, false),
            };
            if has_word(stem) {
                let mut term = quote(stem);
                if prefix {
                    term.push('*');
                }
                terms.push(term);
            }
        }
    }
    if terms.is_empty() {
        return Err(Error::InvalidSearchQuery {
            query: text.to_owned(),
            reason: "it contains no letters or digits to search for".to_owned(),
        });
    }
    Ok(terms.join(" "))
}

fn has_word(s: &str) -> bool {
    s.chars().any(char::is_alphanumeric)
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

fn fts_error(query: &str, e: rusqlite::Error, context: &str) -> Error {
    // FTS5 reports every query problem (syntax, unterminated string, unknown column) as a
    // plain SQLITE_ERROR; I/O, corruption and the like have codes of their own.
    match &e {
        rusqlite::Error::SqliteFailure(f, msg) if f.code == rusqlite::ErrorCode::Unknown => {
            Error::InvalidSearchQuery {
                query: query.to_owned(),
                reason: msg.clone().unwrap_or_else(|| e.to_string()),
            }
        }
        _ => Error::Sqlite {
            context: context.to_owned(),
            error: e,
        },
    }
}

/// Runs a search. Hits come newest first, or best BM25 score first (see [`SearchOrder`]).
pub fn search(conn: &Connection, q: &SearchQuery) -> Result<Vec<SearchHit>> {
    let expr = match q.syntax {
        SearchSyntax::Plain => plain_to_fts5(&q.text)?,
        SearchSyntax::Fts5 => {
            if q.text.trim().is_empty() {
                return Err(Error::InvalidSearchQuery {
                    query: q.text.clone(),
                    reason: "the query is empty".to_owned(),
                });
            }
            q.text.clone()
        }
    };
    let limit = match q.limit {
        0 => 20,
        n => n.min(1000),
    };
    let words = i64::from(q.snippet_words.clamp(1, 64));
    let conv = q.conversation_id.as_ref().map(|c| c.0.clone());
    let mut hits = Vec::new();

    // Each side is ordered inside FTS5 and stops at `limit`, so snippets are computed only
    // for rows that can make the final list.
    let order_by = |fts: &str| match q.order {
        SearchOrder::Newest => format!("{fts}.rowid DESC"),
        SearchOrder::Relevance => format!("{fts}.rank"),
    };
    if q.messages {
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT m.conversation_id, m.id, m.created_at,
                        snippet(messages_fts, 0, ?2, ?3, '…', ?4), messages_fts.rank
                 FROM messages_fts JOIN messages m ON m.pk = messages_fts.rowid
                 WHERE messages_fts MATCH ?1 AND (?5 IS NULL OR m.conversation_id = ?5)
                 ORDER BY {} LIMIT ?6",
                order_by("messages_fts")
            ))
            .ctx(|| "prepare message search".to_owned())?;
        let rows = stmt
            .query_map(
                params![expr, q.highlight_start, q.highlight_end, words, conv, limit],
                |r| {
                    Ok(SearchHit {
                        kind: HitKind::Message,
                        conversation_id: ConversationId(r.get(0)?),
                        id: r.get(1)?,
                        at: r.get(2)?,
                        tool_name: None,
                        snippet: r.get(3)?,
                        score: r.get(4)?,
                    })
                },
            )
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| fts_error(&q.text, e, "search messages"))?;
        hits.extend(rows);
    }
    if q.tool_calls {
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT t.conversation_id, t.id, t.initiated_at, t.tool_name,
                        snippet(tool_calls_fts, -1, ?2, ?3, '…', ?4), tool_calls_fts.rank
                 FROM tool_calls_fts JOIN tool_calls t ON t.pk = tool_calls_fts.rowid
                 WHERE tool_calls_fts MATCH ?1 AND (?5 IS NULL OR t.conversation_id = ?5)
                 ORDER BY {} LIMIT ?6",
                order_by("tool_calls_fts")
            ))
            .ctx(|| "prepare tool-call search".to_owned())?;
        let rows = stmt
            .query_map(
                params![expr, q.highlight_start, q.highlight_end, words, conv, limit],
                |r| {
                    Ok(SearchHit {
                        kind: HitKind::ToolCall,
                        conversation_id: ConversationId(r.get(0)?),
                        id: r.get(1)?,
                        at: r.get(2)?,
                        tool_name: Some(r.get(3)?),
                        snippet: r.get(4)?,
                        score: r.get(5)?,
                    })
                },
            )
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| fts_error(&q.text, e, "search tool calls"))?;
        hits.extend(rows);
    }
    match q.order {
        SearchOrder::Newest => hits.sort_by_key(|h| std::cmp::Reverse(h.at)),
        SearchOrder::Relevance => {
            hits.sort_by(|a, b| a.score.total_cmp(&b.score).then(b.at.cmp(&a.at)))
        }
    }
    hits.truncate(limit as usize);
    Ok(hits)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn words_are_quoted() {
        assert_eq!(plain_to_fts5("hello world").unwrap(), r#""hello" "world""#);
    }

    #[test]
    fn phrases_and_prefixes_survive() {
        assert_eq!(
            plain_to_fts5(r#""new york" pizz*"#).unwrap(),
            r#""new york" "pizz"*"#
        );
    }

    #[test]
    fn operators_and_punctuation_are_literal() {
        assert_eq!(
            plain_to_fts5("a OR b NOT (c) col:d").unwrap(),
            r#""a" "OR" "b" "NOT" "(c)" "col:d""#
        );
    }

    #[test]
    fn unbalanced_quote_runs_to_the_end() {
        assert_eq!(
            plain_to_fts5(r#"say "hello there"#).unwrap(),
            r#""say" "hello there""#
        );
    }

    #[test]
    fn only_punctuation_is_a_clear_error() {
        let err = plain_to_fts5(r#"" ( ) * : ""#).unwrap_err();
        assert!(matches!(err, Error::InvalidSearchQuery { .. }), "{err}");
        let err = plain_to_fts5("   ").unwrap_err();
        assert!(err.to_string().contains("no letters"), "{err}");
    }
}
