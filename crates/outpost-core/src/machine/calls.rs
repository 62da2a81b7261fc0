//! The tool-call lifecycle: a request from the assistant (or over RPC), its progress and
//! result from either side, the executor's events, and what the store and the UI are told.

use super::*;

impl Machine {
    pub(super) fn remember_call(&mut self, id: &str, call: Call) {
        if self.call_order.len() >= REMEMBERED_CALLS {
            if let Some(old) = self.call_order.pop_front() {
                self.calls.remove(&old);
                self.user_cancelled.remove(&old);
            }
        }
        self.call_order.push_back(id.to_owned());
        self.calls.insert(id.to_owned(), call);
    }

    /// A new catalogue: the next hello, `outpost.list_tools` and the cards use it; an
    /// Outpost-protocol assistant of version 2 gets a ToolsChanged ([`Self::announce_tools`]);
    /// the session re-registers the RPC methods itself.
    pub(super) fn tools_changed(
        &mut self,
        fx: &mut Fx,
        tools: Vec<ToolDescriptor>,
        claims: BTreeMap<String, ServerClaims>,
    ) {
        if tools == self.config.tools {
            return;
        }
        self.config.tools = tools;
        self.config.claims = claims;
        self.tools_unannounced = true;
        fx.ui(UiEvent::ToolsChanged {
            tools: self.config.tools.iter().map(|t| t.name.clone()).collect(),
        });
    }

    /// The MCP server behind `tool`, if the catalogue names one.
    pub(super) fn server_of(&self, tool: &str) -> Option<String> {
        self.config
            .tools
            .iter()
            .find(|t| t.name == tool)
            .and_then(|t| t.server_name.clone())
    }

    pub(super) fn request(&mut self, fx: &mut Fx, now: Millis, r: ToolUseRequest) {
        let conversation = self.conv();
        if let Some(known) = self.calls.get(&r.id) {
            // A duplicate never runs twice: the executor ignores it while the first is in
            // flight and resends the first result after (PROTOCOL §6.1). Server calls and
            // calls handed to the server have nothing to resend.
            if known.execution != Execution::Server && !known.handed {
                fx.0.push(Effect::RunTool {
                    conversation_id: conversation.0,
                    grant_scope: self.grant_scope(),
                    request: r,
                });
            }
            return;
        }
        self.split_open_messages();
        fx.record(Record::Tool(store::ToolCallEvent::Initiated {
            conversation_id: conversation.clone(),
            id: r.id.clone(),
            message_id: Some(r.message_id.clone()),
            tool_name: r.tool_name.clone(),
            server_name: self.server_of(&r.tool_name).unwrap_or_default(),
            execution: store_execution(r.execution),
            arguments: map_value(&r.parameters),
            at: now,
        }));
        fx.ui(UiEvent::ToolCallRequested {
            id: r.id.clone(),
            message_id: r.message_id.clone(),
            tool_name: r.tool_name.clone(),
            server_name: self.server_of(&r.tool_name),
            claims: self.config.claims.get(&r.tool_name).copied(),
            execution: r.execution,
            parameters: r.parameters.clone(),
            timeout_ms: r.effective_timeout_ms(),
        });
        self.remember_call(
            &r.id,
            Call {
                conversation: conversation.clone(),
                tool_name: r.tool_name.clone(),
                execution: r.execution,
                status: ToolCallStatus::Initiated,
                handed: false,
                running_logged: false,
                via_rpc: false,
            },
        );
        if r.execution != Execution::Server {
            fx.0.push(Effect::RunTool {
                conversation_id: conversation.0,
                grant_scope: self.grant_scope(),
                request: r,
            });
        }
    }

    pub(super) fn cancel(&mut self, fx: &mut Fx, c: ToolUseCancel) {
        let effective = self
            .calls
            .get(&c.id)
            .is_some_and(|call| call.execution != Execution::Server && call.open_here());
        fx.ui(UiEvent::ToolCallCancelRequested {
            id: c.id.clone(),
            reason: c.reason.clone(),
            effective,
        });
        if effective {
            fx.0.push(Effect::CancelTool(c));
        }
    }

    /// The assistant reports on a call it runs. A report about a call Outpost runs, or one
    /// that has ended, changes nothing (it is shown with the call's status as it is); a
    /// call that runs does not go back to waiting for consent.
    pub(super) fn server_progress(&mut self, fx: &mut Fx, now: Millis, p: ToolUseProgress) {
        let mut record = None;
        let status = match self.calls.get_mut(&p.id) {
            None => progress_status(p.state),
            Some(call) => {
                let runs_on_server = call.execution == Execution::Server || call.handed;
                if runs_on_server && !call.status.is_final() {
                    let conversation_id = call.conversation.clone();
                    match p.state {
                        ProgressState::AwaitingConsent
                            if call.status == ToolCallStatus::Initiated =>
                        {
                            call.status = ToolCallStatus::AwaitingConsent;
                            record = Some(store::ToolCallEvent::AwaitingConsent {
                                conversation_id,
                                id: p.id.clone(),
                                at: now,
                            });
                        }
                        ProgressState::Running => {
                            call.status = ToolCallStatus::Running;
                            if !call.running_logged {
                                call.running_logged = true;
                                record = Some(store::ToolCallEvent::Running {
                                    conversation_id,
                                    id: p.id.clone(),
                                    executed_by: store::Executor::Server,
                                    at: now,
                                });
                            }
                        }
                        ProgressState::AwaitingConsent => {}
                    }
                }
                call.status
            }
        };
        fx.ui(UiEvent::ToolCallProgress {
            id: p.id,
            state: p.state,
            status,
            detail: p.detail,
            by: Side::Server,
        });
        if let Some(ev) = record {
            fx.record(Record::Tool(ev));
        }
    }

    pub(super) fn server_result(&mut self, fx: &mut Fx, now: Millis, r: ToolUseResult) {
        let Some(call) = self.calls.get_mut(&r.id) else {
            fx.ui(finished_event(
                &r,
                "",
                ToolCallStatus::of_result(r.success, r.error_code.as_ref()),
                Side::Server,
            ));
            return;
        };
        let runs_on_server = call.execution == Execution::Server || call.handed;
        if !runs_on_server || call.status.is_final() {
            // Not the server's call, or a repeat: nothing to record.
            return;
        }
        call.status = ToolCallStatus::of_result(r.success, r.error_code.as_ref());
        let status = call.status;
        let conversation_id = call.conversation.clone();
        let tool = call.tool_name.clone();
        fx.record(Record::Tool(final_event(
            conversation_id,
            &r,
            status,
            store::Executor::Server,
            now,
        )));
        fx.ui(finished_event(&r, &tool, status, Side::Server));
    }

    pub(super) fn exec(&mut self, fx: &mut Fx, now: Millis, ev: ExecEvent) {
        match ev {
            ExecEvent::Result(r) => self.finish_client_call(fx, r, now, true),
            ExecEvent::Progress(p) => {
                let status = progress_status(p.state);
                if let Some(call) = self.calls.get_mut(&p.id) {
                    let conversation_id = call.conversation.clone();
                    call.status = status;
                    match p.state {
                        ProgressState::AwaitingConsent => {
                            fx.record(Record::Tool(store::ToolCallEvent::AwaitingConsent {
                                conversation_id,
                                id: p.id.clone(),
                                at: now,
                            }));
                        }
                        ProgressState::Running => {
                            if !call.running_logged {
                                call.running_logged = true;
                                fx.record(Record::Tool(store::ToolCallEvent::Running {
                                    conversation_id,
                                    id: p.id.clone(),
                                    executed_by: store::Executor::Client,
                                    at: now,
                                }));
                            }
                        }
                    }
                }
                fx.ui(UiEvent::ToolCallProgress {
                    id: p.id.clone(),
                    state: p.state,
                    status,
                    detail: p.detail.clone(),
                    by: Side::Client,
                });
                let rpc = self.calls.get(&p.id).is_some_and(|c| c.via_rpc);
                if !rpc {
                    self.send(fx, now, Message::ToolUseProgress(p));
                }
            }
            ExecEvent::Started { request_id } => {
                // The dispatcher reports nothing about a call after its result
                // (`DispatchEvent`'s order), so a known call is not finished here.
                if let Some(call) = self.calls.get_mut(&request_id) {
                    call.status = ToolCallStatus::Running;
                    if !call.running_logged {
                        call.running_logged = true;
                        fx.record(Record::Tool(store::ToolCallEvent::Running {
                            conversation_id: call.conversation.clone(),
                            id: request_id,
                            executed_by: store::Executor::Client,
                            at: now,
                        }));
                    }
                }
            }
            ExecEvent::Decided {
                request_id,
                allowed,
                by,
                reason,
                decision,
            } => {
                let Some(call) = self.calls.get(&request_id) else {
                    return;
                };
                fx.record(Record::Consent(store::NewConsent {
                    conversation_id: call.conversation.clone(),
                    tool_call_id: Some(request_id),
                    tool_name: call.tool_name.clone(),
                    asked: reason,
                    outcome: if allowed {
                        store::Outcome::Allowed
                    } else {
                        store::Outcome::Denied
                    },
                    decision: decision.map(store_decision),
                    scope: None,
                    decided_by: store_decider(by),
                    asked_at: None,
                    decided_at: now,
                }));
            }
            ExecEvent::PolicyWriteFailed {
                request_id,
                decision,
                message,
            } => {
                let tool = self
                    .calls
                    .get(&request_id)
                    .map_or_else(String::new, |c| format!(" for {}", c.tool_name));
                let what = match decision {
                    Decision::AlwaysDeny => "Always deny",
                    _ => "Always allow",
                };
                fx.ui(UiEvent::Error {
                    message: format!(
                        "Your \"{what}\" answer{tool} applied to this call but could not be \
                         saved in the policy file, so Outpost will ask again next time: {message}"
                    ),
                });
            }
        }
    }

    /// A result from the executor: record, show, send (or hold).
    pub(super) fn finish_client_call(
        &mut self,
        fx: &mut Fx,
        mut r: ToolUseResult,
        now: Millis,
        send: bool,
    ) {
        if self.user_cancelled.contains(&r.id) && r.error_code == Some(ToolErrorCode::Cancelled) {
            r = ToolUseResult::permission_denied(&r.id, "the user", "the user stopped this call");
        }
        if let Some(call) = self.calls.get_mut(&r.id) {
            let handed = call.execution == Execution::Either
                && r.error_code == Some(ToolErrorCode::UnknownTool);
            if call.handed || call.status.is_final() {
                // Ended already, or the server runs it: nothing to record or show.
            } else if handed {
                call.handed = true;
                fx.ui(UiEvent::ToolCallHandedToServer {
                    id: r.id.clone(),
                    tool_name: call.tool_name.clone(),
                });
            } else {
                call.status = ToolCallStatus::of_result(r.success, r.error_code.as_ref());
                let status = call.status;
                let conversation_id = call.conversation.clone();
                let tool = call.tool_name.clone();
                let executed = if call.running_logged {
                    None
                } else {
                    Some(store::Executor::Client)
                };
                let mut ev = final_event(conversation_id, &r, status, store::Executor::Client, now);
                set_executed_by(&mut ev, executed);
                fx.record(Record::Tool(ev));
                fx.ui(finished_event(&r, &tool, status, Side::Client));
            }
        }
        if self.calls.get(&r.id).is_some_and(|c| c.via_rpc) {
            if send {
                self.rpc_result(fx, &r);
            }
            return;
        }
        if send {
            self.send(fx, now, Message::ToolUseResult(r));
        }
    }
}

pub(super) fn store_execution(e: Execution) -> store::Execution {
    match e {
        Execution::Server => store::Execution::Server,
        Execution::Client => store::Execution::Client,
        Execution::Either => store::Execution::Either,
    }
}

pub(super) fn store_decision(d: Decision) -> store::Decision {
    match d {
        Decision::AllowOnce => store::Decision::AllowOnce,
        Decision::AllowForConversation => store::Decision::AllowForConversation,
        Decision::AlwaysAllow => store::Decision::AlwaysAllow,
        Decision::DenyOnce => store::Decision::DenyOnce,
        Decision::AlwaysDeny => store::Decision::AlwaysDeny,
    }
}

pub(super) fn store_decider(by: Decider) -> store::DecidedBy {
    match by {
        Decider::Policy => store::DecidedBy::Policy,
        Decider::SecretsList => store::DecidedBy::SecretsList,
        Decider::User => store::DecidedBy::User,
        Decider::ConversationGrant => store::DecidedBy::ConversationGrant,
        Decider::ConsentTimeout => store::DecidedBy::ConsentTimeout,
        Decider::NoConsentUi => store::DecidedBy::NoConsentUi,
    }
}

/// What the store records of a finished call: the result, and the status the machine gave
/// the call (copied, never worked out again there).
pub(super) fn final_event(
    conversation_id: ConversationId,
    r: &ToolUseResult,
    status: ToolCallStatus,
    by: store::Executor,
    now: Millis,
) -> store::ToolCallEvent {
    if r.success {
        store::ToolCallEvent::Completed {
            conversation_id,
            id: r.id.clone(),
            result: r.result.as_ref().map(map_value),
            executed_by: Some(by),
            at: now,
        }
    } else {
        store::ToolCallEvent::Failed {
            conversation_id,
            id: r.id.clone(),
            code: r
                .error_code
                .as_ref()
                .map_or("execution_error", |c| c.as_str())
                .into(),
            status: status.into(),
            message: r.error_message.clone().unwrap_or_default(),
            result: r.result.as_ref().map(map_value),
            executed_by: Some(by),
            at: now,
        }
    }
}

pub(super) fn set_executed_by(ev: &mut store::ToolCallEvent, by: Option<store::Executor>) {
    match ev {
        store::ToolCallEvent::Completed { executed_by, .. }
        | store::ToolCallEvent::Failed { executed_by, .. } => *executed_by = by,
        _ => {}
    }
}

/// The status a progress report alone says (a call the machine does not know).
fn progress_status(state: ProgressState) -> ToolCallStatus {
    match state {
        ProgressState::AwaitingConsent => ToolCallStatus::AwaitingConsent,
        ProgressState::Running => ToolCallStatus::Running,
    }
}

/// The UI's event for result `r` of `tool`, which ended the call with `status`.
pub(super) fn finished_event(
    r: &ToolUseResult,
    tool: &str,
    status: ToolCallStatus,
    by: Side,
) -> UiEvent {
    UiEvent::ToolCallFinished {
        id: r.id.clone(),
        tool_name: tool.into(),
        success: r.success,
        status,
        result: r.result.clone(),
        error_code: r.error_code.clone(),
        error_message: r.error_message.clone(),
        executed_by: by,
    }
}
