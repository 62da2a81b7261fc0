/**
 * The transcript fold: how backend events build a conversation's entries (messages and tool
 * cards). One implementation for the UI's `SessionStore` (which folds onto its reactive
 * array) and for `MockBackend` (which folds onto a plain one for its snapshots and history),
 * following the same rules as the shell's own fold (outpost-desktop `session/live.rs`):
 *
 * - a message or tool call is added once, by id; repeats refresh, never duplicate;
 * - deltas apply in `seq` order, and stop once the whole message arrived (it wins);
 * - a card's status is the one the event carries (the core's machine decides it; nothing
 *   here works it out from an error code); a finished card never changes again;
 * - a result for a call never announced gets a placeholder card;
 * - a new conversation (a `session` event with another conversation id) starts empty;
 * - a continued conversation (a `conversation` event) starts from its stored transcript.
 */
import type {
  AssistantMessage,
  AttachmentView,
  SpeechText,
  ToolCallRecord,
  TranscriptEntry,
  UiEvent,
} from './backend';

export type Entry =
  | {
      kind: 'user';
      id: string;
      text: string;
      at: number;
      /** Said aloud (the agent's transcript): still changing, or final. Absent when typed. */
      speech?: SpeechText;
      /** Files given with it. */
      attachments?: AttachmentView[];
    }
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

function entryFromTranscript(t: TranscriptEntry): Entry {
  switch (t.kind) {
    case 'user': {
      const e: Entry = t.speech
        ? { kind: 'user', id: t.id, text: t.text, at: t.at, speech: t.speech }
        : { kind: 'user', id: t.id, text: t.text, at: t.at };
      if (t.attachments?.length) e.attachments = t.attachments.map((a) => ({ ...a }));
      return e;
    }
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

/** The contract's form of the entries (what a snapshot or the history holds). */
export function transcriptFromEntries(entries: Entry[]): TranscriptEntry[] {
  return entries.map((e): TranscriptEntry => {
    switch (e.kind) {
      case 'user': {
        const t: TranscriptEntry = e.speech
          ? { kind: 'user', id: e.id, text: e.text, at: e.at, speech: e.speech }
          : { kind: 'user', id: e.id, text: e.text, at: e.at };
        if (e.attachments?.length) t.attachments = e.attachments.map((a) => ({ ...a }));
        return t;
      }
      case 'assistant': {
        const { streaming: _s, nextSeq: _n, ...m } = e;
        return m;
      }
      case 'tool':
        return { kind: 'tool', call: { ...e.call } };
    }
  });
}

/**
 * Folds events onto an entry list it reaches through `get`/`set`, so the list may be a
 * Svelte state (the store) or a plain array (the mock). Entries are only appended or
 * replaced as a whole, so an id → position index stays valid.
 */
export class TranscriptFold {
  #index = new Map<string, number>();
  #conversationId: string | null = null;
  readonly #get: () => Entry[];
  readonly #set: (entries: Entry[]) => void;
  readonly #clock: () => number;

  constructor(get: () => Entry[], set: (entries: Entry[]) => void, clock: () => number = Date.now) {
    this.#get = get;
    this.#set = set;
    this.#clock = clock;
  }

  /** Starts over from `entries` (a snapshot's transcript, or nothing). */
  reset(entries: Entry[], conversationId: string | null = this.#conversationId): void {
    this.#set(entries);
    this.#conversationId = conversationId;
    this.#index.clear();
    this.#get().forEach((e, i) => this.#index.set(e.kind === 'tool' ? `t:${e.call.id}` : `m:${e.id}`, i));
  }

  #push(key: string, entry: Entry): Entry {
    const list = this.#get();
    list.push(entry);
    this.#index.set(key, list.length - 1);
    // Return the element as stored (a Svelte state proxy), so later writes are seen.
    return list[list.length - 1] as Entry;
  }

  #message(id: string): Entry | undefined {
    const i = this.#index.get(`m:${id}`);
    return i === undefined ? undefined : this.#get()[i];
  }

  /** The card of call `id`. */
  tool(id: string): ToolCallRecord | undefined {
    const i = this.#index.get(`t:${id}`);
    const e = i === undefined ? undefined : this.#get()[i];
    return e?.kind === 'tool' ? e.call : undefined;
  }

  /** Applies one event; events that do not touch the transcript are ignored. */
  apply(event: UiEvent): void {
    switch (event.type) {
      case 'session': {
        const id = event.data.conversationId;
        if (this.#conversationId !== null && this.#conversationId !== id) this.reset([], id);
        this.#conversationId = id;
        return;
      }
      case 'conversation':
        this.reset(entriesFromTranscript(event.data.transcript), event.data.conversationId);
        return;
      case 'user_message': {
        if (this.#message(event.data.id)) return;
        const { id, text, at, attachments } = event.data;
        const entry: Entry = { kind: 'user', id, text, at };
        if (attachments?.length) entry.attachments = attachments.map((a) => ({ ...a }));
        this.#push(`m:${id}`, entry);
        return;
      }
      case 'user_transcript': {
        // Interim text is replaced by later text of the same segment; final stays final.
        const { id, text, at, speech } = event.data;
        const e = this.#message(id);
        if (!e) {
          this.#push(`m:${id}`, { kind: 'user', id, text, at, speech });
        } else if (e.kind === 'user' && e.speech !== undefined) {
          e.text = text;
          e.speech = speech;
        }
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
        if (!call || call.finishedAt !== undefined) return;
        if (d.status !== call.status) {
          if (d.status === 'awaiting_consent') call.awaitingConsentAt = d.at;
          if (d.status === 'running') call.runningAt = d.at;
        }
        call.status = d.status;
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
        if (call.finishedAt !== undefined) return;
        call.status = d.status;
        call.finishedAt = d.at;
        call.result = d.result;
        call.errorCode = d.success ? undefined : d.errorCode;
        call.errorMessage = d.success ? undefined : d.errorMessage;
        call.executedBy = d.executedBy;
        return;
      }
      case 'connection':
      case 'status':
      case 'consent_request':
      case 'consent_withdrawn':
      case 'error':
      case 'voice':
      case 'voice_level':
      case 'attachments':
      case 'raised':
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
