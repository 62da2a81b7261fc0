/**
 * The app's root state: the backend, the session and consent stores, the clock, the current
 * screen and transient notices. Components get it with `getApp()`.
 */
import { getContext, setContext } from 'svelte';
import {
  toCommandError,
  type Backend,
  type CommandError,
  type ConsentDecision,
  type ElicitationAction,
  type ElicitationEvent,
  type JsonObject,
  type Subscription,
  type UiEvent,
} from '../backend';
import { Clock } from './clock.svelte';
import { ConsentQueue } from './consent.svelte';
import { SessionStore } from './session.svelte';

export type Screen = 'chat' | 'history' | 'settings';
export type SettingsSection = 'connection' | 'tools' | 'servers' | 'folders' | 'voice' | 'notifications' | 'desktop' | 'data' | 'about';

export interface Notice {
  id: number;
  kind: 'info' | 'error';
  text: string;
}

export class AppState {
  readonly backend: Backend;
  readonly clock = new Clock();
  readonly session: SessionStore;
  readonly consents: ConsentQueue;

  screen = $state<Screen>('chat');
  settingsSection = $state<SettingsSection>('connection');
  notices = $state<Notice[]>([]);
  /** MCP elicitation forms waiting for the user, oldest first. */
  elicitations = $state<ElicitationEvent[]>([]);
  ready = $state(false);
  loadError = $state<CommandError | null>(null);
  /** The user chose "Set up a connection" on the first-run screen. */
  setupRequested = $state(false);

  #sub: Subscription | null = null;
  #noticeId = 0;

  constructor(backend: Backend) {
    this.backend = backend;
    const now = () => Date.now();
    this.session = new SessionStore(now);
    this.consents = new ConsentQueue(now);
  }

  /** Subscribes and loads the snapshot. Events that arrive before the snapshot wait for it. */
  async start(): Promise<void> {
    const early: UiEvent[] = [];
    let loaded = false;
    try {
      this.#sub = await this.backend.subscribe((e) => {
        if (loaded) this.apply(e);
        else early.push(e);
      });
      this.session.load(this.#sub.snapshot);
      this.consents.load(this.#sub.snapshot.pendingConsents);
      loaded = true;
      for (const e of early) this.apply(e);
      // Voice is not in the snapshot: a reloaded page asks (a failure leaves it off).
      try {
        this.session.voice = await this.backend.call('voice_status', {});
      } catch {
        /* voice stays shown as off */
      }
      this.ready = true;
    } catch (e) {
      this.loadError = toCommandError(e);
    }
    this.clock.start();
  }

  stop(): void {
    this.#sub?.close();
    this.#sub = null;
    this.clock.stop();
  }

  apply(event: UiEvent): void {
    this.session.apply(event);
    this.consents.apply(event);
    if (event.type === 'error') this.notify(event.data.message, 'error');
    if (event.type === 'raised') {
      // The system-wide shortcut brought the window forward: the message box takes the focus.
      this.screen = 'chat';
      setTimeout(() => document.getElementById('composer-input')?.focus(), 0);
    }
    if (event.type === 'elicitation') this.elicitations.push(event.data);
    if (event.type === 'elicitation_closed') {
      const id = event.data.id;
      this.elicitations = this.elicitations.filter((e) => e.id !== id);
    }
  }

  notify(text: string, kind: Notice['kind'] = 'info'): void {
    const id = ++this.#noticeId;
    this.notices.push({ id, kind, text });
    setTimeout(() => this.dismiss(id), kind === 'error' ? 10_000 : 5_000);
  }

  dismiss(id: number): void {
    const i = this.notices.findIndex((n) => n.id === id);
    if (i >= 0) this.notices.splice(i, 1);
  }

  /** Runs a command and turns a failure into a notice; returns undefined on failure. */
  async run<T>(what: string, p: Promise<T>): Promise<T | undefined> {
    try {
      return await p;
    } catch (e) {
      const err = toCommandError(e);
      this.notify(`${what}: ${err.message}`, 'error');
      return undefined;
    }
  }

  /** Answers an MCP server's form; it closes whatever the answer's fate. */
  async answerElicitation(id: string, action: ElicitationAction, content: JsonObject | null): Promise<void> {
    this.elicitations = this.elicitations.filter((e) => e.id !== id);
    await this.run('Could not send your answer', this.backend.call('mcp_elicitation_answer', { id, action, content }));
  }

  /** Sends `text` (with the staged files: then it may be empty). */
  async send(text: string, withFiles = false): Promise<boolean> {
    const trimmed = text.trim();
    if (!trimmed && !withFiles) return false;
    const msg = await this.run('Could not send', this.backend.call('chat_send', { text: trimmed }));
    if (!msg) return false;
    this.session.apply({ type: 'user_message', data: msg });
    return true;
  }

  async answerConsent(consentId: string, decision: ConsentDecision): Promise<void> {
    if (!this.consents.remove(consentId)) return;
    try {
      await this.backend.call('consent_answer', { consentId, decision });
    } catch (e) {
      const err = toCommandError(e);
      // The backend's own timeout or a server cancel got there first: nothing to tell.
      if (err.code !== 'unknown_consent') this.notify(`Could not send your answer: ${err.message}`, 'error');
    }
  }

  openLink(url: string): void {
    void this.run('Could not open the link', this.backend.call('chat_open_link', { url }));
  }

  async connect(): Promise<void> {
    await this.run('Could not connect', this.backend.call('session_connect', {}));
  }

  async startDemo(): Promise<void> {
    const ok = await this.run('Could not start the demo', this.backend.call('session_start_demo', {}));
    if (ok !== undefined) this.screen = 'chat';
  }

  openSettings(section: SettingsSection): void {
    this.settingsSection = section;
    this.screen = 'settings';
  }
}

const KEY = Symbol('outpost-app');

export function setApp(app: AppState): void {
  setContext(KEY, app);
}

export function getApp(): AppState {
  const app = getContext<AppState | undefined>(KEY);
  if (!app) throw new Error('AppState missing: wrap the component in <AppProvider> or call setApp');
  return app;
}
