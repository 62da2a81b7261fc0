import { describe, expect, it } from 'vitest';
import type { SessionSnapshot, UiEvent } from '../backend';
import { ConsentQueue } from './consent.svelte';
import { SessionStore } from './session.svelte';

const T0 = 1_700_000_000_000;
const clock = () => T0;

function store(events: UiEvent[]): SessionStore {
  const s = new SessionStore(clock);
  for (const e of events) s.apply(e);
  return s;
}

const initiated: UiEvent = {
  type: 'tool_initiated',
  data: { id: 't1', messageId: 'a1', toolName: 'read_local_file', execution: 'client', parameters: { path: '/a' }, timeoutMs: 30_000, at: T0, readOnly: true },
};

describe('SessionStore', () => {
  it('tracks connection, session and assistant state', () => {
    const s = store([
      { type: 'connection', data: { state: 'connecting' } },
      { type: 'connection', data: { state: 'reconnecting', attempt: 2 } },
    ]);
    expect(s.isReconnecting).toBe(true);
    expect(s.configured).toBe(false);
    s.apply({ type: 'connection', data: { state: 'connected' } });
    s.apply({ type: 'session', data: { conversationId: 'c1', sessionId: 's1', assistantName: 'Ada', mode: 'outpost', attachments: false } });
    s.apply({ type: 'status', data: { state: 'using_tool', toolUseId: 't1' } });
    expect(s.isConnected).toBe(true);
    expect(s.configured).toBe(true);
    expect(s.session?.assistantName).toBe('Ada');
    expect(s.status).toEqual({ state: 'using_tool', toolUseId: 't1' });
  });

  it('shows text streamed after a tool call below its card (the backend sends it as a new segment)', () => {
    const s = store([
      { type: 'assistant_delta', data: { messageId: 'a1', seq: 0, delta: 'Let me read it. ' } },
      initiated,
      { type: 'assistant_delta', data: { messageId: 'a1~2', seq: 1, delta: 'It says hi.' } },
      { type: 'assistant_message', data: { id: 'a1', text: 'Let me read it. ', at: T0 } },
      { type: 'assistant_message', data: { id: 'a1~2', text: 'It says hi.', at: T0 } },
    ]);
    const order = s.entries.map((e) => (e.kind === 'tool' ? `card ${e.call.id}` : `${e.kind} ${e.kind === 'assistant' ? e.text : ''}`));
    expect(order).toEqual(['assistant Let me read it. ', 'card t1', 'assistant It says hi.']);
  });

  it('assembles deltas in order, ignores replays, tolerates gaps, and the final message wins', () => {
    const s = store([
      { type: 'assistant_delta', data: { messageId: 'a1', seq: 0, delta: 'Hel' } },
      { type: 'assistant_delta', data: { messageId: 'a1', seq: 1, delta: 'lo' } },
      { type: 'assistant_delta', data: { messageId: 'a1', seq: 1, delta: 'lo' } },
      { type: 'assistant_delta', data: { messageId: 'a1', seq: 0, delta: 'Hel' } },
    ]);
    const e = s.entries[0];
    expect(e?.kind === 'assistant' && e.text).toBe('Hello');
    expect(e?.kind === 'assistant' && e.streaming).toBe(true);
    s.apply({ type: 'assistant_delta', data: { messageId: 'a1', seq: 3, delta: ' world' } });
    expect(s.entries[0]?.kind === 'assistant' && s.entries[0].text).toBe('Hello world');
    s.apply({ type: 'assistant_message', data: { id: 'a1', text: 'Hello, world!', at: T0 + 5 } });
    const done = s.entries[0];
    expect(done?.kind === 'assistant' && done.text).toBe('Hello, world!');
    expect(done?.kind === 'assistant' && done.streaming).toBe(false);
    // A late delta after the final message changes nothing.
    s.apply({ type: 'assistant_delta', data: { messageId: 'a1', seq: 4, delta: '!!!' } });
    expect(s.entries[0]?.kind === 'assistant' && s.entries[0].text).toBe('Hello, world!');
    expect(s.entries).toHaveLength(1);
  });

  it('keeps user messages once, even when echoed', () => {
    const m = { id: 'u1', text: 'hi', at: T0 };
    const s = store([{ type: 'user_message', data: m }, { type: 'user_message', data: m }]);
    expect(s.entries).toEqual([{ kind: 'user', ...m }]);
  });

  it('walks a tool call through its lifecycle', () => {
    const s = store([initiated]);
    expect(s.tool('t1')?.status).toBe('initiated');
    s.apply({ type: 'tool_progress', data: { id: 't1', state: 'awaiting_consent', status: 'awaiting_consent', detail: 'Read /a', at: T0 + 1 } });
    expect(s.tool('t1')).toMatchObject({ status: 'awaiting_consent', awaitingConsentAt: T0 + 1, detail: 'Read /a' });
    s.apply({ type: 'tool_progress', data: { id: 't1', state: 'running', status: 'running', at: T0 + 2 } });
    expect(s.tool('t1')).toMatchObject({ status: 'running', runningAt: T0 + 2 });
    expect(s.activeTools.map((c) => c.id)).toEqual(['t1']);
    // A late awaiting_consent report: the core keeps the call running, and the card shows
    // the status the event carries.
    s.apply({ type: 'tool_progress', data: { id: 't1', state: 'awaiting_consent', status: 'running', at: T0 + 3 } });
    expect(s.tool('t1')).toMatchObject({ status: 'running', runningAt: T0 + 2 });
    s.apply({ type: 'tool_result', data: { id: 't1', success: true, status: 'completed', result: { content: 'x' }, executedBy: 'client', at: T0 + 9 } });
    expect(s.tool('t1')).toMatchObject({ status: 'completed', finishedAt: T0 + 9, result: { content: 'x' }, executedBy: 'client' });
    expect(s.activeTools).toEqual([]);
    // A duplicate result (reconnect replay) cannot change the outcome.
    s.apply({ type: 'tool_result', data: { id: 't1', success: false, status: 'timeout', errorCode: 'timeout', at: T0 + 10 } });
    s.apply({ type: 'tool_progress', data: { id: 't1', state: 'running', status: 'running', at: T0 + 11 } });
    expect(s.tool('t1')?.status).toBe('completed');
  });

  it('shows the status the core gave a result, not one worked out from its code', () => {
    const s = store([initiated, { type: 'tool_result', data: { id: 't1', success: false, status: 'denied', errorCode: 'permission_denied', errorMessage: 'Permission denied by the user: no', at: T0 } }]);
    expect(s.tool('t1')).toMatchObject({ status: 'denied', errorCode: 'permission_denied', errorMessage: 'Permission denied by the user: no' });
  });

  it('shows a result for a call it never saw requested', () => {
    const s = store([{ type: 'tool_result', data: { id: 'x', success: true, status: 'completed', executedBy: 'server', result: { a: 1 }, at: T0 } }]);
    expect(s.tool('x')).toMatchObject({ status: 'completed', execution: 'server', toolName: 'unknown tool' });
  });

  it('ignores progress for unknown calls and refreshes a repeated request without losing state', () => {
    const s = store([{ type: 'tool_progress', data: { id: 'nope', state: 'running', status: 'running', at: T0 } }]);
    expect(s.entries).toEqual([]);
    s.apply(initiated);
    s.apply({ type: 'tool_progress', data: { id: 't1', state: 'running', status: 'running', at: T0 + 1 } });
    s.apply(initiated);
    expect(s.entries).toHaveLength(1);
    expect(s.tool('t1')?.status).toBe('running');
  });

  it('a new conversation clears the transcript; a rejoin of the same one keeps it', () => {
    const s = store([
      { type: 'session', data: { conversationId: 'c1', sessionId: 's1', assistantName: 'A', mode: 'outpost', attachments: false } },
      { type: 'user_message', data: { id: 'u1', text: 'hi', at: T0 } },
      { type: 'session', data: { conversationId: 'c1', sessionId: 's2', assistantName: 'A', mode: 'outpost', attachments: false } },
    ]);
    expect(s.entries).toHaveLength(1);
    s.apply({ type: 'session', data: { conversationId: 'c2', sessionId: 's3', assistantName: 'A', mode: 'outpost', attachments: false } });
    expect(s.entries).toHaveLength(0);
    s.apply({ type: 'user_message', data: { id: 'u2', text: 'again', at: T0 } });
    expect(s.entries).toHaveLength(1);
  });

  it('loads a snapshot, then continues from it', () => {
    const snap: SessionSnapshot = {
      configured: true,
      connection: { state: 'connected' },
      status: { state: 'thinking' },
      session: { conversationId: 'c1', sessionId: 's1', assistantName: 'A', mode: 'outpost', attachments: false },
      transcript: [
        { kind: 'user', id: 'u1', text: 'hi', at: T0 },
        { kind: 'assistant', id: 'a1', text: 'hello', at: T0 },
        { kind: 'tool', call: { id: 't1', messageId: 'a1', toolName: 'x', execution: 'client', parameters: {}, timeoutMs: 1, status: 'running', initiatedAt: T0, runningAt: T0 } },
      ],
      pendingConsents: [],
    };
    const s = new SessionStore(clock);
    s.load(snap);
    expect(s.entries.map((e) => e.kind)).toEqual(['user', 'assistant', 'tool']);
    s.apply({ type: 'assistant_delta', data: { messageId: 'a1', seq: 0, delta: 'X' } });
    expect(s.entries[1]?.kind === 'assistant' && s.entries[1].text).toBe('hello');
    s.apply({ type: 'tool_result', data: { id: 't1', success: true, status: 'completed', at: T0 + 1 } });
    expect(s.tool('t1')?.status).toBe('completed');
  });

  it('records errors', () => {
    const s = store([{ type: 'error', data: { code: 'unsupported_version', message: 'no common version', fatal: true } }]);
    expect(s.lastError?.code).toBe('unsupported_version');
  });
});

describe('ConsentQueue', () => {
  const req = (id: string, expiresInMs = 1000) => ({
    consentId: id, requestId: `r-${id}`, conversationId: 'c', tool: 'x', parameters: {}, summary: '', paths: [], reason: '',
    options: ['allow_once' as const, 'deny_once' as const], expiresInMs,
  });

  it('queues in arrival order, without duplicates, with deadlines', () => {
    const q = new ConsentQueue(clock);
    q.apply({ type: 'consent_request', data: req('a', 5000) });
    q.apply({ type: 'consent_request', data: req('b') });
    q.apply({ type: 'consent_request', data: req('a', 5000) });
    expect(q.items.map((p) => p.request.consentId)).toEqual(['a', 'b']);
    expect(q.current?.deadline).toBe(T0 + 5000);
    expect(q.size).toBe(2);
  });

  it('withdrawals and answers remove the question', () => {
    const q = new ConsentQueue(clock);
    q.load([req('a'), req('b'), req('c')]);
    q.apply({ type: 'consent_withdrawn', data: { consentId: 'b', reason: 'timed_out' } });
    expect(q.items.map((p) => p.request.consentId)).toEqual(['a', 'c']);
    expect(q.remove('a')?.request.consentId).toBe('a');
    expect(q.remove('a')).toBeUndefined();
    expect(q.current?.request.consentId).toBe('c');
    q.apply({ type: 'consent_withdrawn', data: { consentId: 'zzz', reason: 'cancelled' } });
    expect(q.size).toBe(1);
  });

  it('ignores other events', () => {
    const q = new ConsentQueue(clock);
    q.apply(initiated);
    expect(q.size).toBe(0);
  });
});
