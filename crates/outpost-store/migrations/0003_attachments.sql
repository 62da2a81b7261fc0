-- Migration 3: files the user gave the assistant. Never edit once shipped.
--
-- What was sent is kept: its name, media type, size and SHA-256. The bytes only for small
-- images (`data`, at most 256 KiB; NULL otherwise), so the history can show them again.
CREATE TABLE attachments (
    pk              INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    id              TEXT NOT NULL,
    message_id      TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    name            TEXT NOT NULL,
    mime_type       TEXT NOT NULL,
    size            INTEGER NOT NULL CHECK (size >= 0),
    sha256          TEXT NOT NULL,
    data            BLOB CHECK (data IS NULL OR length(data) <= 262144),
    sent_at         INTEGER NOT NULL,
    UNIQUE (conversation_id, id)
) STRICT;
CREATE INDEX attachments_by_message ON attachments (conversation_id, message_id);
