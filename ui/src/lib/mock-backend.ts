/**
 * An in-memory backend that follows CONTRACT.md: used by the component tests and by
 * `npm run dev` (demo mode in a plain browser). It plays a scripted assistant: messages that
 * mention a file ask to read it (with consent), "write" asks for a destructive tool, "search"
 * runs a server-side MCP tool, "slow" times out; anything else gets a streamed Markdown answer.
 */
import {
  HIGHLIGHT_END,
  HIGHLIGHT_START,
  type AttachmentView,
  type Backend,
  type CommandError,
  type CommandName,
  type Commands,
  type ConnectionEvent,
  type ConsentDecision,
  type ConsentRequest,
  type ConversationSummary,
  type JsonObject,
  type McpSandboxInfo,
  type McpServerDraft,
  type McpServerInfo,
  type McpServerTools,
  type McpToolInfo,
  type RememberedDecision,
  type SearchHit,
  type SessionInfo,
  type SessionSnapshot,
  type Settings,
  type StatusEvent,
  type Subscription,
  type SystemSettings,
  type ToolCallRecord,
  type ToolCallStatus,
  type ToolHints,
  type ToolInfo,
  type ToolResult,
  type ToolRule,
  type TranscriptEntry,
  type UiEvent,
  type VoiceStatus,
} from './backend';
import { TranscriptFold, transcriptFromEntries, type Entry } from './transcript';

export interface MockOptions {
  /** Whether a connection is already set up (false shows first run). */
  configured?: boolean;
  /** Multiplies every scripted delay; 0 runs the script as fast as timers allow. */
  delayScale?: number;
  /** Seed a few past conversations. */
  seedHistory?: boolean;
}

const fail = (code: string, message: string): CommandError => ({ code, message });

let idCounter = 0;
function nanoid(): string {
  idCounter += 1;
  return `m${Date.now().toString(36)}${idCounter.toString(36).padStart(4, '0')}`.slice(0, 21);
}

function schema(props: Record<string, string>, required: string[]): JsonObject {
  return {
    type: 'object',
    properties: Object.fromEntries(Object.entries(props).map(([k, t]) => [k, { type: t }])),
    required,
  };
}

export function defaultTools(): ToolInfo[] {
  const tools: (Omit<ToolInfo, keyof ToolHints> & ToolHints)[] = [
    { name: 'read_local_file', description: 'Read a file on this computer.', parameters: schema({ path: 'string', maxBytes: 'integer' }, ['path']), readOnly: true, enabled: true, rule: 'ask' },
    { name: 'list_directory', description: 'List the entries of a folder.', parameters: schema({ path: 'string' }, ['path']), readOnly: true, enabled: true, rule: 'ask' },
    { name: 'file_info', description: 'Size, type and dates of a file.', parameters: schema({ path: 'string' }, ['path']), readOnly: true, enabled: true, rule: 'allow' },
    { name: 'search_files', description: 'Find files by name or content below a folder.', parameters: schema({ root: 'string', query: 'string' }, ['root', 'query']), readOnly: true, enabled: true, rule: 'ask' },
    { name: 'write_file', description: 'Create or replace a file.', parameters: schema({ path: 'string', content: 'string' }, ['path', 'content']), destructive: true, enabled: true, rule: 'ask' },
    { name: 'open_url', description: 'Open a web address in the browser.', parameters: schema({ url: 'string' }, ['url']), openWorld: true, enabled: false, rule: 'ask' },
    { name: 'calculator', description: 'Evaluate arithmetic.', parameters: schema({ expression: 'string' }, ['expression']), readOnly: true, enabled: true, rule: 'allow' },
    { name: 'system_info', description: 'Operating system, CPU and memory.', parameters: schema({}, []), readOnly: true, enabled: true, rule: 'allow' },
    { name: 'web_search', description: 'Search the web.', serverName: 'web-tools', parameters: schema({ query: 'string' }, ['query']), readOnly: true, openWorld: true, enabled: true, rule: 'allow' },
  ];
  // The shell always sends all three hints.
  return tools.map((t) => ({ readOnly: false, destructive: false, openWorld: false, ...t }));
}

export function defaultSettings(configured: boolean): Settings {
  return {
    connection: {
      authMode: 'token',
      livekitUrl: configured ? 'ws://127.0.0.1:7880' : '',
      tokenEndpoint: '',
      room: configured ? 'outpost-demo' : '',
      identity: configured ? 'alice' : '',
      agentName: '',
      apiKey: '',
      hasToken: configured,
      hasApiSecret: false,
    },
    consentTimeoutSecs: 120,
    folders: [
      { path: '~/Documents', access: 'allow' },
      { path: '~/.ssh', access: 'deny' },
    ],
    notifications: { enabled: true, onConsent: true, onLongTask: true, longTaskSecs: 20 },
    retentionDays: 90,
  };
}

interface Conversation {
  summary: ConversationSummary;
  transcript: TranscriptEntry[];
}

interface PendingAsk {
  request: ConsentRequest;
  timer: ReturnType<typeof setTimeout> | undefined;
  onAnswer: (d: ConsentDecision | 'timeout') => void;
}

// JSON round trip rather than structuredClone: arguments may be Svelte state proxies.
const clone = <T>(v: T): T => (v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T));

/** A draft's value kept in the keyring: every one not marked plain (as the real app). */
const secretIn = (d: McpServerDraft, k: string) => !(d.plain ?? []).includes(k);

/** A stdio draft with the sandbox's defaults. */
export const stdioDraft = (name: string, command: string, args: string[]): McpServerDraft => ({
  name, command, args, url: '', env: {}, plain: [], cwd: '', enabled: true,
  sandbox: 'on', network: 'auto', folders: 'read_write', read: [], write: [],
});

const LAUNCHERS = ['npx', 'uvx', 'pnpm', 'bunx', 'pipx'];

/**
 * What a stdio server may touch, as the real app plans it (outpost_mcp::sandbox), in
 * small: an allowed folder, the draft's own folders, a launcher's cache and network.
 */
export function mockSandbox(d: McpServerDraft, noLandlock = false): McpSandboxInfo | undefined {
  if (!d.command) return undefined;
  const launcher = LAUNCHERS.includes(d.command);
  const network = d.network === 'on' || (d.network === 'auto' && launcher);
  const networkWhy = d.network === 'auto'
    ? (launcher ? `on: ${d.command} downloads the server's package (network = false in mcp.toml turns it off)` : 'off: it does not need it (network = true in mcp.toml turns it on)')
    : `${d.network} in mcp.toml (network = ${d.network === 'on'})`;
  const base = { network, networkWhy, leftOut: [], limits: [] };
  if (d.sandbox === 'off') {
    const why = 'the sandbox is off in mcp.toml (sandbox = "off")';
    return { ...base, state: 'unsandboxed', why, summary: `NOT sandboxed (${why}): it can reach everything you can`, grants: [] };
  }
  if (noLandlock) {
    if (d.sandbox === 'if_available') {
      const why = "this computer's kernel cannot sandbox programs; you agreed to run it unsandboxed";
      return { ...base, state: 'unsandboxed', why, summary: `NOT sandboxed (${why}): it can reach everything you can`, grants: [] };
    }
    const why = `this computer's kernel cannot sandbox programs (it has no Landlock), so Outpost runs '${d.name}' only if you agree to run it unsandboxed`;
    return { ...base, state: 'refused', why, summary: `not started: ${why}`, grants: [] };
  }
  const grants: McpSandboxInfo['grants'] = [];
  if (launcher) grants.push({ path: '/home/demo/.npm', access: 'read_write', kind: 'launcher', why: `${d.command}'s cache` });
  if (d.folders !== 'none') grants.push({ path: '/home/demo/Projects', access: d.folders === 'read' ? 'read' : 'read_write', kind: 'allowed_folder', why: 'allowed in the policy' });
  for (const p of d.read) grants.push({ path: p, access: 'read', kind: 'extra', why: 'read in mcp.toml' });
  for (const p of d.write) grants.push({ path: p, access: 'read_write', kind: 'extra', why: 'write in mcp.toml' });
  const data = (a: string) => grants.filter((g) => g.access === a && (g.kind === 'allowed_folder' || g.kind === 'extra')).map((g) => g.path).join(', ');
  const [w, r] = [data('read_write'), data('read')];
  const reach = w && r ? `reads and writes ${w}; reads ${r}` : w ? `reads and writes ${w}` : r ? `reads ${r}` : 'none of your folders';
  return { ...base, state: 'sandboxed', summary: `sandboxed: ${reach}; ${network ? 'network on' : 'no network'}`, grants };
}

export class MockBackend implements Backend {
  readonly settings: Settings;
  readonly tools: ToolInfo[];
  /** `mcp.toml`, as Settings → Tool servers sees it. */
  /** What each server was added or saved with (the form's view; secrets are blanked on read). */
  mcpDrafts = new Map<string, McpServerDraft>();
  /** What each server lists (name, description, claims); its tools' rules by Outpost name. */
  mcpToolLists = new Map<string, Omit<McpToolInfo, 'outpostName' | 'rule' | 'effective' | 'offered'>[]>([
    ['web-tools', [
      { name: 'web_search', description: 'Search the web.', claims: { readOnly: true, openWorld: true } },
      { name: 'fetch_page', title: 'Fetch a page', description: 'Fetches one web page.' },
    ]],
  ]);
  readonly mcpToolRules = new Map<string, ToolRule>();
  mcpServers: McpServerInfo[] = [
    { name: 'web-tools', transport: 'stdio', target: 'npx -y web-tools-mcp', enabled: true, status: 'running', toolCount: 1, protocol: '2026-07-28', hasLog: true, rule: 'ask',
      sandbox: mockSandbox(stdioDraft('web-tools', 'npx', ['-y', 'web-tools-mcp'])) },
    { name: 'notes', transport: 'http', target: 'http://127.0.0.1:8765/mcp', enabled: false, status: 'disabled', toolCount: 0, hasLog: false, rule: 'ask', signIn: 'not_signed_in' },
  ];
  /** Open elicitation forms (undefined) and their answers, by id. */
  readonly elicitationAnswers = new Map<string, { action: string; content: JsonObject | null } | undefined>();
  readonly mcpLogs = new Map<string, string>([['web-tools', '--- started\nweb-tools-mcp listening on stdio\n']]);
  readonly secrets = new Map<string, string>();
  /** Plays a kernel without Landlock: stdio servers are not started unless the user agreed. */
  noLandlock = false;
  remembered: RememberedDecision[] = [];
  /** Voice: what the mic button shows; the devices it offers. */
  voice: VoiceStatus = {
    on: false,
    mode: 'push_to_talk',
    muted: false,
    talking: false,
    transmitting: false,
    input: { state: 'off' },
    output: { state: 'off' },
    echoCancellation: true,
    echoCancelling: false,
  };
  audioInputs = [
    { id: 'alsa:default', name: 'Default microphone', isDefault: true },
    { id: 'alsa:usb-headset', name: 'USB headset', isDefault: false },
  ];
  audioOutputs = [
    { id: 'alsa:default', name: 'Default output', isDefault: true },
    { id: 'alsa:usb-headset', name: 'USB headset', isDefault: false },
  ];
  audioChoice: { input: string | null; output: string | null } = { input: null, output: null };
  /** Set to make `voice_start` find no microphone (the no-device state). */
  noMicrophone = false;
  conversations = new Map<string, Conversation>();
  system: SystemSettings = {
    keepInTray: false,
    startAtLogin: false,
    autostartFile: '~/.config/autostart/dev.outpost.app.desktop',
    shortcut: 'Ctrl+Alt+Space',
    shortcutStatus: 'Ctrl+Alt+Space works in every window (an X11 key grab).',
    shortcutActive: true,
  };
  /** Files that go with the next message. */
  staged: AttachmentView[] = [];
  /** Every command received, for tests. */
  readonly calls: { cmd: string; args: unknown }[] = [];

  #listeners = new Set<(e: UiEvent) => void>();
  #connection: ConnectionEvent = { state: 'disconnected' };
  #status: StatusEvent = { state: 'idle' };
  #session: SessionInfo | null = null;
  #transcript: Entry[] = [];
  #fold = new TranscriptFold(
    () => this.#transcript,
    (entries) => {
      this.#transcript = entries;
    },
  );
  #pending = new Map<string, PendingAsk>();
  #configured: boolean;
  #scale: number;
  #timers = new Set<ReturnType<typeof setTimeout>>();
  #folderPick = 0;
  /** When set, a sign-in waits (as one waiting for the browser) for finishSignIn or a cancel. */
  holdSignIns = false;
  #signIns = new Map<string, { done: () => void; cancel: () => void }>();

  /** The user finished the login in the browser (with holdSignIns). */
  finishSignIn(name: string): void {
    const waiting = this.#signIns.get(name);
    this.#signIns.delete(name);
    waiting?.done();
  }

  constructor(opts: MockOptions = {}) {
    this.#configured = opts.configured ?? false;
    this.#scale = opts.delayScale ?? 1;
    this.settings = defaultSettings(this.#configured);
    this.tools = defaultTools();
    if (this.#configured) this.secrets.set('livekit_token', 'mock-token');
    if (opts.seedHistory ?? true) this.#seedHistory();
  }

  // ----------------------------------------------------------------- Backend interface

  async subscribe(onEvent: (event: UiEvent) => void): Promise<Subscription> {
    this.#listeners.add(onEvent);
    return {
      snapshot: this.snapshot(),
      close: () => {
        this.#listeners.delete(onEvent);
      },
    };
  }

  snapshot(): SessionSnapshot {
    return clone({
      configured: this.#configured,
      connection: this.#connection,
      status: this.#status,
      session: this.#session,
      transcript: transcriptFromEntries(this.#transcript),
      pendingConsents: [...this.#pending.values()].map((p) => p.request),
    });
  }

  async call<K extends CommandName>(cmd: K, args: Commands[K]['args']): Promise<Commands[K]['returns']> {
    this.calls.push({ cmd, args: clone(args) });
    const handler = (this.#handlers as Record<string, (a: unknown) => unknown>)[cmd];
    if (!handler) throw fail('unknown_command', `Unknown command ${cmd}`);
    return clone((await handler(args)) as Commands[K]['returns']);
  }

  /** Pushes an event to the UI and keeps the mock's own record in step. */
  emit(event: UiEvent): void {
    this.#record(event);
    for (const l of [...this.#listeners]) l(clone(event));
  }

  /** Stops every scripted timer (tests call it in afterEach). */
  dispose(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    for (const p of this.#pending.values()) if (p.timer) clearTimeout(p.timer);
    this.#pending.clear();
  }

  // ----------------------------------------------------------------- commands

  #handlers: { [K in CommandName]: (args: Commands[K]['args']) => Promise<Commands[K]['returns']> | Commands[K]['returns'] } = {
    session_connect: () => {
      const c = this.settings.connection;
      if (!c.livekitUrl || !c.room || (c.authMode === 'token' ? !this.secrets.has('livekit_token') : !c.tokenEndpoint)) {
        throw fail('not_configured', 'Set the LiveKit URL, the room and a token (or token endpoint) first.');
      }
      this.#goOnline('Assistant');
      return null;
    },
    session_start_demo: () => {
      this.#goOnline('Outpost demo assistant');
      return null;
    },
    session_disconnect: () => {
      this.emit({ type: 'connection', data: { state: 'disconnected' } });
      return null;
    },
    session_new_conversation: () => {
      if (!this.#session) return null;
      this.#archiveCurrent();
      const s = { ...this.#session, conversationId: nanoid(), sessionId: nanoid() };
      this.emit({ type: 'session', data: s });
      return s;
    },
    session_test_connection: ({ connection, token }) => {
      if (!/^wss?:\/\/./.test(connection.livekitUrl)) {
        return { ok: false, message: 'The LiveKit URL must start with ws:// or wss://.' };
      }
      if (!connection.room.trim()) return { ok: false, message: 'Enter the name of the room to join.' };
      if (connection.authMode === 'token' && !token && !this.secrets.has('livekit_token')) {
        return { ok: false, message: 'Enter a token, or switch to a token endpoint.' };
      }
      if (connection.authMode === 'endpoint' && !/^https?:\/\/./.test(connection.tokenEndpoint)) {
        return { ok: false, message: 'The token endpoint must be an http:// or https:// address.' };
      }
      return { ok: true, message: `Reached ${connection.livekitUrl} and joined room “${connection.room}” in 42 ms.`, latencyMs: 42 };
    },

    chat_send: ({ text }) => {
      if (!text.trim() && this.staged.length === 0) throw fail('invalid_argument', 'The message is empty.');
      if (this.#connection.state !== 'connected') throw fail('not_connected', 'Not connected to the assistant.');
      const attachments = this.staged.map((a) => ({ ...a }));
      this.staged = [];
      const msg = attachments.length ? { id: nanoid(), text, at: Date.now(), attachments } : { id: nanoid(), text, at: Date.now() };
      this.emit({ type: 'user_message', data: msg });
      if (attachments.length) {
        this.emit({ type: 'attachments', data: { items: [] } });
        const said = attachments.map((a) => `${a.name}, ${a.mimeType}, ${a.size} bytes, sha256 ${a.sha256}`).join('; ');
        this.#later(400, () => this.#stream(`You gave me: ${said}.`, msg.id));
      } else {
        this.#reply(msg.id, text);
      }
      return msg;
    },
    chat_attach_pick: () => this.#stage(MOCK_PICKED),
    chat_attach_data: ({ name, mimeType, data }) => {
      if (/^(id_rsa|id_ed25519|\.env.*|.*\.pem|.*\.key)$/i.test(name)) {
        throw fail('attachment_refused', `Outpost will not send ${name}: files named like '${name}' are on the built-in secrets list.`);
      }
      const size = Math.floor((data.length * 3) / 4) - (data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0);
      const type = mimeType ?? 'application/octet-stream';
      return this.#stage({
        name,
        mimeType: type,
        size,
        sha256: fakeSha256(data),
        image: type.startsWith('image/') ? `data:${type};base64,${data}` : undefined,
      });
    },
    chat_attach_remove: ({ id }) => {
      this.staged = this.staged.filter((a) => a.id !== id);
      this.emit({ type: 'attachments', data: { items: clone(this.staged) } });
      return this.staged;
    },
    chat_open_link: ({ url }) => {
      if (!/^(https?:|mailto:)/i.test(url)) throw fail('invalid_argument', `Refusing to open ${url}`);
      return null;
    },

    consent_answer: ({ consentId, decision }) => {
      const p = this.#pending.get(consentId);
      if (!p) throw fail('unknown_consent', 'That question is no longer open.');
      if (!p.request.options.includes(decision)) {
        throw fail('invalid_argument', `“${decision}” is not an answer offered for this question.`);
      }
      this.#pending.delete(consentId);
      if (p.timer) clearTimeout(p.timer);
      // As the core's consent broker does: the answer closes the question in every window.
      this.emit({ type: 'consent_withdrawn', data: { consentId, reason: 'answered' } });
      p.onAnswer(decision);
      return null;
    },
    consent_list_remembered: () => this.remembered,
    consent_revoke: ({ id }) => {
      const before = this.remembered.length;
      this.remembered = this.remembered.filter((r) => r.id !== id);
      if (this.remembered.length === before) throw fail('not_found', 'No such remembered decision.');
      return null;
    },

    settings_get: () => ({
      ...this.settings,
      connection: {
        ...this.settings.connection,
        hasToken: this.secrets.has('livekit_token'),
        hasApiSecret: this.secrets.has('livekit_api_secret'),
      },
    }),
    settings_set: ({ settings }) => {
      if (settings.consentTimeoutSecs < 1 || settings.consentTimeoutSecs > 86_400) {
        throw fail('invalid_argument', 'The consent timeout must be between 1 and 86400 seconds.');
      }
      if (settings.retentionDays < 0) throw fail('invalid_argument', 'Retention must be 0 (forever) or more days.');
      for (const f of settings.folders) {
        if (!(f.path === '~' || f.path.startsWith('~/') || f.path.startsWith('/'))) {
          throw fail('invalid_argument', `Folder “${f.path}” must be absolute or start with ~/.`);
        }
      }
      Object.assign(this.settings, clone(settings));
      this.settings.connection.hasToken = this.secrets.has('livekit_token');
      this.settings.connection.hasApiSecret = this.secrets.has('livekit_api_secret');
      if (settings.connection.livekitUrl && settings.connection.room) this.#configured = true;
      return this.#handlers.settings_get({}) as Settings;
    },
    settings_trust_policy: () => {
      delete this.settings.policyUnconfirmed;
      return this.#handlers.settings_get({}) as Settings;
    },
    settings_set_secret: ({ name, value }) => {
      if (!value) throw fail('invalid_argument', 'The secret is empty.');
      this.secrets.set(name, value);
      return null;
    },
    settings_clear_secret: ({ name }) => {
      this.secrets.delete(name);
      return null;
    },
    settings_pick_folder: () => {
      const choices = ['~/Projects', '~/Downloads', '/srv/shared'];
      return choices[this.#folderPick++ % choices.length] ?? null;
    },
    settings_about: () => ({
      appVersion: '0.1.0 (demo mode)',
      coreVersion: '0.1.0',
      protocolVersion: 1,
      dataDir: '~/.local/share/outpost',
      policyFile: '~/.config/outpost/policy.toml',
    }),

    history_list: ({ limit, offset }) =>
      [...this.conversations.values()]
        .map((c) => c.summary)
        .sort((a, b) => b.updatedAt - a.updatedAt)
        .slice(offset, offset + limit),
    history_search: ({ query, limit, highlightStart, highlightEnd }) => this.#search(query, limit, highlightStart, highlightEnd),
    history_get: ({ conversationId }) => {
      const c = this.conversations.get(conversationId);
      if (!c) throw fail('not_found', `No conversation ${conversationId}.`);
      return c;
    },
    history_continue: ({ conversationId }) => {
      const c = this.conversations.get(conversationId);
      if (!c) throw fail('not_found', `No conversation ${conversationId}.`);
      if (!this.#session || this.#connection.state !== 'connected') {
        throw fail('not_connected', 'Not connected to the assistant.');
      }
      if (this.#session.conversationId === conversationId) return null;
      this.#archiveCurrent();
      this.emit({ type: 'conversation', data: { conversationId, transcript: clone(c.transcript) } });
      this.emit({ type: 'session', data: { ...this.#session, conversationId, sessionId: nanoid() } });
      return null;
    },
    history_export: ({ conversationId, format }) => {
      const what = conversationId ? [this.conversations.get(conversationId)] : [...this.conversations.values()];
      if (what.some((c) => !c)) throw fail('not_found', `No conversation ${conversationId}.`);
      const body = JSON.stringify(what);
      const ext = format === 'json' ? 'json' : 'md';
      return { path: `~/Downloads/outpost-${conversationId ?? 'all'}.${ext}`, bytes: body.length };
    },
    history_delete_all: () => {
      const deleted = this.conversations.size;
      this.conversations.clear();
      return { deleted };
    },

    system_settings: () => clone(this.system),
    system_set: ({ settings }) => {
      const shortcut = settings.shortcut.trim();
      this.system = {
        ...clone(settings),
        shortcut,
        autostartFile: this.system.autostartFile,
        shortcutActive: shortcut !== '',
        shortcutStatus: shortcut ? `${shortcut} works in every window (an X11 key grab).` : 'Off.',
      };
      return clone(this.system);
    },
    tools_list: () => this.tools,
    tools_set: ({ name, enabled, rule }) => {
      const t = this.tools.find((x) => x.name === name);
      if (!t) throw fail('not_found', `No tool ${name}.`);
      t.enabled = enabled;
      t.rule = rule;
      return t;
    },

    mcp_elicitation_answer: ({ id, action, content }) => {
      if (!this.elicitationAnswers.has(id)) throw fail('not_found', 'That form is no longer open (answered or timed out).');
      this.elicitationAnswers.set(id, { action, content });
      this.emit({ type: 'elicitation_closed', data: { id } });
      return null;
    },
    voice_status: () => this.voice,
    voice_start: () => {
      if (this.#connection.state !== 'connected') throw fail('not_connected', 'Outpost is not connected to an assistant.');
      this.voice.on = true;
      this.voice.input = this.noMicrophone
        ? { state: 'failed', error: 'No microphone was found.' }
        : { state: 'ready', device: this.audioChoice.input ?? 'alsa:default' };
      this.voice.output = { state: 'ready', device: this.audioChoice.output ?? 'alsa:default' };
      return this.#voiceChanged();
    },
    voice_stop: () => {
      this.voice.on = false;
      this.voice.talking = false;
      this.voice.input = { state: 'off' };
      this.voice.output = { state: 'off' };
      return this.#voiceChanged();
    },
    voice_control: ({ control }) => {
      if (control.muted !== undefined) this.voice.muted = control.muted;
      if (control.mode !== undefined) this.voice.mode = control.mode;
      if (control.talking !== undefined) this.voice.talking = control.talking;
      if (control.echoCancellation !== undefined) this.voice.echoCancellation = control.echoCancellation;
      return this.#voiceChanged();
    },
    voice_devices: () => this.#audioDevices(),
    voice_set_devices: ({ input, output }) => {
      this.audioChoice = { input, output };
      return this.#audioDevices();
    },
    mcp_servers_list: () => this.mcpServers,
    mcp_servers_add: ({ server }) => this.#addServer(server),
    mcp_servers_get: ({ name }) => {
      const s = this.#server(name);
      const d = this.mcpDrafts.get(name) ?? (s.transport === 'http'
        ? { ...stdioDraft(name, '', []), url: s.target, enabled: s.enabled }
        : { ...stdioDraft(name, s.target.split(' ')[0] ?? '', s.target.split(' ').slice(1)), enabled: s.enabled });
      // Secret values stay in the keyring: by name only.
      const env = Object.fromEntries(Object.entries(d.env).map(([k, v]) => [k, secretIn(d, k) ? '' : v]));
      const reach = mockSandbox(d, this.noLandlock);
      return { ...d, env, plain: [...(d.plain ?? [])], ...(reach ? { reach } : {}) };
    },
    mcp_servers_update: ({ server }) => {
      const old = this.#server(server.name);
      const command = server.command.trim();
      const url = server.url.trim();
      if (!!command === !!url) throw fail('invalid_argument', 'server: give either a command or a URL, not both');
      this.#checkSandbox(server);
      const before = this.mcpDrafts.get(server.name)?.env ?? {};
      const env = Object.fromEntries(Object.entries(server.env).map(([k, v]) => [k, v === '' && secretIn(server, k) ? (before[k] ?? '') : v]));
      const { reach: _ignored, ...kept } = server;
      this.mcpDrafts.set(server.name, { ...kept, env });
      const live = this.#connection.state === 'connected';
      const sandbox = mockSandbox(server, this.noLandlock);
      Object.assign(old, {
        transport: command ? ('stdio' as const) : ('http' as const),
        target: command ? [command, ...server.args].join(' ') : url,
        enabled: server.enabled,
        status: !server.enabled ? ('disabled' as const) : !live ? ('stopped' as const) : sandbox?.state === 'refused' ? ('no_sandbox' as const) : ('running' as const),
        sandbox,
      });
      if (old.status !== 'no_sandbox') delete old.lastError;
      return old;
    },
    mcp_servers_set_rule: ({ name, rule }) => {
      const s = this.#server(name);
      if (!['allow', 'ask', 'deny'].includes(rule)) throw fail('invalid_argument', `rule: must be allow, ask or deny, got ${rule}`);
      s.rule = rule;
      return s;
    },
    mcp_servers_tools: ({ name }) => this.#serverTools(name),
    mcp_servers_set_tool_rule: ({ name, tool, rule }) => {
      this.#server(name);
      if (!tool.startsWith(`mcp__${name}__`) || tool.length === `mcp__${name}__`.length) {
        throw fail('invalid_argument', `tool: '${tool}' is not the Outpost name of a tool of '${name}'`);
      }
      if (rule === null) this.mcpToolRules.delete(tool);
      else if (['allow', 'ask', 'deny'].includes(rule)) this.mcpToolRules.set(tool, rule);
      else throw fail('invalid_argument', `rule: must be allow, ask or deny, got ${String(rule)}`);
      return this.#serverTools(name);
    },
    mcp_servers_restart: ({ name }) => {
      const s = this.#server(name);
      if (this.#connection.state !== 'connected') throw fail('not_connected', 'Not connected to the assistant.');
      s.status = s.enabled ? 'starting' : 'disabled';
      return s;
    },
    mcp_servers_set_enabled: ({ name, enabled }) => {
      const s = this.#server(name);
      s.enabled = enabled;
      s.status = enabled ? (this.#connection.state === 'connected' ? 'running' : 'stopped') : 'disabled';
      if (!enabled) s.toolCount = 0;
      return s;
    },
    mcp_servers_trust: ({ name }) => {
      const s = this.#server(name);
      delete s.lastError;
      s.status = !s.enabled ? 'disabled' : this.#connection.state === 'connected' ? 'running' : 'stopped';
      return s;
    },
    mcp_servers_sign_in: async ({ name }) => {
      const s = this.#httpServer(name);
      if (this.holdSignIns) {
        // Waits as the real one does for the browser: until finishSignIn or a cancel.
        this.#signIns.get(name)?.cancel();
        await new Promise<void>((done, refuse) => {
          const cancel = () => refuse(fail('cancelled', `The sign-in to ${name} was cancelled; nothing was stored.`));
          this.#signIns.set(name, { done, cancel });
        });
      }
      s.signIn = 'signed_in';
      delete s.lastError;
      s.status = !s.enabled ? 'disabled' : this.#connection.state === 'connected' ? 'starting' : 'stopped';
      return s;
    },
    mcp_servers_sign_in_cancel: ({ name }) => {
      const waiting = this.#signIns.get(name);
      this.#signIns.delete(name);
      waiting?.cancel();
      return null;
    },
    mcp_servers_sign_out: ({ name }) => {
      const s = this.#httpServer(name);
      s.signIn = 'not_signed_in';
      return s;
    },
    mcp_servers_remove: ({ name }) => {
      this.#server(name);
      this.mcpServers = this.mcpServers.filter((s) => s.name !== name);
      this.mcpLogs.delete(name);
      return null;
    },
    mcp_servers_log: ({ name }) => {
      this.#server(name);
      return this.mcpLogs.get(name) ?? '';
    },
    mcp_servers_import_preview: ({ text }) => {
      let root: unknown;
      try {
        root = JSON.parse(text);
      } catch {
        throw fail('invalid_argument', 'file: the file is not JSON');
      }
      const block = (root as { mcpServers?: unknown } | null)?.mcpServers;
      if (!block || typeof block !== 'object' || Array.isArray(block)) {
        throw fail('invalid_argument', 'file: the file has no "mcpServers" object (is it claude_desktop_config.json?)');
      }
      const servers: McpServerDraft[] = [];
      const skipped: string[] = [];
      for (const [name, e] of Object.entries(block as Record<string, Record<string, unknown>>)) {
        if (this.mcpServers.some((s) => s.name === name)) {
          skipped.push(`'${name}': a tool server with this name already exists`);
        } else if (typeof e?.command === 'string') {
          const d = { ...stdioDraft(name, e.command, (e.args as string[]) ?? []), env: (e.env as Record<string, string>) ?? {}, enabled: e.disabled !== true };
          const reach = mockSandbox(d, this.noLandlock);
          servers.push({ ...d, ...(reach ? { reach } : {}) });
        } else if (typeof e?.url === 'string') {
          servers.push({ ...stdioDraft(name, '', []), url: e.url, env: (e.headers as Record<string, string>) ?? {}, enabled: e.disabled !== true });
        } else {
          skipped.push(`'${name}': it has neither "command" nor "url"`);
        }
      }
      return { servers, skipped };
    },
  };

  // ----------------------------------------------------------------- tool servers

  /** Plays an MCP server asking the user to fill in a form. */
  elicit(id: string, server: string, message: string, schema: JsonObject, url?: string): void {
    this.elicitationAnswers.set(id, undefined);
    this.emit({ type: 'elicitation', data: { id, server, message, schema, ...(url ? { url } : {}) } });
  }

  #server(name: string): McpServerInfo {
    const s = this.mcpServers.find((x) => x.name === name);
    if (!s) throw fail('not_found', `There is no tool server named '${name}'.`);
    return s;
  }

  /** A server that signs in (Streamable HTTP), as `McpConfig::http_url` refuses others. */
  #httpServer(name: string): McpServerInfo {
    const s = this.#server(name);
    if (s.transport !== 'http') throw fail('invalid_argument', `name: '${name}' is a stdio server; only Streamable HTTP servers sign in`);
    return s;
  }

  /** A server's tools with their rules, as `outpost_policy::Policy::mcp_tool_rule` decides. */
  #serverTools(name: string): McpServerTools {
    const server = this.#server(name);
    const effective = (own: ToolRule | undefined): ToolRule =>
      own === 'deny' || server.rule === 'deny' ? 'deny' : (own ?? server.rule);
    const listed = (this.mcpToolLists.get(name) ?? []).map((t) => {
      const outpostName = `mcp__${name}__${t.name}`;
      const rule = this.mcpToolRules.get(outpostName);
      return { ...t, outpostName, ...(rule ? { rule } : {}), effective: effective(rule), offered: true };
    });
    const prefix = `mcp__${name}__`;
    const orphans = [...this.mcpToolRules.entries()]
      .filter(([k]) => k.startsWith(prefix) && !listed.some((t) => t.outpostName === k))
      .map(([k, rule]) => ({ name: k.slice(prefix.length), outpostName: k, description: '', rule, effective: effective(rule), offered: false }));
    return { server: name, serverRule: server.rule, tools: [...listed, ...orphans] };
  }

  #addServer(d: McpServerDraft): McpServerInfo {
    if (!/^[A-Za-z0-9_-]{1,32}$/.test(d.name) || d.name.includes('__')) {
      throw fail('invalid_argument', `name: server name '${d.name}' may only contain ASCII letters, digits, '-' and '_' (1–32, no '__')`);
    }
    if (this.mcpServers.some((s) => s.name === d.name)) {
      throw fail('invalid_argument', `name: a tool server named '${d.name}' already exists; remove it first`);
    }
    const command = d.command.trim();
    const url = d.url.trim();
    if (!!command === !!url) throw fail('invalid_argument', 'server: give either a command or a URL, not both');
    if (url && !/^https?:\/\//.test(url)) throw fail('invalid_argument', `url: '${url}': an MCP server URL starts with http:// or https://`);
    this.#checkSandbox(d);
    const live = this.#connection.state === 'connected';
    const sandbox = mockSandbox(d, this.noLandlock);
    const info: McpServerInfo = {
      name: d.name,
      transport: command ? 'stdio' : 'http',
      target: command ? [command, ...d.args].join(' ') : url,
      enabled: d.enabled,
      status: !d.enabled ? 'disabled' : !live ? 'stopped' : sandbox?.state === 'refused' ? 'no_sandbox' : 'running',
      toolCount: 0,
      hasLog: false,
      rule: 'ask',
      ...(sandbox ? { sandbox } : {}),
    };
    this.mcpServers = [...this.mcpServers, info].sort((a, b) => a.name.localeCompare(b.name));
    const { reach: _ignored, ...kept } = d;
    this.mcpDrafts.set(d.name, kept);
    return info;
  }

  /** The sandbox settings the real app refuses: relative paths; folders for a URL. */
  #checkSandbox(d: McpServerDraft): void {
    for (const p of [...(d.read ?? []), ...(d.write ?? [])]) {
      if (!p.startsWith('/') && !p.startsWith('~/') && p !== '~') {
        throw fail('invalid_argument', `sandbox: '${p}' is neither absolute nor starting with '~/'`);
      }
    }
    if (d.url.trim() && ((d.read ?? []).length || (d.write ?? []).length)) {
      throw fail('invalid_argument', 'sandbox: folders to read or write are for a command\'s server: an HTTP server runs elsewhere');
    }
  }

  // ----------------------------------------------------------------- script

  #later(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.#timers.delete(t);
      fn();
    }, ms * this.#scale);
    this.#timers.add(t);
  }

  #goOnline(assistantName: string): void {
    this.#configured = true;
    this.emit({ type: 'connection', data: { state: 'connecting' } });
    this.#later(300, () => {
      this.emit({ type: 'connection', data: { state: 'connected' } });
      if (!this.#session) {
        this.emit({ type: 'session', data: { conversationId: nanoid(), sessionId: nanoid(), assistantName, mode: 'outpost', attachments: true } });
      }
      this.emit({ type: 'status', data: { state: 'idle' } });
    });
  }

  /** Shows the reconnecting banner for a while (demo). */
  simulateReconnect(ms = 3000): void {
    this.emit({ type: 'connection', data: { state: 'reconnecting', attempt: 1, detail: 'The network link dropped.' } });
    this.#later(ms, () => this.emit({ type: 'connection', data: { state: 'connected' } }));
  }

  #stream(text: string, inReplyTo: string, then?: () => void, delay = 40): void {
    const id = nanoid();
    const pieces = text.match(/\S+\s*/g) ?? [text];
    this.emit({ type: 'status', data: { state: 'speaking' } });
    pieces.forEach((piece, seq) => {
      this.#later(delay * (seq + 1), () => this.emit({ type: 'assistant_delta', data: { messageId: id, seq, delta: piece } }));
    });
    this.#later(delay * (pieces.length + 1), () => {
      this.emit({ type: 'assistant_message', data: { id, text, inReplyTo, at: Date.now() } });
      if (then) then();
      else this.emit({ type: 'status', data: { state: 'idle' } });
    });
  }

  #stage(file: Omit<AttachmentView, 'id'>): AttachmentView[] {
    if (this.#connection.state !== 'connected') throw fail('attachment_refused', 'Connect to an assistant before giving it a file.');
    const f: AttachmentView = { id: nanoid(), ...file };
    if (f.image === undefined) delete f.image;
    this.staged.push(f);
    this.emit({ type: 'attachments', data: { items: clone(this.staged) } });
    return this.staged;
  }

  #reply(userId: string, text: string): void {
    this.emit({ type: 'status', data: { state: 'thinking' } });
    const lower = text.toLowerCase();
    this.#later(600, () => {
      if (/\bwrite|save\b/.test(lower)) {
        this.#toolTurn(userId, 'I’ll save that summary to a file.', 'write_file', 'client', {
          path: '~/Documents/summary.md',
          content: '# Summary\n\nThe meeting moved to Thursday.\n',
        });
      } else if (/search|web/.test(lower)) {
        this.#toolTurn(userId, 'Let me search the web for that.', 'web_search', 'server', { query: text.slice(0, 80) });
      } else if (/slow|timeout/.test(lower)) {
        this.#toolTurn(userId, 'Searching your files — this may take a while.', 'search_files', 'client', { root: '~', query: 'invoice' }, 2000);
      } else if (/read|file|notes/.test(lower)) {
        this.#toolTurn(userId, 'I’ll read your notes file.', 'read_local_file', 'client', { path: '~/Documents/notes.txt' });
      } else {
        this.#stream(
          'Here is what I can do in this **demo**:\n\n' +
            '- ask me to *read your notes* (a file tool that needs your permission)\n' +
            '- ask me to *write a summary* (a destructive tool: no “Always allow”)\n' +
            '- ask me to *search the web* (runs on the server)\n\n' +
            'Read more about [the protocol](https://example.com/outpost/protocol).',
          userId,
        );
      }
    });
  }

  #toolTurn(
    userId: string,
    intro: string,
    toolName: string,
    execution: 'client' | 'server',
    parameters: JsonObject,
    timeoutMs = 30_000,
  ): void {
    this.#stream(intro, userId, () => {
      const tool = this.tools.find((t) => t.name === toolName);
      const id = nanoid();
      const messageId = nanoid();
      this.emit({
        type: 'tool_initiated',
        data: {
          id, messageId, toolName, execution, parameters, timeoutMs, at: Date.now(),
          serverName: tool?.serverName, readOnly: tool?.readOnly, destructive: tool?.destructive, openWorld: tool?.openWorld,
        },
      });
      this.emit({ type: 'status', data: { state: 'using_tool', toolUseId: id } });
      const finish = (r: Omit<ToolResult, 'id' | 'at'>) => {
        this.emit({ type: 'tool_result', data: { ...r, id, at: Date.now() } });
        const words = r.success
          ? 'Done — the tool finished. Your notes say the meeting moved to **Thursday**.'
          : `The tool did not run (${r.errorCode}). I’ll continue without it.`;
        this.#stream(words, userId);
      };
      const run = () => {
        this.emit({ type: 'tool_progress', data: { id, state: 'running', status: 'running', at: Date.now() } });
        if (timeoutMs < 30_000) {
          this.#later(timeoutMs, () => finish({ success: false, status: 'timeout', errorCode: 'timeout', errorMessage: `Tool execution exceeded timeout of ${timeoutMs}ms`, executedBy: 'client' }));
          return;
        }
        this.#later(1500, () =>
          finish({
            success: true,
            status: 'completed',
            executedBy: execution,
            result: toolName === 'web_search'
              ? { results: [{ title: 'Outpost protocol', url: 'https://example.com/outpost' }] }
              : { path: String(parameters.path ?? ''), content: 'Meeting moved to Thursday.\nBring the Q3 numbers.\n', bytes: 47 },
          }),
        );
      };
      if (execution === 'server') {
        this.#later(200, run);
        return;
      }
      if (!tool || !tool.enabled) {
        finish({ success: false, status: 'error', errorCode: 'unknown_tool', errorMessage: `Tool '${toolName}' is not supported by this client`, executedBy: 'client' });
        return;
      }
      if (tool.rule === 'deny') {
        finish({ success: false, status: 'denied', errorCode: 'permission_denied', errorMessage: 'Permission denied by your policy: the tool is set to deny', executedBy: 'client' });
        return;
      }
      const remembered = this.remembered.some((r) => r.tool === toolName && r.decision !== 'always_deny');
      if (tool.rule === 'allow' || (remembered && !tool.destructive)) {
        run();
        return;
      }
      this.#ask(id, toolName, tool, parameters, (d) => {
        if (d === 'timeout') {
          finish({ success: false, status: 'denied', errorCode: 'permission_denied', errorMessage: 'Permission denied by the consent timeout: nobody answered', executedBy: 'client' });
        } else if (d === 'deny_once' || d === 'always_deny') {
          finish({ success: false, status: 'denied', errorCode: 'permission_denied', errorMessage: 'Permission denied by the user: denied in the consent dialog', executedBy: 'client' });
        } else {
          if (d === 'always_allow' || d === 'allow_for_conversation') {
            this.remembered.push({
              id: nanoid(), tool: toolName, decision: d, folder: '~/Documents', at: Date.now(),
              conversationId: d === 'allow_for_conversation' ? this.#session?.conversationId : undefined,
            });
          }
          run();
        }
      });
    });
  }

  #ask(requestId: string, toolName: string, tool: ToolInfo, parameters: JsonObject, onAnswer: PendingAsk['onAnswer']): void {
    const path = String(parameters.path ?? parameters.root ?? '');
    const options: ConsentDecision[] = tool.destructive
      ? ['allow_once', 'allow_for_conversation', 'deny_once']
      : ['allow_once', 'allow_for_conversation', 'always_allow', 'deny_once'];
    const request: ConsentRequest = {
      consentId: nanoid(),
      requestId,
      conversationId: this.#session?.conversationId ?? '',
      tool: toolName,
      serverName: tool.serverName,
      description: tool.serverName ? tool.description : undefined,
      execution: 'client',
      parameters,
      summary: `${tool.destructive ? 'Write' : 'Read'} ${path}`,
      paths: path ? [path.replace(/^~/, '/home/alice')] : [],
      folder: '~/Documents',
      reason: `${toolName} is set to ask before it runs.`,
      options,
      expiresInMs: this.settings.consentTimeoutSecs * 1000,
      readOnly: tool.readOnly,
      destructive: tool.destructive,
      openWorld: tool.openWorld,
    };
    const timer = setTimeout(() => {
      this.#pending.delete(request.consentId);
      this.emit({ type: 'consent_withdrawn', data: { consentId: request.consentId, reason: 'timed_out' } });
      onAnswer('timeout');
    }, request.expiresInMs);
    this.emit({ type: 'tool_progress', data: { id: requestId, state: 'awaiting_consent', status: 'awaiting_consent', detail: request.summary, at: Date.now() } });
    this.#pending.set(request.consentId, { request, timer, onAnswer });
    this.emit({ type: 'consent_request', data: request });
  }

  // ----------------------------------------------------------------- bookkeeping

  #audioDevices(): Commands['voice_devices']['returns'] {
    return {
      inputs: this.audioInputs,
      outputs: this.audioOutputs,
      ...(this.audioChoice.input ? { input: this.audioChoice.input } : {}),
      ...(this.audioChoice.output ? { output: this.audioChoice.output } : {}),
    };
  }

  #voiceChanged(): VoiceStatus {
    const v = this.voice;
    v.transmitting = v.on && v.input.state === 'ready' && !v.muted && (v.mode === 'open_mic' || v.talking);
    v.echoCancelling = v.on && v.echoCancellation;
    this.emit({ type: 'voice', data: clone(v) });
    return v;
  }

  #record(event: UiEvent): void {
    this.#fold.apply(event);
    switch (event.type) {
      case 'consent_request':
        // Questions pushed from outside the script (scenarios, tests) can be answered too.
        if (!this.#pending.has(event.data.consentId)) {
          this.#pending.set(event.data.consentId, { request: event.data, timer: undefined, onAnswer: () => {} });
        }
        return;
      case 'consent_withdrawn':
        this.#pending.delete(event.data.consentId);
        return;
      case 'connection':
        this.#connection = event.data;
        return;
      case 'status':
        this.#status = event.data;
        return;
      case 'session':
        this.#session = event.data;
        return;
      default:
        return;
    }
  }

  #archiveCurrent(): void {
    if (!this.#session || this.#transcript.length === 0) return;
    const first = this.#transcript.find((e) => e.kind === 'user');
    const at = (e: Entry) => (e.kind === 'tool' ? e.call.initiatedAt : e.at);
    this.conversations.set(this.#session.conversationId, {
      summary: {
        id: this.#session.conversationId,
        title: first && first.kind === 'user' ? first.text.slice(0, 60) : 'Conversation',
        assistantName: this.#session.assistantName,
        startedAt: at(this.#transcript[0]!),
        updatedAt: at(this.#transcript[this.#transcript.length - 1]!),
        messageCount: this.#transcript.filter((e) => e.kind !== 'tool').length,
        toolCallCount: this.#transcript.filter((e) => e.kind === 'tool').length,
      },
      transcript: transcriptFromEntries(this.#transcript),
    });
  }

  #search(query: string, limit: number, start: string, end: string): SearchHit[] {
    const words = query.toLowerCase().split(/\s+/).filter(Boolean);
    if (words.length === 0) return [];
    const hits: SearchHit[] = [];
    for (const c of this.conversations.values()) {
      for (const e of c.transcript) {
        const text = e.kind === 'tool' ? `${e.call.toolName} ${JSON.stringify(e.call.parameters)}` : e.text;
        const lower = text.toLowerCase();
        if (!words.every((w) => lower.includes(w))) continue;
        const first = Math.min(...words.map((w) => lower.indexOf(w)));
        const from = Math.max(0, first - 40);
        let excerpt = text.slice(from, from + 120);
        const re = new RegExp(`(${words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})`, 'gi');
        excerpt = excerpt.replace(re, `${start}$1${end}`);
        hits.push({
          kind: e.kind === 'tool' ? 'tool_call' : 'message',
          conversationId: c.summary.id,
          id: e.kind === 'tool' ? e.call.id : e.id,
          at: e.kind === 'tool' ? e.call.initiatedAt : e.at,
          conversationTitle: c.summary.title,
          toolName: e.kind === 'tool' ? e.call.toolName : undefined,
          snippet: `${from > 0 ? '…' : ''}${excerpt}${from + 120 < text.length ? '…' : ''}`,
        });
      }
    }
    return hits.sort((a, b) => b.at - a.at).slice(0, limit);
  }

  #seedHistory(): void {
    const day = 86_400_000;
    const base = Date.now() - 3 * day;
    const seed = (id: string, title: string, offset: number, transcript: TranscriptEntry[]) => {
      this.conversations.set(id, {
        summary: {
          id, title, assistantName: 'Outpost demo assistant', startedAt: base + offset, updatedAt: base + offset + 600_000,
          messageCount: transcript.filter((e) => e.kind !== 'tool').length,
          toolCallCount: transcript.filter((e) => e.kind === 'tool').length,
        },
        transcript,
      });
    };
    seed('conv-budget', 'Summarise the Q3 budget spreadsheet', 0, [
      { kind: 'user', id: 'h1', text: 'Summarise the Q3 budget spreadsheet in ~/Documents/budget.csv', at: base },
      {
        kind: 'tool',
        call: {
          id: 'h2', messageId: 'h3', toolName: 'read_local_file', execution: 'client', parameters: { path: '~/Documents/budget.csv' },
          timeoutMs: 30_000, status: 'completed', initiatedAt: base + 1000, runningAt: base + 4000, finishedAt: base + 4300,
          result: { bytes: 2048, content: 'month,spend\nJul,1200\nAug,980\nSep,1430\n' }, readOnly: true, executedBy: 'client',
        },
      },
      { kind: 'assistant', id: 'h3', text: 'Spending peaked in **September** at 1,430; the quarter totals 3,610.', at: base + 5000 },
    ]);
    seed('conv-trip', 'Plan the Lisbon trip', day, [
      { kind: 'user', id: 'h4', text: 'What is the weather in Lisbon next week? I want to plan the trip.', at: base + day },
      { kind: 'assistant', id: 'h5', text: 'Mostly sunny, 24–27 °C. Pack light and bring sunscreen for the Lisbon trip.', at: base + day + 4000 },
    ]);
    seed('conv-ssh', 'Why did the deploy fail?', 2 * day, [
      { kind: 'user', id: 'h6', text: 'Read my ssh key so you can deploy', at: base + 2 * day },
      {
        kind: 'tool',
        call: {
          id: 'h7', messageId: 'h8', toolName: 'read_local_file', execution: 'client', parameters: { path: '~/.ssh/id_ed25519' },
          timeoutMs: 30_000, status: 'denied', initiatedAt: base + 2 * day + 1000, finishedAt: base + 2 * day + 1010,
          errorCode: 'permission_denied', errorMessage: 'Permission denied by your policy: ~/.ssh is on the secrets list', readOnly: true,
        },
      },
      { kind: 'assistant', id: 'h8', text: 'I can’t read private keys — your policy protects `~/.ssh`. Deploy from your terminal instead.', at: base + 2 * day + 3000 },
    ]);
  }
}

/** Everything a screenshot or a test might want on screen at once. */
export function showcaseEvents(now: number): UiEvent[] {
  const ev: UiEvent[] = [];
  const convo = { conversationId: 'conv-now', sessionId: 'sess-1', assistantName: 'Outpost demo assistant', mode: 'outpost' as const, attachments: true };
  ev.push({ type: 'connection', data: { state: 'connected' } }, { type: 'session', data: convo });
  ev.push({ type: 'user_message', data: { id: 'u1', text: 'Read ~/Documents/notes.txt and tell me what changed, then look up the venue.', at: now - 60_000 } });
  ev.push({
    type: 'assistant_message',
    data: { id: 'a1', text: 'Sure — I’ll **read your notes** first, then search the web for the venue.', inReplyTo: 'u1', at: now - 58_000 },
  });
  const tool = (id: string, toolName: string, execution: 'client' | 'server', parameters: JsonObject, hints: Partial<ToolCallRecord> = {}) =>
    ev.push({
      type: 'tool_initiated',
      data: { id, messageId: 'a1', toolName, execution, parameters, timeoutMs: 30_000, at: now - 57_000, readOnly: hints.readOnly, destructive: hints.destructive, openWorld: hints.openWorld, serverName: hints.serverName, claims: hints.claims },
    });
  tool('t1', 'read_local_file', 'client', { path: '~/Documents/notes.txt' }, { readOnly: true });
  ev.push({ type: 'tool_progress', data: { id: 't1', state: 'running', status: 'running', at: now - 56_000 } });
  ev.push({
    type: 'tool_result',
    data: { id: 't1', success: true, status: 'completed', executedBy: 'client', at: now - 55_500, result: { path: '/home/alice/Documents/notes.txt', bytes: 312, content: 'Meeting moved to Thursday 14:00.\nVenue: the new office on Rua Augusta.\nBring the Q3 numbers and the signed contract.\n' } },
  });
  tool('t2', 'web_search', 'server', { query: 'Rua Augusta office opening hours' }, { serverName: 'web-tools', readOnly: true, openWorld: true, claims: { readOnly: true, openWorld: true } });
  ev.push({ type: 'tool_progress', data: { id: 't2', state: 'running', status: 'running', at: now - 12_400 } });
  tool('t3', 'write_file', 'client', { path: '~/Documents/summary.md', content: '# Summary\n\nMeeting moved to Thursday 14:00.\n' }, { destructive: true });
  ev.push({ type: 'tool_progress', data: { id: 't3', state: 'awaiting_consent', status: 'awaiting_consent', detail: 'Write ~/Documents/summary.md', at: now - 5_000 } });
  ev.push({ type: 'status', data: { state: 'using_tool', toolUseId: 't3' } });
  ev.push({
    type: 'consent_request',
    data: {
      consentId: 'c1', requestId: 't3', conversationId: 'conv-now', tool: 'write_file', execution: 'client',
      parameters: { path: '~/Documents/summary.md', content: '# Summary\n\nMeeting moved to Thursday 14:00.\nVenue: the new office on Rua Augusta.\nBring the Q3 numbers and the signed contract.\n' },
      summary: 'Write /home/alice/Documents/summary.md', paths: ['/home/alice/Documents/summary.md'], folder: '/home/alice/Documents',
      reason: 'write_file can change or delete data, so it always asks.', options: ['allow_once', 'allow_for_conversation', 'deny_once'],
      expiresInMs: 95_000, destructive: true,
    },
  });
  ev.push({
    type: 'consent_request',
    data: {
      consentId: 'c2', requestId: 't4', conversationId: 'conv-now', tool: 'read_local_file', execution: 'client',
      parameters: { path: '~/Documents/contract.pdf' }, summary: 'Read /home/alice/Documents/contract.pdf', paths: ['/home/alice/Documents/contract.pdf'],
      folder: '/home/alice/Documents', reason: 'read_local_file is set to ask.', options: ['allow_once', 'allow_for_conversation', 'always_allow', 'deny_once'],
      expiresInMs: 120_000, readOnly: true,
    },
  });
  return ev;
}

/** Finished cards of every failure kind, for the tool-card screenshot. */
export function failureShowcaseEvents(now: number): UiEvent[] {
  const ev: UiEvent[] = [];
  const card = (id: string, toolName: string, parameters: JsonObject, status: ToolCallStatus, errorCode: string, errorMessage: string) => {
    ev.push({ type: 'tool_initiated', data: { id, messageId: 'a2', toolName, execution: 'client', parameters, timeoutMs: 30_000, at: now - 30_000 } });
    ev.push({ type: 'tool_result', data: { id, success: false, status, errorCode, errorMessage, executedBy: 'client', at: now - 29_000 } });
  };
  card('f1', 'search_files', { root: '~', query: 'invoice' }, 'timeout', 'timeout', 'Tool execution exceeded timeout of 30000ms');
  card('f2', 'read_local_file', { path: '~/.ssh/id_ed25519' }, 'denied', 'permission_denied', 'Permission denied by your policy: ~/.ssh is on the secrets list');
  card('f3', 'read_local_file', { path: '~/missing.txt' }, 'error', 'execution_error', 'File not found: /home/alice/missing.txt');
  card('f4', 'list_directory', { path: '~/Videos' }, 'cancelled', 'cancelled', 'Tool execution was cancelled by the server');
  return ev;
}

/** What the mock's file picker "picks": a 1×1 PNG. */
const MOCK_PICKED: Omit<AttachmentView, 'id'> = {
  name: 'screenshot.png',
  mimeType: 'image/png',
  size: 68,
  sha256: 'f1f2b8e35a1e4cbd9c2c4a9e0b5e6a3f2d7c8b9a0e1f2d3c4b5a69788796a5b4',
  image:
    'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==',
};

/** A stand-in for SHA-256 in the mock (64 hex digits derived from the data). */
function fakeSha256(data: string): string {
  let h = 0x811c9dc5;
  let out = '';
  for (let round = 0; round < 8; round++) {
    for (let i = 0; i < data.length; i++) h = Math.imul(h ^ data.charCodeAt(i) ^ round, 0x01000193) >>> 0;
    out += h.toString(16).padStart(8, '0');
  }
  return out;
}
