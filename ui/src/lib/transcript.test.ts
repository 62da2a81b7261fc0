import { afterEach, describe, expect, it } from 'vitest';
import type { UiEvent } from './backend';
import { MockBackend, failureShowcaseEvents, showcaseEvents } from './mock-backend';
import { SessionStore } from './stores/session.svelte';
import { TranscriptFold, entriesFromTranscript, transcriptFromEntries, type Entry } from './transcript';

const T0 = 1_700_000_000_000;

/** A fold over a plain array, as the mock backend uses it. */
function fold(events: UiEvent[]): { entries: () => Entry[]; fold: TranscriptFold } {
  let entries: Entry[] = [];
  const f = new TranscriptFold(
    () => entries,
    (e) => {
      entries = e;
    },
    () => T0,
  );
  for (const e of events) f.apply(e);
  return { entries: () => entries, fold: f };
}

const session = (conversationId: string): UiEvent => ({
  type: 'session',
  data: { conversationId, sessionId: 's', assistantName: 'Ada', mode: 'outpost', attachments: false },
});

const initiated = (id: string): UiEvent => ({
  type: 'tool_initiated',
  data: { id, messageId: 'a1', toolName: 'read_local_file', execution: 'client', parameters: { path: '/a' }, timeoutMs: 30_000, at: T0, readOnly: true },
});

/** Every rule of the fold in one run: repeats, deltas, consent after running, final cards. */
const script: UiEvent[] = [
  session('c1'),
  { type: 'user_message', data: { id: 'u1', text: 'read /a', at: T0 } },
  { type: 'user_message', data: { id: 'u1', text: 'read /a', at: T0 } },
  { type: 'assistant_delta', data: { messageId: 'a1', seq: 0, delta: 'Let me ' } },
  { type: 'assistant_delta', data: { messageId: 'a1', seq: 0, delta: 'Let me ' } },
  { type: 'assistant_delta', data: { messageId: 'a1', seq: 1, delta: 'look.' } },
  initiated('t1'),
  initiated('t1'),
  { type: 'tool_progress', data: { id: 't1', state: 'awaiting_consent', status: 'awaiting_consent', detail: 'Read /a', at: T0 + 1 } },
  { type: 'tool_progress', data: { id: 't1', state: 'running', status: 'running', at: T0 + 2 } },
  { type: 'tool_progress', data: { id: 't1', state: 'awaiting_consent', status: 'running', at: T0 + 3 } },
  { type: 'tool_result', data: { id: 't1', success: true, status: 'completed', result: { text: 'hi' }, executedBy: 'client', at: T0 + 4 } },
  { type: 'tool_result', data: { id: 't1', success: false, status: 'timeout', errorCode: 'timeout', at: T0 + 5 } },
  { type: 'tool_progress', data: { id: 't1', state: 'running', status: 'running', at: T0 + 6 } },
  { type: 'tool_result', data: { id: 't9', success: false, status: 'denied', errorCode: 'permission_denied', errorMessage: 'no', executedBy: 'server', at: T0 + 7 } },
  { type: 'assistant_message', data: { id: 'a1', text: 'Let me look. It says hi.', inReplyTo: 'u1', at: T0 + 8 } },
  { type: 'assistant_delta', data: { messageId: 'a1', seq: 2, delta: ' late' } },
  { type: 'status', data: { state: 'idle' } },
  { type: 'error', data: { code: 'x', message: 'y' } },
];

describe('TranscriptFold', () => {
  let mock: MockBackend | undefined;
  afterEach(() => mock?.dispose());

  it('folds a whole conversation by the shared rules', () => {
    const t = transcriptFromEntries(fold(script).entries());
    expect(t).toEqual([
      { kind: 'user', id: 'u1', text: 'read /a', at: T0 },
      { kind: 'assistant', id: 'a1', text: 'Let me look. It says hi.', inReplyTo: 'u1', at: T0 },
      {
        kind: 'tool',
        call: {
          id: 't1', messageId: 'a1', toolName: 'read_local_file', execution: 'client', parameters: { path: '/a' },
          serverName: undefined, timeoutMs: 30_000, readOnly: true, destructive: undefined, openWorld: undefined,
          status: 'completed', initiatedAt: T0, awaitingConsentAt: T0 + 1, runningAt: T0 + 2, finishedAt: T0 + 4,
          detail: 'Read /a', result: { text: 'hi' }, errorCode: undefined, errorMessage: undefined, executedBy: 'client',
        },
      },
      {
        kind: 'tool',
        call: {
          id: 't9', messageId: '', toolName: 'unknown tool', execution: 'server', parameters: {}, timeoutMs: 30_000,
          status: 'denied', initiatedAt: T0 + 7, finishedAt: T0 + 7, result: undefined, errorCode: 'permission_denied',
          errorMessage: 'no', executedBy: 'server',
        },
      },
    ]);
  });

  it('starts empty for another conversation and keeps the same one across a rejoin', () => {
    const f = fold([session('c1'), { type: 'user_message', data: { id: 'u1', text: 'hi', at: T0 } }, session('c1')]);
    expect(f.entries()).toHaveLength(1);
    f.fold.apply(session('c2'));
    expect(f.entries()).toHaveLength(0);
    f.fold.apply({ type: 'user_message', data: { id: 'u1', text: 'hi again', at: T0 } });
    expect(f.entries()).toHaveLength(1);
  });

  it('continues from a snapshot transcript (a finished message takes no more deltas)', () => {
    const f = fold([]);
    f.fold.reset(entriesFromTranscript([{ kind: 'assistant', id: 'a1', text: 'Done.', at: T0 }, { kind: 'tool', call: { id: 't1', messageId: 'a1', toolName: 'x', execution: 'client', parameters: {}, timeoutMs: 1, status: 'running', initiatedAt: T0 } }]), 'c1');
    f.fold.apply({ type: 'assistant_delta', data: { messageId: 'a1', seq: 5, delta: 'more' } });
    f.fold.apply({ type: 'tool_result', data: { id: 't1', success: false, status: 'cancelled', errorCode: 'cancelled', at: T0 + 1 } });
    const t = transcriptFromEntries(f.entries());
    expect(t[0]).toEqual({ kind: 'assistant', id: 'a1', text: 'Done.', at: T0, inReplyTo: undefined });
    expect(t[1]?.kind === 'tool' && t[1].call.status).toBe('cancelled');
    expect(f.fold.tool('t1')?.finishedAt).toBe(T0 + 1);
  });

  it('the store and the mock backend fold the same events to the same transcript', () => {
    mock = new MockBackend({ configured: true, seedHistory: false });
    const store = new SessionStore(() => T0);
    const events = [...script, ...showcaseEvents(T0), ...failureShowcaseEvents(T0)];
    for (const e of events) {
      mock.emit(e);
      store.apply(e);
    }
    const fromStore = JSON.parse(JSON.stringify(transcriptFromEntries(store.entries)));
    expect(mock.snapshot().transcript).toEqual(fromStore);
    expect(fromStore.length).toBeGreaterThan(4);
  });
});
