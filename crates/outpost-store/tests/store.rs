//! The store through its public API: conversations, messages, consent and tool calls in;
//! timeline, lifecycle checks, search, audit queries, export, retention and concurrency out
//! (moved from `src/store.rs`, whose inline tests keep what needs the writer's connection).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use outpost_store::*;
use serde_json::json;

mod fixture;

use fixture::*;

/// Logs `m` and waits until it is written.
fn say(store: &Store, m: NewMessage) {
    store.log_message(m).wait().unwrap();
}

#[test]
fn timeline_merges_everything_by_time() {
    let store = Store::open_in_memory().unwrap();
    let cid = populate(&store);
    let t = store.timeline(cid).wait().unwrap();
    let kinds: Vec<&str> = t
        .items
        .iter()
        .map(|i| match i {
            TimelineItem::Message(_) => "message",
            TimelineItem::Status(_) => "status",
            TimelineItem::ToolCall(_) => "tool",
            TimelineItem::Consent(_) => "consent",
            TimelineItem::ProtocolError(_) => "error",
            TimelineItem::Attachment(_) => "attachment",
        })
        .collect();
    assert_eq!(
        kinds,
        ["message", "status", "message", "tool", "consent", "error"]
    );
    let TimelineItem::Message(m2) = &t.items[2] else {
        panic!("not a message")
    };
    assert_eq!(m2.text, "Reading it now.");
    assert_eq!(m2.role, Role::Assistant);
    assert_eq!(m2.completed_at, Some(T0 + 25));
    let TimelineItem::ToolCall(tc) = &t.items[3] else {
        panic!("not a tool call")
    };
    assert_eq!(tc.state, ToolCallState::Completed);
    assert_eq!(tc.awaiting_consent_at, Some(T0 + 31));
    assert_eq!(tc.running_at, Some(T0 + 41));
    assert_eq!(tc.finished_at, Some(T0 + 141));
    assert_eq!(tc.duration_ms, Some(100));
    assert_eq!(tc.executed_by, Some(Executor::Client));
    assert_eq!(tc.message_id.as_deref(), Some("m2"));
    assert_eq!(
        tc.arguments.value(),
        Some(&json!({"filePath": "/Users/alice/documents/notes.txt"}))
    );
    assert_eq!(
        tc.result.as_ref().and_then(|r| r.value()),
        Some(&json!({"content": "buy milk", "size": 8}))
    );
}

#[test]
fn equal_times_keep_logging_order() {
    let store = Store::open_in_memory().unwrap();
    let cid = conv(&store, "c", T0);
    for i in 0..5 {
        drop(store.log_message(msg(&cid, &format!("m{i}"), Role::User, "x", T0)));
    }
    assert_eq!(message_ids(&store, &cid), ["m0", "m1", "m2", "m3", "m4"]);
}

#[test]
fn logging_a_message_again_replaces_its_text() {
    let store = Store::open_in_memory().unwrap();
    let cid = conv(&store, "c", T0);
    say(&store, msg(&cid, "m", Role::Assistant, "partial", T0));
    say(&store, msg(&cid, "m", Role::Assistant, "final answer", T0));
    let t = store.timeline(cid).wait().unwrap();
    assert_eq!(t.items.len(), 1);
    let TimelineItem::Message(m) = &t.items[0] else {
        panic!()
    };
    assert_eq!(m.text, "final answer");
    let hits = store.search(SearchQuery::new("partial")).wait().unwrap();
    assert!(hits.is_empty(), "old text still indexed: {hits:?}");
}

#[test]
fn writes_to_unknown_conversations_fail_clearly() {
    let store = Store::open_in_memory().unwrap();
    let ghost = ConversationId::from("ghost");
    let err = store
        .log_message(msg(&ghost, "m", Role::User, "hi", T0))
        .wait()
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotFound {
                what: "conversation",
                ..
            }
        ),
        "{err}"
    );
    let err = store
        .end_conversation(ghost.clone(), T0)
        .wait()
        .unwrap_err();
    assert!(err.to_string().contains("ghost"), "{err}");
    let err = store
        .log_tool_event(initiated(&ghost, "t", "x", json!({}), T0))
        .wait()
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
}

#[test]
fn one_bad_write_does_not_sink_its_batch() {
    let store = Store::open_in_memory().unwrap();
    let cid = conv(&store, "c", T0);
    // Queue without waiting so they land in one batch.
    let good1 = store.log_message(msg(&cid, "a", Role::User, "first", T0 + 1));
    let bad = store.log_message(msg(&"nope".into(), "b", Role::User, "lost", T0 + 2));
    let good2 = store.log_message(msg(&cid, "c", Role::User, "third", T0 + 3));
    good1.wait().unwrap();
    assert!(bad.wait().is_err());
    good2.wait().unwrap();
    let t = store.timeline(cid).wait().unwrap();
    assert_eq!(t.items.len(), 2);
}

#[test]
fn tool_call_lifecycle_is_enforced() {
    let store = Store::open_in_memory().unwrap();
    let cid = conv(&store, "c", T0);
    // A result for a call never requested.
    let err = store
        .log_tool_event(ToolCallEvent::Completed {
            conversation_id: cid.clone(),
            id: "unknown".into(),
            result: None,
            executed_by: None,
            at: T0,
        })
        .wait()
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotFound {
                what: "tool call",
                ..
            }
        ),
        "{err}"
    );

    store
        .log_tool_event(initiated(&cid, "t", "calc", json!({"e": "1+1"}), T0))
        .wait()
        .unwrap();
    let dup = store
        .log_tool_event(initiated(&cid, "t", "calc", json!({}), T0))
        .wait()
        .unwrap_err();
    assert!(dup.to_string().contains("UNIQUE"), "{dup}");
    // A failure must carry a failure's status: the store copies the machine's word, it does
    // not take a contradiction.
    let contradiction = store
        .log_tool_event(ToolCallEvent::Failed {
            conversation_id: cid.clone(),
            id: "t".into(),
            code: "timeout".into(),
            status: CallStatus::Completed,
            message: String::new(),
            result: None,
            executed_by: None,
            at: T0 + 1,
        })
        .wait()
        .unwrap_err();
    assert!(
        matches!(contradiction, Error::InvalidArgument { name: "status", .. }),
        "{contradiction}"
    );
    store
        .log_tool_event(ToolCallEvent::Failed {
            conversation_id: cid.clone(),
            id: "t".into(),
            code: "timeout".into(),
            status: CallStatus::Timeout,
            message: "Tool execution exceeded timeout of 5000ms".into(),
            result: None,
            executed_by: Some(Executor::Server),
            at: T0 + 5000,
        })
        .wait()
        .unwrap();
    let err = store
        .log_tool_event(ToolCallEvent::Running {
            conversation_id: cid.clone(),
            id: "t".into(),
            executed_by: Executor::Client,
            at: T0 + 6000,
        })
        .wait()
        .unwrap_err();
    assert!(matches!(err, Error::InvalidTransition { .. }), "{err}");
    let page = store.audit(AuditQuery::default()).wait().unwrap();
    let tc = &page.entries[0].tool_call;
    assert_eq!(tc.state, ToolCallState::Error);
    assert_eq!(
        tc.status,
        CallStatus::Timeout,
        "the status the caller gave is kept"
    );
    assert_eq!(tc.error_code.as_deref(), Some("timeout"));
    assert_eq!(tc.duration_ms, Some(5000));
    assert_eq!(tc.executed_by, Some(Executor::Server));
}

#[test]
fn conversations_page_newest_first() {
    let store = Store::open_in_memory().unwrap();
    for i in 0..7 {
        conv(&store, &format!("c{i}"), T0 + i * 1000);
    }
    // Two with the same start time still page deterministically.
    conv(&store, "tie", T0 + 6000);
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = store.list_conversations(3, cursor).wait().unwrap();
        seen.extend(page.items.iter().map(|s| s.conversation.id.0.clone()));
        match page.next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, ["tie", "c6", "c5", "c4", "c3", "c2", "c1", "c0"]);
}

#[test]
fn summary_counts_messages_and_tool_calls() {
    let store = Store::open_in_memory().unwrap();
    populate(&store);
    let page = store.list_conversations(0, None).wait().unwrap();
    assert_eq!(page.items[0].message_count, 2);
    assert_eq!(page.items[0].tool_call_count, 1);
}

#[test]
fn search_finds_messages_and_tool_arguments() {
    let store = Store::open_in_memory().unwrap();
    let cid = populate(&store);
    let hits = store.search(SearchQuery::new("notes")).wait().unwrap();
    let kinds: Vec<HitKind> = hits.iter().map(|h| h.kind).collect();
    assert!(kinds.contains(&HitKind::Message), "{hits:?}");
    assert!(kinds.contains(&HitKind::ToolCall), "{hits:?}");
    let tool_hit = hits.iter().find(|h| h.kind == HitKind::ToolCall).unwrap();
    assert_eq!(tool_hit.id, "t1");
    assert_eq!(tool_hit.conversation_id, cid);
    assert_eq!(tool_hit.tool_name.as_deref(), Some("read_local_file"));
    assert!(tool_hit.snippet.contains("[notes]"), "{}", tool_hit.snippet);
    // A token only in the result.
    let hits = store.search(SearchQuery::new("milk")).wait().unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].kind, HitKind::ToolCall);
    // A path searched as typed.
    let hits = store
        .search(SearchQuery::new("/Users/alice/documents/notes.txt"))
        .wait()
        .unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
}

#[test]
fn phrase_and_prefix_queries() {
    let store = Store::open_in_memory().unwrap();
    let cid = conv(&store, "c", T0);
    say(
        &store,
        msg(&cid, "a", Role::User, "pizza in new york tonight", T0),
    );
    say(
        &store,
        msg(&cid, "b", Role::User, "york is new to me", T0 + 1),
    );
    let ids = |q: &str| -> Vec<String> {
        let mut v: Vec<String> = store
            .search(SearchQuery::new(q))
            .wait()
            .unwrap()
            .into_iter()
            .map(|h| h.id)
            .collect();
        v.sort();
        v
    };
    assert_eq!(ids("new york"), ["a", "b"]);
    assert_eq!(ids("\"new york\""), ["a"]);
    assert_eq!(ids("piz*"), ["a"]);
    assert_eq!(ids("piz"), Vec::<String>::new());
    assert_eq!(ids("NEW YORK"), ["a", "b"]);
}

#[test]
fn hits_come_newest_first_or_by_relevance() {
    let store = Store::open_in_memory().unwrap();
    let cid = conv(&store, "c", T0);
    say(
        &store,
        msg(&cid, "old", Role::User, "zebra zebra zebra zebra", T0),
    );
    say(
        &store,
        msg(
            &cid,
            "new",
            Role::User,
            "one zebra among many other words here",
            T0 + 9,
        ),
    );
    store
        .log_tool_event(initiated(
            &cid,
            "mid",
            "zoo",
            json!({"animal": "zebra"}),
            T0 + 5,
        ))
        .wait()
        .unwrap();
    let ids = |order| -> Vec<String> {
        let mut q = SearchQuery::new("zebra");
        q.order = order;
        store
            .search(q)
            .wait()
            .unwrap()
            .into_iter()
            .map(|h| h.id)
            .collect()
    };
    assert_eq!(
        ids(outpost_store::search::SearchOrder::Newest),
        ["new", "mid", "old"]
    );
    let by_rank = ids(outpost_store::search::SearchOrder::Relevance);
    assert_eq!(by_rank.len(), 3);
    assert!(
        by_rank.iter().position(|i| i == "old") < by_rank.iter().position(|i| i == "new"),
        "{by_rank:?}"
    );
}

#[test]
fn hostile_queries_never_panic() {
    let store = Store::open_in_memory().unwrap();
    populate(&store);
    let hostile = [
        "\"",
        "\"\"",
        "\"unbalanced",
        "a\"b",
        "(",
        ")",
        "a AND",
        "OR",
        "NOT notes",
        "NEAR(",
        "*",
        "notes*)",
        "col:notes",
        "text:notes",
        "^notes",
        "-",
        "+",
        "{",
        "}",
        ":",
        "'",
        "\\",
        "\0",
        "😀",
        "a\"\"b",
        "notes\" OR \"x",
        "NEAR(notes milk, 2)",
    ];
    for q in hostile {
        for syntax in [SearchSyntax::Plain, SearchSyntax::Fts5] {
            let mut sq = SearchQuery::new(q);
            sq.syntax = syntax;
            match store.search(sq).wait() {
                Ok(_) => {}
                Err(Error::InvalidSearchQuery { query, reason }) => {
                    assert_eq!(query, q);
                    assert!(!reason.is_empty());
                }
                Err(other) => panic!("{q:?} ({syntax:?}) gave {other}"),
            }
        }
    }
    // Plain mode takes operators literally: "NOT notes" finds notes, no syntax error.
    let hits = store.search(SearchQuery::new("NOT notes")).wait().unwrap();
    assert!(
        hits.is_empty(),
        "no message contains the word 'not': {hits:?}"
    );
    // Raw mode reports an unbalanced quote as a syntax error.
    let mut raw = SearchQuery::new("\"unbalanced");
    raw.syntax = SearchSyntax::Fts5;
    let err = store.search(raw).wait().unwrap_err();
    assert!(matches!(err, Error::InvalidSearchQuery { .. }), "{err}");
    // Raw mode does run real FTS5 syntax.
    let mut raw = SearchQuery::new("milk OR please");
    raw.syntax = SearchSyntax::Fts5;
    assert_eq!(store.search(raw).wait().unwrap().len(), 2);
}

#[test]
fn search_can_be_limited_to_one_conversation_and_one_kind() {
    let store = Store::open_in_memory().unwrap();
    let a = conv(&store, "a", T0);
    let b = conv(&store, "b", T0 + 1);
    say(&store, msg(&a, "m", Role::User, "shared word", T0));
    say(&store, msg(&b, "m", Role::User, "shared word", T0));
    let mut q = SearchQuery::new("shared");
    q.conversation_id = Some(b.clone());
    let hits = store.search(q).wait().unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].conversation_id, b);
    let mut q = SearchQuery::new("shared");
    q.messages = false;
    assert!(store.search(q).wait().unwrap().is_empty());
}

#[test]
fn audit_filters_by_tool_decision_state_and_date() {
    let store = Store::open_in_memory().unwrap();
    let cid = conv(&store, "c", T0);
    let tools = [
        "read_local_file",
        "web_search",
        "read_local_file",
        "calculator",
    ];
    let decisions = [
        Decision::AllowOnce,
        Decision::DenyOnce,
        Decision::AlwaysAllow,
        Decision::AllowOnce,
    ];
    for (i, (tool, d)) in tools.iter().zip(decisions).enumerate() {
        let at = T0 + (i as i64) * 86_400_000;
        let id = format!("t{i}");
        store
            .log_tool_event(initiated(&cid, &id, tool, json!({"i": i}), at))
            .wait()
            .unwrap();
        store
            .log_consent(consent(&cid, &id, tool, d, at + 1))
            .wait()
            .unwrap();
        let end = if d.allows() {
            ToolCallEvent::Completed {
                conversation_id: cid.clone(),
                id: id.clone(),
                result: Some(json!(i)),
                executed_by: Some(Executor::Client),
                at: at + 2,
            }
        } else {
            ToolCallEvent::Failed {
                conversation_id: cid.clone(),
                id: id.clone(),
                code: "permission_denied".into(),
                status: CallStatus::Denied,
                message: "The user denied this tool call".into(),
                result: None,
                executed_by: None,
                at: at + 2,
            }
        };
        store.log_tool_event(end).wait().unwrap();
    }
    let ids = |q: AuditQuery| -> Vec<String> {
        store
            .audit(q)
            .wait()
            .unwrap()
            .entries
            .into_iter()
            .map(|e| e.tool_call.id)
            .collect()
    };
    assert_eq!(ids(AuditQuery::default()), ["t3", "t2", "t1", "t0"]);
    assert_eq!(
        ids(AuditQuery {
            tool_name: Some("read_local_file".into()),
            ..Default::default()
        }),
        ["t2", "t0"]
    );
    assert_eq!(
        ids(AuditQuery {
            decision: Some(Decision::DenyOnce),
            ..Default::default()
        }),
        ["t1"]
    );
    assert_eq!(
        ids(AuditQuery {
            state: Some(ToolCallState::Error),
            ..Default::default()
        }),
        ["t1"]
    );
    assert_eq!(
        ids(AuditQuery {
            from: Some(T0 + 86_400_000),
            until: Some(T0 + 3 * 86_400_000),
            ..Default::default()
        }),
        ["t2", "t1"]
    );
    assert_eq!(
        ids(AuditQuery {
            tool_name: Some("read_local_file".into()),
            decision: Some(Decision::AllowOnce),
            ..Default::default()
        }),
        ["t0"]
    );
    let page = store
        .audit(AuditQuery {
            limit: 3,
            ..Default::default()
        })
        .wait()
        .unwrap();
    assert_eq!(page.entries.len(), 3);
    assert_eq!(
        page.entries[0].consents[0].decided.decision,
        Some(Decision::AllowOnce)
    );
    let rest = ids(AuditQuery {
        limit: 3,
        before: page.next,
        ..Default::default()
    });
    assert_eq!(rest, ["t0"]);
    let err = store
        .audit(AuditQuery {
            from: Some(10),
            until: Some(5),
            ..Default::default()
        })
        .wait()
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
}

#[test]
fn json_export_parses_back_into_the_same_data() {
    let store = Store::open_in_memory().unwrap();
    let cid = populate(&store);
    conv(&store, "empty", T0 + 1);
    store
        .log_protocol_error(NewProtocolError {
            conversation_id: None,
            at: T0,
            code: "unknown_type".into(),
            message: "type 99".into(),
            detail: None,
        })
        .wait()
        .unwrap();
    let text = store
        .export(ExportScope::All, ExportFormat::Json)
        .wait()
        .unwrap();
    let parsed: export::ExportDocument = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed.format, export::EXPORT_FORMAT);
    assert_eq!(parsed.conversations.len(), 2);
    assert_eq!(
        parsed.conversations[0],
        store.timeline(cid.clone()).wait().unwrap()
    );
    assert_eq!(parsed.unattached_protocol_errors.len(), 1);
    let mut direct = store.export_document(ExportScope::All).wait().unwrap();
    direct.exported_at = parsed.exported_at;
    assert_eq!(parsed, direct);

    let one = store
        .export(ExportScope::Conversation(cid.clone()), ExportFormat::Json)
        .wait()
        .unwrap();
    let one: export::ExportDocument = serde_json::from_str(&one).unwrap();
    assert_eq!(one.conversations, vec![store.timeline(cid).wait().unwrap()]);
    assert!(one.unattached_protocol_errors.is_empty());
}

#[test]
fn markdown_export_reads_like_a_transcript() {
    let store = Store::open_in_memory().unwrap();
    let cid = populate(&store);
    let md = store
        .export(ExportScope::Conversation(cid), ExportFormat::Markdown)
        .wait()
        .unwrap();
    for needle in [
        "# Conversation c1",
        "### You · 2023-11-14T22:13:20.010Z",
        "please read my notes file",
        "Reading it now.",
        "#### Tool `read_local_file`",
        "\"filePath\": \"/Users/alice/documents/notes.txt\"",
        "**allowed** by user (allow_once)",
        "Protocol error `malformed`",
        "*2023-11-14T22:13:20.015Z · status: thinking*",
    ] {
        assert!(md.contains(needle), "missing {needle:?} in\n{md}");
    }
    let err = store
        .export(
            ExportScope::Conversation("nope".into()),
            ExportFormat::Markdown,
        )
        .wait()
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
}

fn count(store: &Store, sql: &'static str) -> i64 {
    store
        .read(move |c| Ok(c.query_row(sql, [], |r| r.get(0)).unwrap()))
        .wait()
        .unwrap()
}

#[test]
fn delete_cascades_to_everything_and_the_search_index() {
    let store = Store::open_in_memory().unwrap();
    let cid = populate(&store);
    let keep = conv(&store, "keep", T0);
    say(&store, msg(&keep, "k", Role::User, "notes to keep", T0));
    assert!(store.delete_conversation(cid.clone()).wait().unwrap());
    assert!(!store.delete_conversation(cid.clone()).wait().unwrap());
    for table in [
        "SELECT COUNT(*) FROM messages WHERE conversation_id = 'c1'",
        "SELECT COUNT(*) FROM tool_calls",
        "SELECT COUNT(*) FROM consents",
        "SELECT COUNT(*) FROM status_changes",
        "SELECT COUNT(*) FROM protocol_errors",
    ] {
        assert_eq!(count(&store, table), 0, "{table}");
    }
    let hits = store.search(SearchQuery::new("notes")).wait().unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].conversation_id, keep);
    assert!(
        store
            .search(SearchQuery::new("milk"))
            .wait()
            .unwrap()
            .is_empty()
    );
    fts_integrity(&store);
    let err = store.timeline(cid).wait().unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
}

fn attachment(cid: &ConversationId, id: &str, data: Option<Vec<u8>>, at: Millis) -> NewAttachment {
    NewAttachment {
        conversation_id: cid.clone(),
        id: id.into(),
        message_id: "m1".into(),
        name: format!("{id}.png"),
        mime_type: "image/png".into(),
        size: 4,
        sha256: "ab".repeat(32),
        data,
        sent_at: at,
    }
}

/// What was sent is kept: name, type, size and hash; the bytes only when small. Deleting
/// the conversation deletes them.
#[test]
fn attachments_keep_what_was_sent_and_small_bytes_only() {
    let store = Store::open_in_memory().unwrap();
    let cid = populate(&store);
    store
        .log_attachment(attachment(&cid, "small", Some(vec![1, 2, 3, 4]), T0 + 11))
        .wait()
        .unwrap();
    let big = vec![0u8; MAX_ATTACHMENT_DATA + 1];
    store
        .log_attachment(attachment(&cid, "big", Some(big), T0 + 12))
        .wait()
        .unwrap();
    // A repeat is ignored.
    store
        .log_attachment(attachment(&cid, "small", None, T0 + 13))
        .wait()
        .unwrap();
    let t = store.timeline(cid.clone()).wait().unwrap();
    let kept: Vec<&NewAttachment> = t
        .items
        .iter()
        .filter_map(|i| match i {
            TimelineItem::Attachment(a) => Some(&a.sent),
            _ => None,
        })
        .collect();
    assert_eq!(kept.len(), 2);
    assert_eq!(kept[0].name, "small.png");
    assert_eq!(kept[0].data.as_deref(), Some(&[1u8, 2, 3, 4][..]));
    assert_eq!(kept[0].sha256, "ab".repeat(32));
    assert_eq!(kept[1].data, None, "the bytes of a large file are not kept");
    assert_eq!(kept[1].size, 4);
    let md = store
        .export(
            ExportScope::Conversation(cid.clone()),
            ExportFormat::Markdown,
        )
        .wait()
        .unwrap();
    assert!(
        md.contains("Attachment `small.png` (image/png, 4 bytes"),
        "{md}"
    );
    let err = store
        .log_attachment(attachment(&ConversationId::from("nope"), "x", None, T0))
        .wait()
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    assert!(store.delete_conversation(cid).wait().unwrap());
    assert_eq!(count(&store, "SELECT COUNT(*) FROM attachments"), 0);
}

#[test]
fn retention_deletes_only_what_is_old() {
    let store = Store::open_in_memory().unwrap();
    let day = 86_400_000;
    let now = T0 + 100 * day;
    let old = conv(&store, "old", T0);
    say(&store, msg(&old, "m", Role::User, "ancient", T0 + day));
    // Started long ago but still active recently.
    let active = conv(&store, "active", T0);
    say(&store, msg(&active, "m", Role::User, "fresh", now - day));
    let recent = conv(&store, "recent", now - 2 * day);
    drop(recent);
    store
        .log_protocol_error(NewProtocolError {
            conversation_id: None,
            at: T0,
            code: "old".into(),
            message: "old".into(),
            detail: None,
        })
        .wait()
        .unwrap();

    // No setting: nothing happens.
    let r = store.apply_retention(now).wait().unwrap();
    assert_eq!(r, RetentionReport::default());

    let err = store.set_retention_days(Some(0)).wait().unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    store.set_retention_days(Some(30)).wait().unwrap();
    assert_eq!(store.retention_days().wait().unwrap(), Some(30));
    let r = store.apply_retention(now).wait().unwrap();
    assert_eq!(
        r,
        RetentionReport {
            conversations: 1,
            protocol_errors: 1
        }
    );
    let left: Vec<String> = store
        .list_conversations(0, None)
        .wait()
        .unwrap()
        .items
        .into_iter()
        .map(|s| s.conversation.id.0)
        .collect();
    assert_eq!(left, ["recent", "active"]);
    assert!(
        store
            .search(SearchQuery::new("ancient"))
            .wait()
            .unwrap()
            .is_empty()
    );
    fts_integrity(&store);
    store.set_retention_days(None).wait().unwrap();
    assert_eq!(store.retention_days().wait().unwrap(), None);
}

#[test]
fn large_values_are_capped_with_a_visible_note() {
    let mut cfg = StoreConfig::new(Location::Memory);
    cfg.max_field_bytes = 1024;
    let store = Store::open(cfg).unwrap();
    let cid = conv(&store, "c", T0);
    let big = "word ".repeat(1000); // 5000 bytes
    store
        .log_tool_event(initiated(&cid, "t", "dump", json!({"small": true}), T0))
        .wait()
        .unwrap();
    store
        .log_tool_event(ToolCallEvent::Completed {
            conversation_id: cid.clone(),
            id: "t".into(),
            result: Some(json!({"content": big})),
            executed_by: Some(Executor::Client),
            at: T0 + 1,
        })
        .wait()
        .unwrap();
    say(&store, msg(&cid, "m", Role::Assistant, &big, T0 + 2));
    let t = store.timeline(cid.clone()).wait().unwrap();
    let TimelineItem::ToolCall(tc) = &t.items[0] else {
        panic!()
    };
    assert_eq!(tc.arguments.value(), Some(&json!({"small": true})));
    match tc.result.as_ref().unwrap() {
        StoredJson::Truncated { text, truncation } => {
            assert_eq!(truncation.stored_bytes, 1024);
            assert_eq!(truncation.original_bytes, 5014);
            assert!(
                text.ends_with("[truncated: 5014 bytes, stored first 1024]"),
                "{text}"
            );
            assert!(text.starts_with("{\"content\":\"word word"));
        }
        other => panic!("not truncated: {other:?}"),
    }
    let TimelineItem::Message(m) = &t.items[1] else {
        panic!()
    };
    assert_eq!(m.truncation.as_ref().map(|t| t.original_bytes), Some(5000));
    assert!(
        m.text
            .ends_with("[truncated: 5000 bytes, stored first 1024]")
    );
    // Stored once: the row holds only the capped prefix.
    let stored = count(
        &store,
        "SELECT SUM(length(CAST(result AS BLOB))) FROM tool_calls",
    );
    assert_eq!(stored, 1024);
    let md = store
        .export(ExportScope::Conversation(cid), ExportFormat::Markdown)
        .wait()
        .unwrap();
    assert!(md.contains("[truncated: 5014 bytes, stored first 1024]"));
}

#[test]
fn deltas_past_the_cap_only_grow_the_note() {
    let mut cfg = StoreConfig::new(Location::Memory);
    cfg.max_field_bytes = 100;
    let store = Store::open(cfg).unwrap();
    let cid = conv(&store, "c", T0);
    for i in 0..30 {
        store
            .append_message_delta(MessageDelta {
                conversation_id: cid.clone(),
                id: "m".into(),
                delta: "0123456789".into(),
                at: T0 + i,
                done: i == 29,
            })
            .wait()
            .unwrap();
    }
    let t = store.timeline(cid).wait().unwrap();
    let TimelineItem::Message(m) = &t.items[0] else {
        panic!()
    };
    assert_eq!(
        m.truncation,
        Some(Truncation {
            original_bytes: 300,
            stored_bytes: 100
        })
    );
    assert!(m.text.starts_with(&"0123456789".repeat(10)));
    assert_eq!(m.completed_at, Some(T0 + 29));
}

#[test]
fn tiny_cap_is_refused() {
    let mut cfg = StoreConfig::new(Location::Memory);
    cfg.max_field_bytes = 3;
    let err = Store::open(cfg).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_callers_log_concurrently() {
    let store = Store::open_in_memory().unwrap();
    let cid = ConversationId::generate();
    store
        .begin_conversation(NewConversation::new(cid.clone(), T0))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for task in 0..8 {
        let store = store.clone();
        let cid = cid.clone();
        tasks.push(tokio::spawn(async move {
            let acks: Vec<_> = (0..250)
                .map(|i| {
                    store.log_message(msg(
                        &cid,
                        &format!("{task}-{i}"),
                        Role::User,
                        "hello",
                        T0 + i,
                    ))
                })
                .collect();
            for a in acks {
                a.await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let page = store.list_conversations(1, None).await.unwrap();
    assert_eq!(page.items[0].message_count, 2000);
    assert!(store.integrity_check().await.unwrap().is_empty());
}
