/**
 * The conversation on screen: connection, assistant state, transcript and tool cards, kept
 * up to date by reducing backend events. No DOM, no backend: `apply` is the whole logic; the
 * transcript part of it is the shared `TranscriptFold` (../transcript.ts).
 */
import type {
  AttachmentView,
  ConnectionEvent,
  ErrorEvent,
  SessionInfo,
  SessionSnapshot,
  StatusEvent,
  ToolCallRecord,
  UiEvent,
  VoiceLevel,
  VoiceStatus,
} from '../backend';
import { TranscriptFold, entriesFromTranscript, type Entry } from '../transcript';

// The fold lives in ../transcript.ts (shared with the mock backend); re-exported for the views.
export { entriesFromTranscript, type Entry } from '../transcript';

export class SessionStore {
  configured = $state(false);
  connection = $state<ConnectionEvent>({ state: 'disconnected' });
  status = $state<StatusEvent>({ state: 'idle' });
  session = $state<SessionInfo | null>(null);
  entries = $state<Entry[]>([]);
  lastError = $state<ErrorEvent | null>(null);
  /** Voice: the mic button's state, and the levels while voice is on. */
  voice = $state<VoiceStatus>({
    on: false,
    mode: 'push_to_talk',
    muted: false,
    talking: false,
    transmitting: false,
    input: { state: 'off' },
    output: { state: 'off' },
    echoCancellation: true,
    echoCancelling: false,
  });
  level = $state<VoiceLevel>({ input: 0, output: 0 });
  /** Files that go with the next message, as they will be sent. */
  staged = $state<AttachmentView[]>([]);

  #fold: TranscriptFold;

  constructor(clock: () => number = Date.now) {
    this.#fold = new TranscriptFold(
      () => this.entries,
      (entries) => {
        this.entries = entries;
      },
      clock,
    );
  }

  load(snapshot: SessionSnapshot): void {
    this.configured = snapshot.configured;
    this.connection = snapshot.connection;
    this.status = snapshot.status;
    this.session = snapshot.session;
    this.#fold.reset(entriesFromTranscript(snapshot.transcript), snapshot.session?.conversationId ?? null);
  }

  tool(id: string): ToolCallRecord | undefined {
    return this.#fold.tool(id);
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
      .filter((c) => c.finishedAt === undefined);
  }

  apply(event: UiEvent): void {
    this.#fold.apply(event);
    switch (event.type) {
      case 'connection':
        this.connection = event.data;
        if (event.data.state === 'connected') this.configured = true;
        return;
      case 'session':
        this.session = event.data;
        this.configured = true;
        return;
      case 'status':
        this.status = event.data;
        return;
      case 'error':
        this.lastError = event.data;
        return;
      case 'voice':
        this.voice = event.data;
        if (!event.data.on) this.level = { input: 0, output: 0 };
        return;
      case 'voice_level':
        this.level = event.data;
        return;
      case 'attachments':
        this.staged = event.data.items;
        return;
      default:
        return;
    }
  }
}
