//! The schema migrations through the public `migrations` module: valid, from empty to the
//! latest version, and from every older version (moved from `src/migrations.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use outpost_store::Error;
use outpost_store::migrations::*;
use rusqlite::Connection;

fn schema_objects(conn: &Connection) -> Vec<(String, String)> {
    let mut stmt = conn
        .prepare("SELECT type, name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<Vec<_>>>()
        .unwrap()
}

#[test]
fn migrations_are_valid() {
    migrations().validate().unwrap();
}

#[test]
fn from_empty_reaches_latest() {
    let mut conn = Connection::open_in_memory().unwrap();
    migrate(&mut conn).unwrap();
    assert_eq!(current_version(&conn).unwrap(), latest_version());
    let names: Vec<String> = schema_objects(&conn).into_iter().map(|(_, n)| n).collect();
    for table in [
        "conversations",
        "messages",
        "status_changes",
        "tool_calls",
        "consents",
        "protocol_errors",
        "attachments",
        "settings",
        "messages_fts",
        "tool_calls_fts",
    ] {
        assert!(
            names.iter().any(|n| n == table),
            "missing {table}: {names:?}"
        );
    }
    let fk: Vec<String> = conn
        .prepare("PRAGMA foreign_key_check")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert!(fk.is_empty());
}

/// For every earlier version k: apply the first k migrations, then upgrade; the result
/// must be the same schema as a fresh database at the newest version.
#[test]
fn from_each_earlier_version_reaches_the_same_schema() {
    let mut fresh = Connection::open_in_memory().unwrap();
    migrate(&mut fresh).unwrap();
    let want = schema_objects(&fresh);
    for k in 0..latest_version() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrations().to_version(&mut conn, k).unwrap();
        assert_eq!(current_version(&conn).unwrap(), k);
        migrate(&mut conn).unwrap();
        assert_eq!(
            current_version(&conn).unwrap(),
            latest_version(),
            "from {k}"
        );
        assert_eq!(
            schema_objects(&conn),
            want,
            "schema after upgrading from {k}"
        );
    }
}

/// Version 1 recorded every decision as if someone answered "always": version 2 reads
/// the real decider back from the text version 1 kept.
#[test]
fn version_1_consents_are_carried_over_with_their_real_deciders() {
    let mut conn = Connection::open_in_memory().unwrap();
    migrations().to_version(&mut conn, 1).unwrap();
    conn.execute_batch(
        "INSERT INTO conversations (id, seq, started_at) VALUES ('c', 1, 0);
         INSERT INTO consents (conversation_id, seq, tool_name, asked, decision,
                               decided_by, decided_at) VALUES
           ('c', 1, 't', 'your policy: inside the allowed folder /w', 'always_allow', 'policy', 1),
           ('c', 2, 't', 'the consent timeout: nobody answered within 60 s', 'always_deny', 'policy', 2),
           ('c', 3, 't', 'Outpost: this call needs the user''s permission', 'always_deny', 'policy', 3),
           ('c', 4, 't', 'the built-in secrets list: ~/.ssh is secret', 'always_deny', 'policy', 4),
           ('c', 5, 't', 'the user: allowed for this conversation', 'allow_conversation', 'user', 5),
           ('c', 6, 't', 'the user: allow_for_conversation', 'allow_conversation', 'user', 6),
           ('c', 7, 't', 'the user: the user declined this call', 'deny_once', 'user', 7);",
    )
    .unwrap();
    migrate(&mut conn).unwrap();
    let rows: Vec<(String, Option<String>, String)> = conn
        .prepare("SELECT outcome, decision, decided_by FROM consents ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let want = [
        ("allowed", None, "policy"),
        ("denied", None, "consent_timeout"),
        ("denied", None, "no_consent_ui"),
        ("denied", None, "secrets_list"),
        ("allowed", None, "conversation_grant"),
        ("allowed", Some("allow_for_conversation"), "user"),
        ("denied", Some("deny_once"), "user"),
    ];
    let got: Vec<(&str, Option<&str>, &str)> = rows
        .iter()
        .map(|(o, d, b)| (o.as_str(), d.as_deref(), b.as_str()))
        .collect();
    assert_eq!(got, want);
}

/// Version 3 kept one `error` state for every failure: version 4 gives the calls stored
/// before it the status the session's state machine gives a result with their code.
#[test]
fn version_3_tool_calls_get_the_status_their_outcome_had() {
    let mut conn = Connection::open_in_memory().unwrap();
    migrations().to_version(&mut conn, 3).unwrap();
    conn.execute_batch(
        "INSERT INTO conversations (id, seq, started_at) VALUES ('c', 1, 0);
         INSERT INTO tool_calls (conversation_id, id, seq, tool_name, execution, arguments,
                                 state, initiated_at, error_code) VALUES
           ('c', 'a', 1, 't', 'client', '{}', 'completed', 1, NULL),
           ('c', 'b', 2, 't', 'client', '{}', 'error', 2, 'timeout'),
           ('c', 'd', 3, 't', 'client', '{}', 'error', 3, 'permission_denied'),
           ('c', 'e', 4, 't', 'client', '{}', 'error', 4, 'cancelled'),
           ('c', 'f', 5, 't', 'client', '{}', 'error', 5, 'unknown_tool'),
           ('c', 'g', 6, 't', 'client', '{}', 'running', 6, NULL);",
    )
    .unwrap();
    migrate(&mut conn).unwrap();
    let got: Vec<String> = conn
        .prepare("SELECT status FROM tool_calls ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(
        got,
        [
            "completed",
            "timeout",
            "denied",
            "cancelled",
            "error",
            "running"
        ]
    );
}

#[test]
fn migrating_twice_is_a_no_op() {
    let mut conn = Connection::open_in_memory().unwrap();
    migrate(&mut conn).unwrap();
    let before = schema_objects(&conn);
    migrate(&mut conn).unwrap();
    assert_eq!(schema_objects(&conn), before);
}

#[test]
fn database_from_a_newer_build_is_refused() {
    let mut conn = Connection::open_in_memory().unwrap();
    migrate(&mut conn).unwrap();
    conn.pragma_update(None, "user_version", latest_version() as i64 + 3)
        .unwrap();
    let err = migrate(&mut conn).unwrap_err();
    assert!(matches!(err, Error::SchemaTooNew { .. }), "{err}");
    assert!(err.to_string().contains("newer"), "{err}");
}
