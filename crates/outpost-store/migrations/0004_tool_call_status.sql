-- Migration 4: a tool call's status as the session's state machine decided it. Never edit
-- once shipped.
--
-- `state` stays the store's lifecycle (it refuses a call going back, or finishing twice);
-- `status` is the machine's word for the call, copied, with the kinds of failure told
-- apart. Calls stored before this migration get the status the machine gives a result with
-- their error code.
ALTER TABLE tool_calls ADD COLUMN status TEXT CHECK (status IN
    ('initiated', 'awaiting_consent', 'running', 'completed', 'error', 'timeout', 'denied',
     'cancelled'));
UPDATE tool_calls SET status = CASE
    WHEN state <> 'error' THEN state
    WHEN error_code = 'timeout' THEN 'timeout'
    WHEN error_code = 'permission_denied' THEN 'denied'
    WHEN error_code = 'cancelled' THEN 'cancelled'
    ELSE 'error'
END;
