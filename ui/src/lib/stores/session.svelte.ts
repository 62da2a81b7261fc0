/**
 * The conversation on screen: connection, assistant state, transcript and tool cards, kept
 * up to date by reducing backend events. No DOM, no backend: `apply` is the whole logic.
 */
import type {
  AssistantMessage,
  ConnectionEvent,
  ErrorEvent,
  SessionInfo,
  SessionSnapshot,
  StatusEvent,
  ToolCallRecord,
  ToolCardStatus,
  ToolResult,
  TranscriptEntry,
  UiEvent,
} from '../backend';

export type Entry =
  | { kind: 'user'; id: string; text: string; at: number }
  | {
      kind: 'assistant';
      id: string;
      text: string;
      at: number;
      inReplyTo?: string;
      /** Deltas are still arriving. */
      streaming: boolean;
      /** The next delta `seq` to accept; lower ones were applied already. */
      nextSeq: number;
    }
  | { kind: 'tool'; call: ToolCallRecord };

const FINAL: ReadonlySet<ToolCardStatus> = new Set([
  'completed',
  'error',
  'timeout',
  'denied',
  'cancelled',
]);

export function isFinal(status: ToolCardStatus): boolean {
  return FINAL.has(status);
}

/** The card state a ToolUseResult leads to. */
export function statusFromResult(r: Pick<ToolResult, 'success' | 'errorCode'>): ToolCardStatus {
  if (r.success) return 'completed';
  switch (r.errorCode) {
    case 'timeout':
      return 'timeout';
    case 'permission_denied':
      return 'denied';
    case 'cancelled':
      return 'cancelled';
    default:
      return 'error';
  }
}

function entryFromTranscript(t: TranscriptEntry): Entry {
  switch (t.kind) {
    case 'user':
      return { kind: 'user', id: t.id, text: t.text, at: t.at };
    case 'assistant':
      return {
        kind: 'assistant',
        id: t.id,
        text: t.text,
        at: t.at,
        inReplyTo: t.inReplyTo,
        streaming: false,
        nextSeq: Number.MAX_SAFE_INTEGER,
      };
    case 'tool':
      return { kind: 'tool', call: { ...t.call } };
  }
}

export function entriesFromTranscript(transcript: TranscriptEntry[]): Entry[] {
  return transcript.map(entryFromTranscript);
}

export class SessionStore {
  configured = $state(false);
  connection = $state<ConnectionEvent>({ state: 'disconnected' });
  status = $state<StatusEvent>({ state: 'idle' });
  session = $state<SessionInfo | null>(null);
  entries = $state<Entry[]>([]);
  lastError = $state<ErrorEvent | null>(null);

  /** Position of each message / tool call in `entries`, by id (entries are only appended). */
  #index = new Map<string, number>();
  #clock: () => number;

  constructor(clock: () => number = Date.now) {
    this.#clock = clock;
  }

  load(snapshot: SessionSnapshot): void {
    this.configured = snapshot.configured;
    this.connection = snapshot.connection;
    this.status = snapshot.status;
    this.session = snapshot.session;
    this.#reset(entriesFromTranscript(snapshot.transcript));
  }

  #reset(entries: Entry[]): void {
    this.entries = entries;
    this.#index.clear();
    entries.forEach((e, i) => this.#index.set(e.kind === 'tool' ? `t:${e.call.id}` : `m:${e.id}`, i));
  }

  #push(key: string, entry: Entry): Entry {
    this.entries.push(entry);
    this.#index.set(key, this.entries.length - 1);
    // Return the reactive proxy stored in the array, so later writes are seen.
    return this.entries[this.entries.length - 1] as Entry;
  }

  #message(id: string): Entry | undefined {
    const i = this.#index.get(`m:${id}`);
    return i === undefined ? undefined : this.entries[i];
  }

  tool(id: string): ToolCallRecord | undefined {
    const i = this.#index.get(`t:${id}`);
    const e = i === undefined ? undefined : this.entries[i];
    return e?.kind === 'tool' ? e.call : undefined;
  }

  get isReconnecting(): boolean {
    return this.connection.state === 'reconnecting';
  }

  get isConnected(): boolean {
    return this.connection.state === 'connected';
  }

  /** Tool calls not yet finished. */
  get activeTools(): ToolCallRecord[] {
    return this.entries
      .filter((e): e is Extract<Entry, { kind: 'tool' }> => e.kind === 'tool')
      .map((e) => e.call)
      .filter((c) => !isFinal(c.status));
  }

  apply(event: UiEvent): void {
    switch (event.type) {
      case 'connection':
        this.connection = event.data;
        if (event.data.state === 'connected') this.configured = true;
        return;
      case 'session':
        if (this.session && this.session.conversationId !== event.data.conversationId) {
          this.#reset([]);
        }
        this.session = event.data;
        this.configured = true;
        return;
      case 'status':
        this.status = event.data;
        return;
      case 'user_message': {
        if (this.#message(event.data.id)) return;
        const { id, text, at } = event.data;
        this.#push(`m:${id}`, { kind: 'user', id, text, at });
        return;
      }
      case 'assistant_delta': {
        const { messageId, seq, delta } = event.data;
        let e = this.#message(messageId);
        if (!e) {
          e = this.#push(`m:${messageId}`, {
            kind: 'assistant',
            id: messageId,
            text: '',
            at: this.#clock(),
            streaming: true,
            nextSeq: 0,
          });
        }
        if (e.kind !== 'assistant' || !e.streaming || seq < e.nextSeq) return;
        e.text += delta;
        e.nextSeq = seq + 1;
        return;
      }
      case 'assistant_message':
        this.#finishMessage(event.data);
        return;
      case 'tool_initiated': {
        const d = event.data;
        const existing = this.tool(d.id);
        if (existing) {
          // A repeated request (reconnect replay): refresh the description, keep the state.
          Object.assign(existing, {
            messageId: d.messageId,
            toolName: d.toolName,
            execution: d.execution,
            parameters: d.parameters,
            serverName: d.serverName,
            claims: d.claims,
            timeoutMs: d.timeoutMs,
          });
          return;
        }
        this.#push(`t:${d.id}`, {
          kind: 'tool',
          call: {
            id: d.id,
            messageId: d.messageId,
            toolName: d.toolName,
            execution: d.execution,
            parameters: d.parameters,
            serverName: d.serverName,
            claims: d.claims,
            timeoutMs: d.timeoutMs,
            readOnly: d.readOnly,
            destructive: d.destructive,
            openWorld: d.openWorld,
            status: 'initiated',
            initiatedAt: d.at,
          },
        });
        return;
      }
      case 'tool_progress': {
        const d = event.data;
        const call = this.tool(d.id);
        if (!call || isFinal(call.status)) return;
        if (d.state === 'awaiting_consent') {
          if (call.status === 'running') return;
          call.status = 'awaiting_consent';
          call.awaitingConsentAt = d.at;
        } else {
          call.status = 'running';
          call.runningAt = d.at;
        }
        if (d.detail !== undefined) call.detail = d.detail;
        return;
      }
      case 'tool_result': {
        const d = event.data;
        let call = this.tool(d.id);
        if (!call) {
          const e = this.#push(`t:${d.id}`, {
            kind: 'tool',
            call: {
              id: d.id,
              messageId: '',
              toolName: 'unknown tool',
              execution: d.executedBy === 'server' ? 'server' : 'client',
              parameters: {},
              timeoutMs: 30_000,
              status: 'initiated',
              initiatedAt: d.at,
            },
          });
          call = (e as Extract<Entry, { kind: 'tool' }>).call;
        }
        if (isFinal(call.status)) return;
        call.status = statusFromResult(d);
        call.finishedAt = d.at;
        call.result = d.result;
        call.errorCode = d.success ? undefined : d.errorCode;
        call.errorMessage = d.success ? undefined : d.errorMessage;
        call.executedBy = d.executedBy;
        return;
      }
      case 'error':
        this.lastError = event.data;
        return;
      case 'consent_request':
      case 'consent_withdrawn':
        return;
    }
  }

  #finishMessage(m: AssistantMessage): void {
    const e = this.#message(m.id);
    if (e && e.kind === 'assistant') {
      e.text = m.text;
      e.streaming = false;
      e.inReplyTo = m.inReplyTo;
      e.nextSeq = Number.MAX_SAFE_INTEGER;
      return;
    }
    if (e) return;
    this.#push(`m:${m.id}`, {
      kind: 'assistant',
      id: m.id,
      text: m.text,
      at: m.at,
      inReplyTo: m.inReplyTo,
      streaming: false,
      nextSeq: Number.MAX_SAFE_INTEGER,
    });
  }
}
