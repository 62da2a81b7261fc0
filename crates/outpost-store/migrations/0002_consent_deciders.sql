-- Migration 2: the consent log says who decided, truthfully. Never edit once shipped.
--
-- Version 1 stored every decision as a user answer: a call the policy allowed became
-- 'always_allow' by 'policy', and a consent timeout or a missing consent prompt became
-- 'always_deny' by 'policy', which is not what happened. Now:
--   outcome    'allowed' | 'denied' (always set)
--   decided_by who decided: the user, a policy rule, the built-in secrets list, an earlier
--              "allow for this conversation" answer, the consent timeout, or no consent UI
--   decision   the user's answer, only when decided_by = 'user' (spelled as the policy
--              spells it: 'allow_for_conversation', not 'allow_conversation')
-- Rows written by version 1 are carried over; their decider is read back from the `asked`
-- text version 1 wrote ("<who>: <why>"), the only place it kept it.

CREATE TABLE consents_v2 (
    pk              INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    tool_call_id    TEXT,
    seq             INTEGER NOT NULL,
    tool_name       TEXT NOT NULL,
    asked           TEXT NOT NULL,
    outcome         TEXT NOT NULL CHECK (outcome IN ('allowed', 'denied')),
    decision        TEXT CHECK (decision IN
        ('allow_once', 'allow_for_conversation', 'always_allow', 'deny_once', 'always_deny')),
    scope           TEXT,
    decided_by      TEXT NOT NULL CHECK (decided_by IN ('user', 'policy', 'secrets_list',
        'conversation_grant', 'consent_timeout', 'no_consent_ui')),
    asked_at        INTEGER,
    decided_at      INTEGER NOT NULL,
    CHECK (decision IS NULL OR decided_by = 'user')
) STRICT;

INSERT INTO consents_v2 (pk, conversation_id, tool_call_id, seq, tool_name, asked, outcome,
                         decision, scope, decided_by, asked_at, decided_at)
SELECT pk, conversation_id, tool_call_id, seq, tool_name, asked,
       CASE WHEN decision IN ('allow_once', 'allow_conversation', 'always_allow')
            THEN 'allowed' ELSE 'denied' END,
       CASE WHEN decided_by = 'user'
                 AND asked NOT LIKE 'the user: allowed for this conversation%'
            THEN replace(decision, 'allow_conversation', 'allow_for_conversation')
            ELSE NULL END,
       scope,
       CASE WHEN asked LIKE 'the consent timeout:%' THEN 'consent_timeout'
            WHEN asked LIKE 'Outpost:%' THEN 'no_consent_ui'
            WHEN asked LIKE 'the built-in secrets list:%' THEN 'secrets_list'
            WHEN decided_by = 'user'
                 AND asked LIKE 'the user: allowed for this conversation%'
            THEN 'conversation_grant'
            ELSE decided_by END,
       asked_at, decided_at
FROM consents;

DROP TABLE consents;
ALTER TABLE consents_v2 RENAME TO consents;
CREATE INDEX consents_by_call ON consents (conversation_id, tool_call_id);
CREATE INDEX consents_by_decision ON consents (decision);
