//! The consent broker: where a tool call that needs the user's permission waits for an
//! answer.
//!
//! A UI attaches with [`ConsentBroker::attach`] and receives [`ConsentEvent`]s from the
//! returned [`ConsentInbox`]: a question ([`ConsentEvent::Asked`]) or the withdrawal of one
//! (cancelled by the server, or timed out). It answers with [`ConsentBroker::answer`] (or
//! [`ConsentInbox::answer`]) naming the question's `consent_id`. The Tauri shell forwards
//! questions as events and answers from a command; tests answer from a task.
//!
//! Without an attached UI every question is answered "deny" at once, and a UI that goes
//! away turns its open questions into denials. A question nobody answers within the
//! timeout is withdrawn and denied.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use crate::error::{PolicyError, Result};
use crate::model::Decision;

/// A question for the user. Shows the call's full arguments; nothing is hidden.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsentRequest {
    /// Names this question in answers and withdrawals.
    pub consent_id: String,
    /// The ToolUseRequest being decided.
    pub request_id: String,
    /// The conversation it belongs to.
    pub conversation_id: String,
    /// The tool.
    pub tool: String,
    /// The MCP server that provides the tool (its name in `mcp.toml`); `None` for a
    /// built-in tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The tool's description, as its catalogue entry (or its MCP server) gives it.
    #[serde(default)]
    pub description: String,
    /// For an MCP tool: what its server claims about it (annotations). Shown as the
    /// server's claims; they never change the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<crate::model::ServerClaims>,
    /// The call's parameters, exactly as received.
    pub parameters: Map<String, Value>,
    /// One line saying what will happen, e.g. "Read /home/u/notes.txt".
    pub summary: String,
    /// The resolved paths the call touches (after `~`, `..` and symlinks).
    pub paths: Vec<PathBuf>,
    /// The folder "allow for this conversation" and "always allow" would cover.
    pub folder: Option<PathBuf>,
    /// Why the question is asked.
    pub reason: String,
    /// Whether the tool can change or delete data.
    pub destructive: bool,
    /// The answers the UI may offer; any other answer is refused.
    pub options: Vec<Decision>,
    /// How long the question stays open, in milliseconds.
    pub expires_in_ms: u64,
}

/// Why an open question is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "WithdrawnReason"))]
pub enum WithdrawReason {
    /// The server cancelled the call, or the caller stopped waiting.
    Cancelled,
    /// Nobody answered in time; the call was denied.
    TimedOut,
    /// The user answered it ([`ConsentBroker::answer`]), in this window or another.
    Answered,
}

/// What the UI receives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum ConsentEvent {
    /// Show this question.
    Asked(Box<ConsentRequest>),
    /// Stop showing this question.
    Withdrawn {
        /// The question.
        consent_id: String,
        /// Why.
        reason: WithdrawReason,
    },
}

/// How a question ended, for the caller of [`ConsentBroker::ask`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsentOutcome {
    /// The user answered.
    Decided(Decision),
    /// No UI was attached, or it went away before answering.
    NoUi,
    /// Nobody answered within the timeout.
    TimedOut,
}

#[derive(Debug)]
struct Pending {
    reply: oneshot::Sender<Decision>,
    options: Vec<Decision>,
}

#[derive(Debug, Default)]
struct Inner {
    ui: Option<mpsc::UnboundedSender<ConsentEvent>>,
    pending: HashMap<String, Pending>,
    next_id: u64,
}

/// Routes consent questions to the attached UI and answers back to the waiting calls.
#[derive(Debug, Clone, Default)]
pub struct ConsentBroker {
    inner: Arc<Mutex<Inner>>,
}

/// The UI's end: questions and withdrawals arrive here. Dropping it detaches the UI.
#[derive(Debug)]
pub struct ConsentInbox {
    rx: mpsc::UnboundedReceiver<ConsentEvent>,
    broker: ConsentBroker,
}

impl ConsentInbox {
    /// The next event; `None` once a newer UI attached in this one's place.
    pub async fn next(&mut self) -> Option<ConsentEvent> {
        self.rx.recv().await
    }

    /// Answers a question.
    pub fn answer(&self, consent_id: &str, decision: Decision) -> Result<()> {
        self.broker.answer(consent_id, decision)
    }
}

impl ConsentBroker {
    /// A broker with no UI attached (every question is denied until one attaches).
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        outpost_sync::lock(&self.inner)
    }

    /// Attaches a UI, replacing any earlier one.
    pub fn attach(&self) -> ConsentInbox {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().ui = Some(tx);
        ConsentInbox {
            rx,
            broker: self.clone(),
        }
    }

    /// Whether a UI is attached and still listening.
    pub fn is_attached(&self) -> bool {
        self.lock().ui.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    /// The questions waiting for an answer.
    pub fn pending(&self) -> usize {
        self.lock().pending.len()
    }

    /// Answers question `consent_id`. Fails when the question is not open or the decision
    /// was not offered (the question then stays open).
    pub fn answer(&self, consent_id: &str, decision: Decision) -> Result<()> {
        let mut inner = self.lock();
        let Some(p) = inner.pending.get(consent_id) else {
            return Err(PolicyError::UnknownConsent(consent_id.to_owned()));
        };
        if !p.options.contains(&decision) {
            return Err(PolicyError::DecisionNotOffered {
                consent_id: consent_id.to_owned(),
                decision: decision.as_str().to_owned(),
                offered: p
                    .options
                    .iter()
                    .map(|d| d.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        if let Some(p) = inner.pending.remove(consent_id) {
            // The asker may have stopped waiting a moment ago; then nothing is lost.
            let _ = p.reply.send(decision);
            // Every UI showing the question closes it, whoever answered.
            if let Some(ui) = &inner.ui {
                let _ = ui.send(ConsentEvent::Withdrawn {
                    consent_id: consent_id.to_owned(),
                    reason: WithdrawReason::Answered,
                });
            }
        }
        Ok(())
    }

    /// Asks the user. `request.consent_id` is assigned here. Waits at most `timeout`.
    /// Dropping the returned future withdraws the question.
    pub async fn ask(&self, mut request: ConsentRequest, timeout: Duration) -> ConsentOutcome {
        let (reply_tx, reply_rx) = oneshot::channel();
        let ui = {
            let mut inner = self.lock();
            let Some(ui) = inner.ui.clone().filter(|tx| !tx.is_closed()) else {
                return ConsentOutcome::NoUi;
            };
            inner.next_id += 1;
            request.consent_id = format!("consent-{}", inner.next_id);
            request.expires_in_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
            inner.pending.insert(
                request.consent_id.clone(),
                Pending {
                    reply: reply_tx,
                    options: request.options.clone(),
                },
            );
            if ui
                .send(ConsentEvent::Asked(Box::new(request.clone())))
                .is_err()
            {
                inner.pending.remove(&request.consent_id);
                return ConsentOutcome::NoUi;
            }
            ui
        };
        let mut guard = Withdraw {
            broker: self,
            consent_id: request.consent_id.clone(),
            reason: WithdrawReason::Cancelled,
            armed: true,
        };
        tokio::select! {
            decision = reply_rx => {
                guard.armed = false;
                match decision {
                    Ok(d) => ConsentOutcome::Decided(d),
                    Err(_) => ConsentOutcome::NoUi,
                }
            }
            () = ui.closed() => ConsentOutcome::NoUi,
            () = tokio::time::sleep(timeout) => {
                guard.reason = WithdrawReason::TimedOut;
                ConsentOutcome::TimedOut
            }
        }
    }
}

/// Takes a question back when its asker stops waiting for any reason but an answer.
struct Withdraw<'a> {
    broker: &'a ConsentBroker,
    consent_id: String,
    reason: WithdrawReason,
    armed: bool,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut inner = self.broker.lock();
        if inner.pending.remove(&self.consent_id).is_some() {
            if let Some(ui) = &inner.ui {
                let _ = ui.send(ConsentEvent::Withdrawn {
                    consent_id: std::mem::take(&mut self.consent_id),
                    reason: self.reason,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn question(options: Vec<Decision>) -> ConsentRequest {
        ConsentRequest {
            server: None,
            description: String::new(),
            claims: None,
            consent_id: String::new(),
            request_id: "r1".into(),
            conversation_id: "c1".into(),
            tool: "read_local_file".into(),
            parameters: Map::new(),
            summary: "Read /x".into(),
            paths: vec![PathBuf::from("/x")],
            folder: Some(PathBuf::from("/")),
            reason: "outside".into(),
            destructive: false,
            options,
            expires_in_ms: 0,
        }
    }

    #[tokio::test]
    async fn no_ui_means_deny_at_once() {
        let broker = ConsentBroker::new();
        let out = broker
            .ask(question(Decision::ALL.to_vec()), Duration::from_secs(60))
            .await;
        assert_eq!(out, ConsentOutcome::NoUi);
        let inbox = broker.attach();
        drop(inbox);
        let out = broker
            .ask(question(Decision::ALL.to_vec()), Duration::from_secs(60))
            .await;
        assert_eq!(out, ConsentOutcome::NoUi);
    }

    #[tokio::test]
    async fn the_ui_answer_reaches_the_asker_and_unoffered_answers_are_refused() {
        let broker = ConsentBroker::new();
        let mut inbox = broker.attach();
        let asker = {
            let b = broker.clone();
            tokio::spawn(async move {
                b.ask(
                    question(vec![Decision::AllowOnce, Decision::DenyOnce]),
                    Duration::from_secs(60),
                )
                .await
            })
        };
        let Some(ConsentEvent::Asked(q)) = inbox.next().await else {
            panic!("no question")
        };
        assert_eq!(q.tool, "read_local_file");
        assert_eq!(q.expires_in_ms, 60_000);
        let err = inbox
            .answer(&q.consent_id, Decision::AlwaysAllow)
            .unwrap_err();
        assert!(matches!(err, PolicyError::DecisionNotOffered { .. }));
        assert!(
            err.to_string().contains("(offered: allow_once, deny_once)"),
            "{err}"
        );
        inbox.answer(&q.consent_id, Decision::AllowOnce).unwrap();
        assert_eq!(
            asker.await.unwrap(),
            ConsentOutcome::Decided(Decision::AllowOnce)
        );
        // The answer closes the question in every UI showing it.
        assert_eq!(
            inbox.next().await,
            Some(ConsentEvent::Withdrawn {
                consent_id: q.consent_id.clone(),
                reason: WithdrawReason::Answered,
            })
        );
        assert!(matches!(
            inbox.answer(&q.consent_id, Decision::AllowOnce),
            Err(PolicyError::UnknownConsent(_))
        ));
        assert_eq!(broker.pending(), 0);
    }

    #[tokio::test]
    async fn unanswered_questions_time_out_and_are_withdrawn() {
        let broker = ConsentBroker::new();
        let mut inbox = broker.attach();
        let out = broker
            .ask(question(Decision::ALL.to_vec()), Duration::from_millis(50))
            .await;
        assert_eq!(out, ConsentOutcome::TimedOut);
        assert!(matches!(inbox.next().await, Some(ConsentEvent::Asked(_))));
        assert!(matches!(
            inbox.next().await,
            Some(ConsentEvent::Withdrawn {
                reason: WithdrawReason::TimedOut,
                ..
            })
        ));
        assert_eq!(broker.pending(), 0);
    }

    #[tokio::test]
    async fn dropping_the_ask_withdraws_and_a_ui_leaving_denies() {
        let broker = ConsentBroker::new();
        let mut inbox = broker.attach();
        let fut = broker.ask(question(Decision::ALL.to_vec()), Duration::from_secs(60));
        let _ = tokio::time::timeout(Duration::from_millis(20), fut).await;
        assert!(matches!(inbox.next().await, Some(ConsentEvent::Asked(_))));
        assert!(matches!(
            inbox.next().await,
            Some(ConsentEvent::Withdrawn {
                reason: WithdrawReason::Cancelled,
                ..
            })
        ));
        let asker = {
            let b = broker.clone();
            tokio::spawn(async move {
                b.ask(question(Decision::ALL.to_vec()), Duration::from_secs(60))
                    .await
            })
        };
        assert!(matches!(inbox.next().await, Some(ConsentEvent::Asked(_))));
        drop(inbox);
        assert_eq!(asker.await.unwrap(), ConsentOutcome::NoUi);
    }
}
