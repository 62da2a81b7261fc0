//! The machine's unit tests: inputs in, effects out.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::calls::store_decision;
use super::*;
use outpost_protocol::{AssistantState, ClientHello, Map, Value, encode};

const A: &str = "assistant";

fn machine() -> Machine {
    Machine::new(MachineConfig::new(Vec::new()))
}

fn bytes(m: impl Into<Message>) -> Vec<u8> {
    encode(&m.into()).unwrap()
}

fn recv(m: &mut Machine, msg: impl Into<Message>, now: Millis) -> Vec<Effect> {
    m.handle(
        Input::Received {
            sender: A.into(),
            bytes: bytes(msg),
        },
        now,
    )
}

fn sent(fx: &[Effect]) -> Vec<Message> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Send { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

fn records(fx: &[Effect]) -> Vec<Record> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Record(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

/// The UI events among the effects (also used by the other modules' tests).
pub(super) fn uis(fx: &[Effect]) -> Vec<UiEvent> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Ui(u) => Some(u.clone()),
            _ => None,
        })
        .collect()
}

fn welcome(conv: &str) -> ServerWelcome {
    ServerWelcome {
        protocol_version: 1,
        session_id: "s1".into(),
        conversation_id: conv.into(),
        assistant_name: "Helper".into(),
        capabilities: Vec::new(),
    }
}

fn hello_of(fx: &[Effect]) -> ClientHello {
    let hellos: Vec<ClientHello> = sent(fx)
        .into_iter()
        .filter_map(|m| match m {
            Message::ClientHello(h) => Some(h),
            _ => None,
        })
        .collect();
    assert_eq!(hellos.len(), 1, "expected one hello in {fx:?}");
    hellos.into_iter().next().unwrap()
}

/// Joined, assistant present, welcomed into conversation c1.
fn live() -> Machine {
    let mut m = machine();
    let fx = m.handle(
        Input::Joined {
            assistant: Some(A.into()),
        },
        0,
    );
    hello_of(&fx);
    recv(&mut m, welcome("c1"), 10);
    assert!(m.is_ready());
    m
}

fn request(id: &str, execution: Execution) -> ToolUseRequest {
    ToolUseRequest {
        id: id.into(),
        message_id: "m1".into(),
        tool_name: "read_local_file".into(),
        execution,
        parameters: Map::new(),
        timeout_ms: None,
    }
}

fn ok(id: &str) -> ToolUseResult {
    let mut r = Map::new();
    r.insert("content".into(), Value::String("hi".into()));
    ToolUseResult::ok(id, r)
}

fn error_of(fx: &[Effect]) -> ErrorMessage {
    sent(fx)
        .into_iter()
        .find_map(|m| match m {
            Message::Error(e) => Some(e),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no ErrorMessage sent in {fx:?}"))
}

fn mcp_tool(name: &str) -> ToolDescriptor {
    ToolDescriptor {
        name: name.into(),
        description: "d".into(),
        parameters: Map::new(),
        result_schema: None,
        read_only: false,
        destructive: true,
        open_world: true,
        server_name: Some("srv".into()),
        timeout_ms: None,
    }
}

fn tools_changed_sent(fx: &[Effect]) -> Vec<Vec<String>> {
    sent(fx)
        .into_iter()
        .filter_map(|m| match m {
            Message::ToolsChanged(t) => Some(t.tools.into_iter().map(|t| t.name).collect()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_new_catalogue_reaches_a_version_2_assistant_and_the_cards() {
    let mut m = machine();
    let fx = m.handle(
        Input::Joined {
            assistant: Some(A.into()),
        },
        0,
    );
    hello_of(&fx);
    let mut w = welcome("c1");
    w.protocol_version = 2;
    recv(&mut m, w, 10);
    let mut claims = BTreeMap::new();
    claims.insert(
        "mcp__srv__x".to_owned(),
        ServerClaims {
            read_only: Some(true),
            ..ServerClaims::default()
        },
    );
    let fx = m.handle(
        Input::ToolsChanged {
            tools: vec![mcp_tool("mcp__srv__x")],
            claims,
        },
        20,
    );
    assert_eq!(
        tools_changed_sent(&fx),
        vec![vec!["mcp__srv__x".to_owned()]]
    );
    assert!(
        uis(&fx)
            .iter()
            .any(|u| matches!(u, UiEvent::ToolsChanged { tools } if tools == &["mcp__srv__x"]))
    );
    // The same catalogue again is no news.
    let fx = m.handle(
        Input::ToolsChanged {
            tools: vec![mcp_tool("mcp__srv__x")],
            claims: BTreeMap::new(),
        },
        21,
    );
    assert!(tools_changed_sent(&fx).is_empty());
    // A request for the MCP tool: the card and the record name the server.
    let mut req = request("t1", Execution::Client);
    req.tool_name = "mcp__srv__x".into();
    let fx = recv(&mut m, req, 30);
    assert!(uis(&fx).iter().any(|u| matches!(u,
        UiEvent::ToolCallRequested { server_name: Some(s), claims: Some(c), .. }
            if s == "srv" && c.read_only == Some(true))));
    assert!(
        records(&fx).iter().any(|r| matches!(r,
        Record::Tool(store::ToolCallEvent::Initiated { server_name, .. }) if server_name == "srv"))
    );
}

#[test]
fn a_version_1_assistant_learns_the_catalogue_at_its_next_hello_only() {
    let mut m = live();
    let fx = m.handle(
        Input::ToolsChanged {
            tools: vec![mcp_tool("mcp__srv__y")],
            claims: BTreeMap::new(),
        },
        20,
    );
    assert!(
        tools_changed_sent(&fx).is_empty(),
        "version 1 has no ToolsChanged"
    );
    let fx = m.handle(
        Input::Command(Command::SwitchConversation {
            conversation_id: None,
            history: Vec::new(),
        }),
        30,
    );
    let h = hello_of(&fx);
    assert_eq!(
        h.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["mcp__srv__y"]
    );
}

#[test]
fn a_change_while_the_welcome_is_on_its_way_is_sent_after_it() {
    let mut m = machine();
    let fx = m.handle(
        Input::Joined {
            assistant: Some(A.into()),
        },
        0,
    );
    assert!(hello_of(&fx).tools.is_empty());
    let fx = m.handle(
        Input::ToolsChanged {
            tools: vec![mcp_tool("mcp__srv__z")],
            claims: BTreeMap::new(),
        },
        5,
    );
    assert!(
        tools_changed_sent(&fx).is_empty(),
        "nothing before the welcome"
    );
    let mut w = welcome("c1");
    w.protocol_version = 2;
    let fx = recv(&mut m, w, 10);
    assert_eq!(
        tools_changed_sent(&fx),
        vec![vec!["mcp__srv__z".to_owned()]]
    );
}

#[test]
fn hello_waits_for_link_and_assistant() {
    let mut m = machine();
    let fx = m.handle(Input::Joined { assistant: None }, 0);
    assert!(sent(&fx).is_empty(), "no hello without an assistant");
    let fx = m.handle(Input::AssistantJoined { identity: A.into() }, 1);
    let h = hello_of(&fx);
    assert_eq!(h.conversation_id, None);
    assert_eq!(h.protocol_version, PROTOCOL_VERSION);
    // The same assistant announced again does not cause a second hello.
    let fx = m.handle(Input::AssistantJoined { identity: A.into() }, 2);
    assert!(sent(&fx).is_empty());
}

#[test]
fn an_assistant_found_at_join_and_announced_again_is_reported_once() {
    // The room reports the assistant in the join snapshot and again as an event.
    let mut m = machine();
    let mut fx = m.handle(
        Input::Joined {
            assistant: Some(A.into()),
        },
        0,
    );
    fx.extend(m.handle(Input::AssistantJoined { identity: A.into() }, 1));
    let here: Vec<UiEvent> = uis(&fx)
        .into_iter()
        .filter(|e| matches!(e, UiEvent::AssistantPresence { present: true, .. }))
        .collect();
    assert_eq!(here.len(), 1, "{here:?}");
    // After it left, its return is news again.
    let mut fx = m.handle(Input::AssistantLeft { identity: A.into() }, 2);
    fx.extend(m.handle(Input::AssistantJoined { identity: A.into() }, 3));
    let presence: Vec<UiEvent> = uis(&fx)
        .into_iter()
        .filter(|e| matches!(e, UiEvent::AssistantPresence { .. }))
        .collect();
    assert_eq!(presence.len(), 2, "{presence:?}");
}

#[test]
fn welcome_starts_the_conversation_and_flushes_held_messages_in_order() {
    let mut m = machine();
    m.handle(
        Input::Joined {
            assistant: Some(A.into()),
        },
        0,
    );
    let fx = m.handle(
        Input::Command(Command::SendUserMessage {
            id: "u1".into(),
            text: "first".into(),
            attachments: Vec::new(),
        }),
        1,
    );
    assert!(sent(&fx).is_empty(), "nothing but hello before the welcome");
    assert!(matches!(
        uis(&fx)[0],
        UiEvent::UserMessage { queued: true, .. }
    ));
    m.handle(
        Input::Command(Command::SendUserMessage {
            id: "u2".into(),
            text: "second".into(),
            attachments: Vec::new(),
        }),
        2,
    );
    assert_eq!(m.held(), 2);
    let fx = recv(&mut m, welcome("c1"), 3);
    let ids: Vec<String> = sent(&fx)
        .into_iter()
        .map(|m| match m {
            Message::UserMessage(u) => u.id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ids, ["u1", "u2"]);
    let recs = records(&fx);
    assert!(matches!(&recs[0], Record::Conversation(c) if c.id.as_str() == "c1"));
    assert!(
        recs.iter()
            .filter(|r| matches!(r, Record::Message(msg) if msg.role == store::Role::User))
            .count()
            == 2
    );
    assert!(uis(&fx).iter().any(
        |u| matches!(u, UiEvent::SessionStarted { conversation_id, .. } if conversation_id == "c1")
    ));
    assert_eq!(m.conversation_id(), Some("c1"));
}

#[test]
fn client_messages_from_the_server_are_unexpected() {
    let mut m = live();
    let fx = recv(
        &mut m,
        UserMessage {
            id: "x1".into(),
            text: "hi".into(),
        },
        20,
    );
    let e = error_of(&fx);
    assert_eq!(e.code, ProtocolErrorCode::UnexpectedMessage);
    assert_eq!(e.message, "UserMessage is not expected from the server");
    assert_eq!(e.ref_id.as_deref(), Some("x1"));
    assert!(matches!(&records(&fx)[0], Record::ProtocolError(p) if p.code == "unexpected_message"));
    let fx = recv(&mut m, ClientHello::new("x", "1", Vec::new()), 21);
    assert_eq!(
        error_of(&fx).message,
        "ClientHello is not expected from the server"
    );
}

#[test]
fn messages_before_the_welcome_are_unexpected_and_not_acted_on() {
    let mut m = machine();
    m.handle(
        Input::Joined {
            assistant: Some(A.into()),
        },
        0,
    );
    let fx = recv(&mut m, request("t1", Execution::Client), 1);
    let e = error_of(&fx);
    assert_eq!(
        e.message,
        "ToolUseRequest is not expected from the server now"
    );
    assert_eq!(e.ref_id.as_deref(), Some("t1"));
    assert!(!fx.iter().any(|e| matches!(e, Effect::RunTool { .. })));
    // A welcome without a hello outstanding is unexpected too.
    let mut m = live();
    let fx = recv(&mut m, welcome("c2"), 30);
    assert_eq!(
        error_of(&fx).message,
        "ServerWelcome is not expected from the server now"
    );
    assert_eq!(m.conversation_id(), Some("c1"));
}

#[test]
fn undecodable_bytes_get_the_codec_error_with_the_ref_id() {
    let mut m = live();
    // A ToolUseRequest without `execution`.
    let mut bad = bytes(request("t9", Execution::Client));
    let json = {
        let mut v = outpost_protocol::to_json(&outpost_protocol::decode(&bad).unwrap());
        v.as_object_mut().unwrap().remove("execution");
        v
    };
    bad = rmp_like(&json);
    let fx = m.handle(
        Input::Received {
            sender: A.into(),
            bytes: bad,
        },
        40,
    );
    let e = error_of(&fx);
    assert_eq!(e.code, ProtocolErrorCode::MissingField);
    assert_eq!(
        e.message,
        "ToolUseRequest is missing required field `execution`"
    );
    assert_eq!(e.ref_id.as_deref(), Some("t9"));
    assert_eq!(e.message_type, Some(6));
    assert!(!fx.iter().any(|e| matches!(e, Effect::RunTool { .. })));

    let fx = m.handle(
        Input::Received {
            sender: A.into(),
            bytes: vec![0x81, 0xa4],
        },
        41,
    );
    assert_eq!(error_of(&fx).code, ProtocolErrorCode::MalformedMessage);
}

/// Hand-written MessagePack for a JSON object of strings, ints and maps (enough here).
fn rmp_like(v: &Value) -> Vec<u8> {
    fn put(out: &mut Vec<u8>, v: &Value) {
        match v {
            Value::Object(m) => {
                out.push(0xde);
                out.extend_from_slice(&u16::try_from(m.len()).unwrap().to_be_bytes());
                for (k, v) in m {
                    put(out, &Value::String(k.clone()));
                    put(out, v);
                }
            }
            Value::String(s) => {
                out.push(0xda);
                out.extend_from_slice(&u16::try_from(s.len()).unwrap().to_be_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            Value::Number(n) => {
                out.push(0xcf);
                out.extend_from_slice(&n.as_u64().unwrap().to_be_bytes());
            }
            Value::Bool(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
            Value::Null => out.push(0xc0),
            Value::Array(a) => {
                out.push(0xdc);
                out.extend_from_slice(&u16::try_from(a.len()).unwrap().to_be_bytes());
                for x in a {
                    put(out, x);
                }
            }
        }
    }
    let mut out = Vec::new();
    put(&mut out, v);
    out
}

#[test]
fn broken_error_messages_are_recorded_not_answered() {
    let mut m = live();
    // type 1 without `message`.
    let raw = rmp_like(&serde_json::json!({"type": 1, "code": "internal_error"}));
    let fx = m.handle(
        Input::Received {
            sender: A.into(),
            bytes: raw,
        },
        50,
    );
    assert!(sent(&fx).is_empty(), "{fx:?}");
    assert!(matches!(&records(&fx)[0], Record::ProtocolError(_)));
}

#[test]
fn other_participants_are_ignored() {
    let mut m = live();
    let fx = m.handle(
        Input::Received {
            sender: "mallory".into(),
            bytes: bytes(request("t1", Execution::Client)),
        },
        60,
    );
    assert!(fx.is_empty());
    let fx = m.handle(
        Input::Received {
            sender: "mallory".into(),
            bytes: vec![1, 2, 3],
        },
        61,
    );
    assert!(fx.is_empty(), "garbage from others is not answered either");
}

#[test]
fn a_welcome_outside_our_versions_ends_the_session() {
    let mut m = machine();
    m.handle(
        Input::Joined {
            assistant: Some(A.into()),
        },
        0,
    );
    let mut w = welcome("c1");
    w.protocol_version = 7;
    let fx = recv(&mut m, w, 1);
    let e = error_of(&fx);
    assert_eq!(e.code, ProtocolErrorCode::UnsupportedVersion);
    assert!(e.fatal);
    assert_eq!(
        e.message,
        "no common protocol version: client speaks 1..=2, server speaks 7..=7"
    );
    assert!(fx.iter().any(|e| matches!(e, Effect::Leave { .. })));
    assert!(m.is_ended());
}

#[test]
fn a_fatal_error_from_the_assistant_ends_the_session() {
    let mut m = live();
    let mut e = ErrorMessage::new(ProtocolErrorCode::InternalError, "model crashed");
    e.fatal = true;
    let fx = recv(&mut m, e, 70);
    assert!(fx.iter().any(|e| matches!(e, Effect::Leave { .. })));
    assert!(
        sent(&fx).is_empty(),
        "errors are never answered with errors"
    );
    assert!(
        records(&fx)
            .iter()
            .any(|r| matches!(r, Record::EndConversation { .. }))
    );
}

#[test]
fn client_requests_run_once_and_duplicates_go_to_the_executor_without_a_second_record() {
    let mut m = live();
    let fx = recv(&mut m, request("t1", Execution::Client), 100);
    assert!(
        matches!(&records(&fx)[0], Record::Tool(store::ToolCallEvent::Initiated { id, .. }) if id == "t1")
    );
    assert_eq!(
        fx.iter()
            .filter(|e| matches!(e, Effect::RunTool { .. }))
            .count(),
        1
    );
    let fx = recv(&mut m, request("t1", Execution::Client), 101);
    assert!(records(&fx).is_empty(), "no second Initiated");
    assert_eq!(
        fx.iter()
            .filter(|e| matches!(e, Effect::RunTool { .. }))
            .count(),
        1,
        "the executor decides: ignore in flight, resend when finished"
    );
    let fx = m.handle(Input::Exec(ExecEvent::Result(ok("t1"))), 102);
    assert!(
        matches!(&records(&fx)[0], Record::Tool(store::ToolCallEvent::Completed { id, executed_by: Some(store::Executor::Client), .. }) if id == "t1")
    );
    assert_eq!(sent(&fx), vec![Message::ToolUseResult(ok("t1"))]);
    // The executor's resend of the same result for a later duplicate: sent, not recorded.
    let fx = m.handle(Input::Exec(ExecEvent::Result(ok("t1"))), 103);
    assert!(records(&fx).is_empty());
    assert_eq!(sent(&fx).len(), 1);
}

#[test]
fn server_requests_are_shown_and_never_run() {
    let mut m = live();
    let fx = recv(&mut m, request("s1", Execution::Server), 100);
    assert!(!fx.iter().any(|e| matches!(e, Effect::RunTool { .. })));
    assert!(sent(&fx).is_empty());
    let fx = recv(
        &mut m,
        ToolUseProgress {
            id: "s1".into(),
            state: ProgressState::Running,
            detail: None,
        },
        101,
    );
    assert!(matches!(
        &records(&fx)[0],
        Record::Tool(store::ToolCallEvent::Running {
            executed_by: store::Executor::Server,
            ..
        })
    ));
    let fx = recv(&mut m, ok("s1"), 102);
    assert!(sent(&fx).is_empty(), "the client sends nothing back");
    assert!(matches!(
        &records(&fx)[0],
        Record::Tool(store::ToolCallEvent::Completed {
            executed_by: Some(store::Executor::Server),
            ..
        })
    ));
    assert!(uis(&fx).iter().any(|u| matches!(
        u,
        UiEvent::ToolCallFinished {
            executed_by: Side::Server,
            ..
        }
    )));
    // A cancel for a server call is not ours to act on.
    let fx = recv(
        &mut m,
        ToolUseCancel {
            id: "s1".into(),
            reason: None,
        },
        103,
    );
    assert!(!fx.iter().any(|e| matches!(e, Effect::CancelTool(_))));
}

/// The status each tool-call event carries, in order.
fn statuses(fx: &[Effect]) -> Vec<ToolCallStatus> {
    uis(fx)
        .iter()
        .filter_map(|u| match u {
            UiEvent::ToolCallProgress { status, .. } | UiEvent::ToolCallFinished { status, .. } => {
                Some(*status)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn the_machine_gives_every_tool_call_event_its_status() {
    let mut m = live();
    // A client call: consent, running, then the result's status.
    recv(&mut m, request("t1", Execution::Client), 100);
    let progress = |id: &str, state| {
        Input::Exec(ExecEvent::Progress(ToolUseProgress {
            id: id.into(),
            state,
            detail: None,
        }))
    };
    let fx = m.handle(progress("t1", ProgressState::AwaitingConsent), 101);
    assert_eq!(statuses(&fx), [ToolCallStatus::AwaitingConsent]);
    let fx = m.handle(progress("t1", ProgressState::Running), 102);
    assert_eq!(statuses(&fx), [ToolCallStatus::Running]);
    let fx = m.handle(
        Input::Exec(ExecEvent::Result(ToolUseResult::timeout("t1", 30_000))),
        103,
    );
    assert_eq!(statuses(&fx), [ToolCallStatus::Timeout]);
    let UiEvent::ToolCallFinished { error_code, .. } = &uis(&fx)[0] else {
        panic!("{fx:?}")
    };
    assert_eq!(
        error_code,
        &Some(ToolErrorCode::Timeout),
        "a type, not a string"
    );
    assert!(
        matches!(
            &records(&fx)[..],
            [Record::Tool(store::ToolCallEvent::Failed {
                status: store::CallStatus::Timeout,
                ..
            })]
        ),
        "the store is given the status the machine decided: {fx:?}"
    );

    // A server call: a consent report after running leaves it running; its result ends
    // it; a report after the end shows the end.
    recv(&mut m, request("s1", Execution::Server), 110);
    let report = |state| ToolUseProgress {
        id: "s1".into(),
        state,
        detail: None,
    };
    let fx = recv(&mut m, report(ProgressState::Running), 111);
    assert_eq!(statuses(&fx), [ToolCallStatus::Running]);
    let fx = recv(&mut m, report(ProgressState::AwaitingConsent), 112);
    assert_eq!(statuses(&fx), [ToolCallStatus::Running]);
    assert!(records(&fx).is_empty(), "not recorded as waiting again");
    let fx = recv(
        &mut m,
        ToolUseResult::permission_denied("s1", "the user", "no"),
        113,
    );
    assert_eq!(statuses(&fx), [ToolCallStatus::Denied]);
    assert!(
        matches!(
            &records(&fx)[..],
            [Record::Tool(store::ToolCallEvent::Failed {
                status: store::CallStatus::Denied,
                ..
            })]
        ),
        "{fx:?}"
    );
    let fx = recv(&mut m, report(ProgressState::Running), 114);
    assert_eq!(statuses(&fx), [ToolCallStatus::Denied]);

    // A result for a call never seen, and each failure code's status.
    let fx = recv(&mut m, ToolUseResult::cancelled("x9"), 120);
    assert_eq!(statuses(&fx), [ToolCallStatus::Cancelled]);
    for (code, status) in [
        (ToolErrorCode::UnknownTool, ToolCallStatus::Error),
        (ToolErrorCode::InvalidParameters, ToolCallStatus::Error),
        (ToolErrorCode::ExecutionError, ToolCallStatus::Error),
        (ToolErrorCode::from("custom_code"), ToolCallStatus::Error),
        (ToolErrorCode::Timeout, ToolCallStatus::Timeout),
        (ToolErrorCode::PermissionDenied, ToolCallStatus::Denied),
        (ToolErrorCode::Cancelled, ToolCallStatus::Cancelled),
    ] {
        assert_eq!(ToolCallStatus::of_result(false, Some(&code)), status);
        assert!(status.is_final());
    }
    assert_eq!(
        ToolCallStatus::of_result(false, None),
        ToolCallStatus::Error
    );
    assert_eq!(
        ToolCallStatus::of_result(true, Some(&ToolErrorCode::Timeout)),
        ToolCallStatus::Completed
    );
}

#[test]
fn declined_either_calls_are_handed_to_the_server() {
    let mut m = live();
    recv(&mut m, request("e1", Execution::Either), 100);
    let fx = m.handle(
        Input::Exec(ExecEvent::Result(ToolUseResult::unknown_tool(
            "e1",
            "read_local_file",
        ))),
        101,
    );
    assert!(records(&fx).is_empty(), "not final: the server runs it");
    assert_eq!(sent(&fx).len(), 1, "the unknown_tool answer goes out");
    assert!(
        uis(&fx)
            .iter()
            .any(|u| matches!(u, UiEvent::ToolCallHandedToServer { .. }))
    );
    let fx = recv(&mut m, ok("e1"), 102);
    assert!(matches!(
        &records(&fx)[0],
        Record::Tool(store::ToolCallEvent::Completed {
            executed_by: Some(store::Executor::Server),
            ..
        })
    ));
}

#[test]
fn cancels_reach_the_executor_only_for_calls_in_flight() {
    let mut m = live();
    recv(&mut m, request("t1", Execution::Client), 100);
    let cancel = ToolUseCancel {
        id: "t1".into(),
        reason: Some("user moved on".into()),
    };
    let fx = recv(&mut m, cancel.clone(), 101);
    assert_eq!(
        fx.iter()
            .filter(|e| matches!(e, Effect::CancelTool(_)))
            .count(),
        1
    );
    m.handle(
        Input::Exec(ExecEvent::Result(ToolUseResult::cancelled("t1"))),
        102,
    );
    let fx = recv(&mut m, cancel, 103);
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::CancelTool(_))),
        "finished: ignored"
    );
    let fx = recv(
        &mut m,
        ToolUseCancel {
            id: "nope".into(),
            reason: None,
        },
        104,
    );
    assert!(!fx.iter().any(|e| matches!(e, Effect::CancelTool(_))));
    assert!(
        sent(&fx).is_empty(),
        "unknown ids are ignored, not answered"
    );
}

#[test]
fn a_user_cancel_is_reported_as_the_users_denial() {
    let mut m = live();
    recv(&mut m, request("t1", Execution::Client), 100);
    let fx = m.handle(Input::Command(Command::CancelTool { id: "t1".into() }), 101);
    assert!(fx.iter().any(|e| matches!(e, Effect::CancelTool(_))));
    let fx = m.handle(
        Input::Exec(ExecEvent::Result(ToolUseResult::cancelled("t1"))),
        102,
    );
    let Message::ToolUseResult(r) = &sent(&fx)[0] else {
        panic!()
    };
    assert_eq!(r.error_code, Some(ToolErrorCode::PermissionDenied));
    assert_eq!(
        r.error_message.as_deref(),
        Some("Permission denied by the user: the user stopped this call")
    );
}

#[test]
fn results_produced_while_disconnected_go_out_once_after_the_rejoin() {
    let mut m = live();
    recv(&mut m, request("t1", Execution::Client), 100);
    m.handle(
        Input::Reconnecting {
            reason: "link lost".into(),
        },
        200,
    );
    let fx = m.handle(Input::Exec(ExecEvent::Result(ok("t1"))), 300);
    assert!(sent(&fx).is_empty(), "held while the link is down");
    assert!(matches!(
        &records(&fx)[0],
        Record::Tool(store::ToolCallEvent::Completed { .. })
    ));
    // Full rejoin: hello again for the same conversation, result after the welcome.
    let fx = m.handle(
        Input::Reconnected {
            resumed: false,
            assistant_changed: false,
        },
        400,
    );
    assert_eq!(hello_of(&fx).conversation_id.as_deref(), Some("c1"));
    assert_eq!(sent(&fx).len(), 1, "only the hello before the welcome");
    let fx = recv(&mut m, welcome("c1"), 410);
    let results: Vec<_> = sent(&fx)
        .into_iter()
        .filter(|m| matches!(m, Message::ToolUseResult(_)))
        .collect();
    assert_eq!(results, vec![Message::ToolUseResult(ok("t1"))]);
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::RunTool { .. })),
        "never re-run"
    );
    // The assistant repeats the request after its own restart: the executor answers
    // from its memory; the machine does not record the call again.
    let fx = recv(&mut m, request("t1", Execution::Client), 420);
    assert!(records(&fx).is_empty());
}

#[test]
fn results_sent_just_before_a_loss_are_sent_once_more_after_the_welcome() {
    let mut m = live();
    recv(&mut m, request("t1", Execution::Client), 100);
    recv(&mut m, request("t2", Execution::Client), 100);
    m.handle(Input::Exec(ExecEvent::Result(ok("t1"))), 1_000);
    m.handle(Input::Exec(ExecEvent::Result(ok("t2"))), 9_000);
    // t1 was sent 9 s before the loss (delivered long ago); t2 1 s before.
    m.handle(Input::Tick, 9_500);
    m.handle(Input::AssistantLeft { identity: A.into() }, 10_000);
    let fx = m.handle(Input::AssistantJoined { identity: A.into() }, 12_000);
    assert_eq!(hello_of(&fx).conversation_id.as_deref(), Some("c1"));
    let fx = recv(&mut m, welcome("c1"), 12_100);
    assert_eq!(sent(&fx), vec![Message::ToolUseResult(ok("t2"))]);
    // Once only: a later loss does not resend it again unless sent recently.
    m.handle(Input::Reconnecting { reason: "x".into() }, 30_000);
    m.handle(
        Input::Reconnected {
            resumed: false,
            assistant_changed: true,
        },
        31_000,
    );
    let fx = recv(&mut m, welcome("c1"), 31_100);
    assert!(sent(&fx).is_empty());
}

#[test]
fn after_a_link_drop_with_the_same_assistant_results_are_not_sent_twice() {
    let mut m = live();
    recv(&mut m, request("t1", Execution::Client), 100);
    m.handle(Input::Exec(ExecEvent::Result(ok("t1"))), 1_000);
    // LiveKit noticed the loss 3 s later; it resends what SCTP had not acknowledged.
    m.handle(
        Input::Reconnecting {
            reason: "ping timeout".into(),
        },
        4_000,
    );
    let fx = m.handle(
        Input::Reconnected {
            resumed: false,
            assistant_changed: false,
        },
        9_000,
    );
    hello_of(&fx);
    let fx = recv(&mut m, welcome("c1"), 9_100);
    assert!(sent(&fx).is_empty(), "{fx:?}");
}

#[test]
fn after_a_server_restart_recent_results_are_sent_again() {
    let mut m = live();
    recv(&mut m, request("t1", Execution::Client), 100);
    m.handle(Input::Exec(ExecEvent::Result(ok("t1"))), 1_000);
    m.handle(
        Input::Reconnecting {
            reason: "server gone".into(),
        },
        4_000,
    );
    // Ticks while the link is down do not age the results out.
    m.handle(Input::Tick, 8_000);
    m.handle(
        Input::Reconnected {
            resumed: false,
            assistant_changed: true,
        },
        9_000,
    );
    let fx = recv(&mut m, welcome("c1"), 9_100);
    assert_eq!(sent(&fx), vec![Message::ToolUseResult(ok("t1"))]);
}

#[test]
fn a_resume_flushes_without_a_new_hello() {
    let mut m = live();
    m.handle(Input::Reconnecting { reason: "x".into() }, 100);
    m.handle(
        Input::Command(Command::SendUserMessage {
            id: "u1".into(),
            text: "hi".into(),
            attachments: Vec::new(),
        }),
        110,
    );
    let fx = m.handle(
        Input::Reconnected {
            resumed: true,
            assistant_changed: false,
        },
        120,
    );
    let msgs = sent(&fx);
    assert_eq!(msgs.len(), 1);
    assert!(matches!(&msgs[0], Message::UserMessage(u) if u.id == "u1"));
}

#[test]
fn deltas_replayed_after_a_reconnect_are_ignored_and_the_final_text_wins() {
    let mut m = live();
    let d = |seq: u32, text: &str| AssistantDelta {
        message_id: "a1".into(),
        seq,
        delta: text.into(),
    };
    assert_eq!(uis(&recv(&mut m, d(0, "Hel"), 1)).len(), 1);
    assert_eq!(uis(&recv(&mut m, d(1, "lo"), 2)).len(), 1);
    assert!(recv(&mut m, d(1, "lo"), 3).is_empty(), "replay ignored");
    assert_eq!(uis(&recv(&mut m, d(3, "!"), 4)).len(), 1, "gap tolerated");
    let fx = recv(
        &mut m,
        AssistantMessage {
            id: "a1".into(),
            text: "Hello!".into(),
            in_reply_to: None,
        },
        5,
    );
    assert!(
        matches!(&records(&fx)[0], Record::Message(msg) if msg.text == "Hello!" && msg.role == store::Role::Assistant)
    );
}

#[test]
fn status_is_recorded_and_shown() {
    let mut m = live();
    let fx = recv(
        &mut m,
        AssistantStatus {
            state: AssistantState::UsingTool,
            tool_use_id: Some("t1".into()),
            detail: None,
        },
        5,
    );
    assert!(matches!(&records(&fx)[0], Record::Status(s) if s.status == "using_tool"));
    assert!(matches!(
        &uis(&fx)[0],
        UiEvent::Status {
            state: AssistantState::UsingTool,
            ..
        }
    ));
}

#[test]
fn hello_is_repeated_when_no_welcome_comes() {
    let mut m = machine();
    m.handle(
        Input::Joined {
            assistant: Some(A.into()),
        },
        0,
    );
    assert!(sent(&m.handle(Input::Tick, 4_000)).is_empty());
    hello_of(&m.handle(Input::Tick, 5_000));
}

#[test]
fn switching_conversations_sends_a_new_hello() {
    let mut m = live();
    let fx = m.handle(
        Input::Command(Command::SwitchConversation {
            conversation_id: Some("old".into()),
            history: Vec::new(),
        }),
        100,
    );
    assert_eq!(hello_of(&fx).conversation_id.as_deref(), Some("old"));
    assert!(matches!(&records(&fx)[0], Record::EndConversation { id, .. } if id.as_str() == "c1"));
    assert!(!m.is_ready());
    recv(&mut m, welcome("old"), 110);
    assert_eq!(m.conversation_id(), Some("old"));
    let fx = m.handle(
        Input::Command(Command::SwitchConversation {
            conversation_id: None,
            history: Vec::new(),
        }),
        120,
    );
    assert_eq!(hello_of(&fx).conversation_id, None);
}

fn said(role: outpost_protocol::HistoryRole, text: &str) -> outpost_protocol::HistoryMessage {
    outpost_protocol::HistoryMessage {
        role,
        text: text.into(),
    }
}

/// Continuing a stored conversation: the hello carries what was said, once; a rejoin's
/// hello does not repeat it.
#[test]
fn continuing_a_stored_conversation_tells_the_assistant_what_was_said_once() {
    use outpost_protocol::HistoryRole::{Assistant, User};
    let mut m = live();
    let earlier = vec![said(User, "remember the otter"), said(Assistant, "Noted.")];
    let fx = m.handle(
        Input::Command(Command::SwitchConversation {
            conversation_id: Some("stored".into()),
            history: earlier.clone(),
        }),
        100,
    );
    let hello = hello_of(&fx);
    assert_eq!(hello.conversation_id.as_deref(), Some("stored"));
    assert_eq!(hello.history, earlier);
    // A hello repeated while no welcome came still carries it.
    assert_eq!(hello_of(&m.handle(Input::Tick, 5_200)).history, earlier);
    let fx = recv(&mut m, welcome("stored"), 5_300);
    assert!(
        !uis(&fx).iter().any(|u| matches!(u, UiEvent::Error { .. })),
        "{fx:?}"
    );
    assert_eq!(m.conversation_id(), Some("stored"));
    // A full rejoin: the hello names the conversation without its history.
    m.handle(
        Input::Reconnecting {
            reason: "lost".into(),
        },
        6_000,
    );
    let fx = m.handle(
        Input::Reconnected {
            resumed: false,
            assistant_changed: false,
        },
        7_000,
    );
    let hello = hello_of(&fx);
    assert_eq!(hello.conversation_id.as_deref(), Some("stored"));
    assert!(hello.history.is_empty(), "{hello:?}");
}

/// An assistant that opens another conversation instead of the one the user picked: the
/// app follows it, and the user is told.
#[test]
fn an_assistant_that_does_not_continue_is_followed_and_the_user_told() {
    let mut m = live();
    m.handle(
        Input::Command(Command::SwitchConversation {
            conversation_id: Some("stored".into()),
            history: vec![said(outpost_protocol::HistoryRole::User, "hi")],
        }),
        100,
    );
    let fx = recv(&mut m, welcome("fresh"), 110);
    assert_eq!(m.conversation_id(), Some("fresh"));
    let told = uis(&fx).into_iter().any(|u| {
        matches!(u, UiEvent::Error { message } if message.contains("did not continue the conversation you picked"))
    });
    assert!(told, "{fx:?}");
}

#[test]
fn oversized_streams_are_answered_with_message_too_large() {
    let mut m = live();
    let fx = m.handle(
        Input::TooLarge {
            sender: A.into(),
            size: 70_000_000,
        },
        1,
    );
    let e = error_of(&fx);
    assert_eq!(e.code, ProtocolErrorCode::MessageTooLarge);
    assert_eq!(
        e.message,
        "message of 70000000 bytes exceeds the limit of 67108864 bytes"
    );
}

/// Each decider is recorded as itself: a policy rule is not a user's "always" answer,
/// and a consent timeout is not a policy decision.
#[test]
fn each_decider_is_recorded_as_itself() {
    let cases = [
        (false, Decider::Policy, None, store::DecidedBy::Policy),
        (true, Decider::Policy, None, store::DecidedBy::Policy),
        (
            false,
            Decider::SecretsList,
            None,
            store::DecidedBy::SecretsList,
        ),
        (
            true,
            Decider::ConversationGrant,
            None,
            store::DecidedBy::ConversationGrant,
        ),
        (
            false,
            Decider::ConsentTimeout,
            None,
            store::DecidedBy::ConsentTimeout,
        ),
        (
            false,
            Decider::NoConsentUi,
            None,
            store::DecidedBy::NoConsentUi,
        ),
        (
            true,
            Decider::User,
            Some(Decision::AllowForConversation),
            store::DecidedBy::User,
        ),
        (
            false,
            Decider::User,
            Some(Decision::AlwaysDeny),
            store::DecidedBy::User,
        ),
    ];
    for (i, (allowed, by, decision, want_by)) in cases.into_iter().enumerate() {
        let mut m = live();
        let id = format!("t{i}");
        recv(&mut m, request(&id, Execution::Client), 1);
        let fx = m.handle(
            Input::Exec(ExecEvent::Decided {
                request_id: id.clone(),
                allowed,
                by,
                reason: "why".into(),
                decision,
            }),
            2,
        );
        let Record::Consent(c) = &records(&fx)[0] else {
            panic!("no consent record for {by:?}");
        };
        assert_eq!(c.decided_by, want_by, "{by:?}");
        assert_eq!(c.decision, decision.map(store_decision), "{by:?}");
        let outcome = if allowed {
            store::Outcome::Allowed
        } else {
            store::Outcome::Denied
        };
        assert_eq!(c.outcome, outcome, "{by:?}");
    }
}

#[test]
fn a_failed_always_answer_is_shown_to_the_user() {
    let mut m = live();
    recv(&mut m, request("t1", Execution::Client), 1);
    let fx = m.handle(
        Input::Exec(ExecEvent::PolicyWriteFailed {
            request_id: "t1".into(),
            decision: Decision::AlwaysAllow,
            message: "read-only file system".into(),
        }),
        2,
    );
    assert!(
        uis(&fx)
            .iter()
            .any(|e| matches!(e, UiEvent::Error { message }
            if message.contains("Always allow") && message.contains("read-only file system"))),
        "{fx:?}"
    );
}

/// Text the assistant streams after a tool call shows below that call's card, live
/// and in the history: the message continues in a new segment.
#[test]
fn text_after_a_tool_call_goes_below_its_card() {
    let mut m = live();
    let delta = |seq: u32, text: &str| AssistantDelta {
        message_id: "a1".into(),
        seq,
        delta: text.into(),
    };
    let mut fx = recv(&mut m, delta(0, "Let me read it. "), 1);
    fx.extend(recv(&mut m, request("t1", Execution::Client), 2));
    fx.extend(recv(&mut m, delta(1, "It says "), 3));
    fx.extend(recv(&mut m, delta(2, "hi."), 4));
    fx.extend(recv(
        &mut m,
        AssistantMessage {
            id: "a1".into(),
            text: "Let me read it. It says hi.".into(),
            in_reply_to: None,
        },
        5,
    ));
    let order: Vec<String> = uis(&fx)
        .into_iter()
        .filter_map(|e| match e {
            UiEvent::AssistantDelta {
                message_id, delta, ..
            } => Some(format!("delta {message_id}: {delta}")),
            UiEvent::ToolCallRequested { id, .. } => Some(format!("card {id}")),
            UiEvent::AssistantMessage { id, text, .. } => Some(format!("final {id}: {text}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        order,
        [
            "delta a1: Let me read it. ",
            "card t1",
            "delta a1~2: It says ",
            "delta a1~2: hi.",
            "final a1: Let me read it. ",
            "final a1~2: It says hi.",
        ]
    );
    // The history gets the same two messages; the second is created after the call.
    let stored: Vec<String> = records(&fx)
        .into_iter()
        .filter_map(|r| match r {
            Record::Delta(d) => Some(format!("delta {}", d.id)),
            Record::Tool(store::ToolCallEvent::Initiated { id, .. }) => Some(format!("call {id}")),
            Record::Message(msg) => Some(format!("message {}: {}", msg.id, msg.text)),
            _ => None,
        })
        .collect();
    assert_eq!(
        stored,
        [
            "delta a1",
            "call t1",
            "delta a1~2",
            "delta a1~2",
            "message a1: Let me read it. ",
            "message a1~2: It says hi.",
        ]
    );
}

fn seg(id: &str, said: &str) -> Segment {
    Segment {
        id: id.into(),
        len: said.len(),
        said: said.into(),
    }
}

#[test]
fn a_rewritten_final_text_goes_to_the_first_segment() {
    let parts = split_final(
        "Something else entirely",
        &[seg("a", "abcde"), seg("a~2", "fg")],
    );
    assert_eq!(
        parts,
        [
            ("a".to_owned(), "Something else entirely".to_owned()),
            ("a~2".to_owned(), String::new())
        ]
    );
    let parts = split_final("abcdefgh", &[seg("a", "abcde"), seg("a~2", "fg")]);
    assert_eq!(
        parts,
        [
            ("a".to_owned(), "abcde".to_owned()),
            ("a~2".to_owned(), "fgh".to_owned())
        ]
    );
}

fn scope_of(fx: &[Effect]) -> String {
    fx.iter()
        .find_map(|e| match e {
            Effect::RunTool { grant_scope, .. } => Some(grant_scope.clone()),
            _ => None,
        })
        .expect("a RunTool effect")
}

/// "Allow for this conversation" must not survive a new conversation that the
/// assistant gives the old id, nor pass to another assistant.
#[test]
fn grant_scopes_change_with_the_conversation_and_the_assistant() {
    let mut m = live();
    let first = scope_of(&recv(&mut m, request("t1", Execution::Client), 1));
    assert_eq!(
        scope_of(&recv(&mut m, request("t2", Execution::Client), 2)),
        first,
        "same conversation, same assistant: same scope"
    );
    // New conversation; the assistant answers with the old id.
    m.handle(
        Input::Command(Command::SwitchConversation {
            conversation_id: None,
            history: Vec::new(),
        }),
        3,
    );
    recv(&mut m, welcome("c1"), 4);
    let after_switch = scope_of(&recv(&mut m, request("t3", Execution::Client), 5));
    assert_ne!(after_switch, first);
    // Another agent takes over.
    m.handle(Input::AssistantLeft { identity: A.into() }, 6);
    m.handle(
        Input::AssistantJoined {
            identity: "agent-2".into(),
        },
        7,
    );
    let fx = m.handle(
        Input::Received {
            sender: "agent-2".into(),
            bytes: bytes(welcome("c1")),
        },
        8,
    );
    assert!(!fx.is_empty());
    let fx = m.handle(
        Input::Received {
            sender: "agent-2".into(),
            bytes: bytes(request("t4", Execution::Client)),
        },
        9,
    );
    let other = scope_of(&fx);
    assert_ne!(other, after_switch);
    assert_ne!(other, first);
}

#[test]
fn leave_ends_and_records_the_end() {
    let mut m = live();
    let fx = m.handle(Input::Command(Command::Leave), 5);
    assert!(fx.iter().any(|e| matches!(e, Effect::Leave { .. })));
    assert!(matches!(&records(&fx)[0], Record::EndConversation { .. }));
    assert!(m.is_ended());
    assert!(
        uis(&fx)
            .iter()
            .any(|u| matches!(u, UiEvent::Ended { asked: true, .. })),
        "{fx:?}"
    );
    // A link lost is an end nobody asked for.
    let mut m = live();
    let fx = m.handle(
        Input::Disconnected {
            reason: "left the room".into(),
        },
        5,
    );
    assert!(
        uis(&fx)
            .iter()
            .any(|u| matches!(u, UiEvent::Ended { asked: false, .. })),
        "{fx:?}"
    );
    // After the end, a late result is still recorded but not sent.
    let mut m = live();
    recv(&mut m, request("t1", Execution::Client), 1);
    m.handle(Input::Command(Command::Leave), 2);
    let fx = m.handle(Input::Exec(ExecEvent::Result(ok("t1"))), 3);
    assert!(sent(&fx).is_empty());
    assert_eq!(records(&fx).len(), 1);
}

fn attached(name: &str, mime: &str, bytes: &[u8]) -> outpost_protocol::Attachment {
    outpost_protocol::Attachment::new(format!("a-{name}"), "u1", name, mime, bytes)
}

fn send_with(
    m: &mut Machine,
    files: Vec<outpost_protocol::Attachment>,
    now: Millis,
) -> Vec<Effect> {
    m.handle(
        Input::Command(Command::SendUserMessage {
            id: "u1".into(),
            text: "look".into(),
            attachments: files,
        }),
        now,
    )
}

/// Files go only to an assistant that announced it reads them; otherwise nothing of the
/// message leaves and the user is told.
#[test]
fn attachments_go_only_to_an_assistant_that_reads_them_before_the_words() {
    let mut m = live();
    assert!(!m.accepts_attachments());
    let fx = send_with(&mut m, vec![attached("a.png", "image/png", b"png")], 20);
    assert!(sent(&fx).is_empty(), "{fx:?}");
    assert!(records(&fx).is_empty(), "{fx:?}");
    assert!(
        uis(&fx).iter().any(
            |u| matches!(u, UiEvent::Error { message } if message.contains("nothing was sent"))
        )
    );

    let mut m = machine();
    m.handle(
        Input::Joined {
            assistant: Some(A.into()),
        },
        0,
    );
    let mut w = welcome("c1");
    w.capabilities = vec!["attachments".into()];
    let fx = recv(&mut m, w, 10);
    assert!(
        uis(&fx).iter().any(|u| matches!(
            u,
            UiEvent::SessionStarted {
                attachments: true,
                ..
            }
        )),
        "{fx:?}"
    );
    let fx = send_with(
        &mut m,
        vec![
            attached("a.png", "image/png", b"png"),
            attached("b.txt", "text/plain", b"words"),
        ],
        20,
    );
    let kinds: Vec<u8> = sent(&fx).iter().map(|s| s.message_type().code()).collect();
    assert_eq!(kinds, [13, 13, 4], "the files, then the words");
    let kept: Vec<(String, bool)> = records(&fx)
        .into_iter()
        .filter_map(|r| match r {
            Record::Attachment(a) => Some((a.name, a.data.is_some())),
            _ => None,
        })
        .collect();
    assert_eq!(
        kept,
        [("a.png".to_owned(), true), ("b.txt".to_owned(), false)],
        "the bytes of small images only"
    );
    let shown = uis(&fx).into_iter().find_map(|u| match u {
        UiEvent::UserMessage { attachments, .. } => Some(attachments),
        _ => None,
    });
    assert_eq!(shown.map(|a| a.len()), Some(2));
}
