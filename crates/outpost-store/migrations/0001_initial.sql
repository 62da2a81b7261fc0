-- Migration 1: the initial schema. Never edit this file once shipped; add 0002_*.sql instead.
--
-- Times are INTEGER milliseconds since the Unix epoch (UTC).
-- `seq` is a store-wide insertion counter used to order rows that share a millisecond.
-- Text columns that may be capped (message text, tool-call arguments and results) hold only
-- the stored prefix; the matching `*_original_bytes` column is non-NULL when the cap applied
-- and holds the size the value had before it was cut.

CREATE TABLE conversations (
    id                 TEXT PRIMARY KEY NOT NULL,
    seq                INTEGER NOT NULL,
    title              TEXT,
    room               TEXT,
    assistant_identity TEXT,
    started_at         INTEGER NOT NULL,
    ended_at           INTEGER
) STRICT;
CREATE INDEX conversations_newest ON conversations (started_at DESC, seq DESC);

CREATE TABLE messages (
    pk              INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    id              TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    role            TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    text            TEXT NOT NULL,
    original_bytes  INTEGER,
    created_at      INTEGER NOT NULL,
    completed_at    INTEGER,
    UNIQUE (conversation_id, id)
) STRICT;
CREATE INDEX messages_by_time ON messages (conversation_id, created_at);

CREATE TABLE status_changes (
    pk              INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    at              INTEGER NOT NULL,
    status          TEXT NOT NULL,
    detail          TEXT
) STRICT;
CREATE INDEX status_changes_by_conversation ON status_changes (conversation_id, at);

CREATE TABLE tool_calls (
    pk                       INTEGER PRIMARY KEY,
    conversation_id          TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    id                       TEXT NOT NULL,
    message_id               TEXT,
    seq                      INTEGER NOT NULL,
    tool_name                TEXT NOT NULL,
    server_name              TEXT NOT NULL DEFAULT '',
    execution                TEXT NOT NULL CHECK (execution IN ('server', 'client', 'either')),
    arguments                TEXT NOT NULL,
    arguments_original_bytes INTEGER,
    state                    TEXT NOT NULL
        CHECK (state IN ('initiated', 'awaiting_consent', 'running', 'completed', 'error')),
    initiated_at             INTEGER NOT NULL,
    awaiting_consent_at      INTEGER,
    running_at               INTEGER,
    finished_at              INTEGER,
    duration_ms              INTEGER,
    executed_by              TEXT CHECK (executed_by IN ('client', 'server')),
    result                   TEXT,
    result_original_bytes    INTEGER,
    error_code               TEXT,
    error_message            TEXT,
    UNIQUE (conversation_id, id)
) STRICT;
CREATE INDEX tool_calls_by_time ON tool_calls (initiated_at DESC, seq DESC);
CREATE INDEX tool_calls_by_tool ON tool_calls (tool_name, initiated_at DESC);

CREATE TABLE consents (
    pk              INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    tool_call_id    TEXT,
    seq             INTEGER NOT NULL,
    tool_name       TEXT NOT NULL,
    asked           TEXT NOT NULL,
    decision        TEXT NOT NULL CHECK (decision IN
        ('allow_once', 'allow_conversation', 'always_allow', 'deny_once', 'always_deny')),
    scope           TEXT,
    decided_by      TEXT NOT NULL CHECK (decided_by IN ('user', 'policy')),
    asked_at        INTEGER,
    decided_at      INTEGER NOT NULL
) STRICT;
CREATE INDEX consents_by_call ON consents (conversation_id, tool_call_id);
CREATE INDEX consents_by_decision ON consents (decision);

CREATE TABLE protocol_errors (
    pk              INTEGER PRIMARY KEY,
    conversation_id TEXT REFERENCES conversations (id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    at              INTEGER NOT NULL,
    code            TEXT NOT NULL,
    message         TEXT NOT NULL,
    detail          TEXT
) STRICT;
CREATE INDEX protocol_errors_by_conversation ON protocol_errors (conversation_id, at);
CREATE INDEX protocol_errors_by_time ON protocol_errors (at);

CREATE TABLE settings (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) STRICT;

-- Full-text indexes use external content so large texts are stored once, in their own row.
CREATE VIRTUAL TABLE messages_fts USING fts5 (
    text,
    content = 'messages',
    content_rowid = 'pk',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, text) VALUES (new.pk, new.text);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.pk, old.text);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.pk, old.text);
    INSERT INTO messages_fts (rowid, text) VALUES (new.pk, new.text);
END;

CREATE VIRTUAL TABLE tool_calls_fts USING fts5 (
    tool_name,
    server_name,
    arguments,
    result,
    error_message,
    content = 'tool_calls',
    content_rowid = 'pk',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER tool_calls_fts_insert AFTER INSERT ON tool_calls BEGIN
    INSERT INTO tool_calls_fts (rowid, tool_name, server_name, arguments, result, error_message)
    VALUES (new.pk, new.tool_name, new.server_name, new.arguments, new.result, new.error_message);
END;
CREATE TRIGGER tool_calls_fts_delete AFTER DELETE ON tool_calls BEGIN
    INSERT INTO tool_calls_fts
        (tool_calls_fts, rowid, tool_name, server_name, arguments, result, error_message)
    VALUES ('delete', old.pk, old.tool_name, old.server_name, old.arguments, old.result,
            old.error_message);
END;
CREATE TRIGGER tool_calls_fts_update
AFTER UPDATE OF tool_name, server_name, arguments, result, error_message ON tool_calls BEGIN
    INSERT INTO tool_calls_fts
        (tool_calls_fts, rowid, tool_name, server_name, arguments, result, error_message)
    VALUES ('delete', old.pk, old.tool_name, old.server_name, old.arguments, old.result,
            old.error_message);
    INSERT INTO tool_calls_fts (rowid, tool_name, server_name, arguments, result, error_message)
    VALUES (new.pk, new.tool_name, new.server_name, new.arguments, new.result, new.error_message);
END;
