/**
 * The contract between the web UI and the desktop shell (src-tauri over outpost-core).
 *
 * Every call the UI makes to the outside world goes through the `Backend` interface defined
 * here; components and stores never import `@tauri-apps/api` themselves. Two implementations:
 *
 * - `TauriBackend` (this file): `invoke` for commands, one `Channel` for pushed events.
 * - `MockBackend` (`mock-backend.ts`): in memory, used by the tests and by `npm run dev`.
 *
 * `ui/CONTRACT.md` documents the same commands and events for the Rust side. Wire rules:
 * command names are `domain_verb`; argument keys are camelCase (Tauri maps them to the Rust
 * function's snake_case parameters); every struct is camelCase (`#[serde(rename_all =
 * "camelCase")]`); events are `{type, data}` (`#[serde(tag = "type", content = "data",
 * rename_all = "snake_case")]`); a failed command rejects with a `CommandError`.
 */
import { Channel, invoke, isTauri } from '@tauri-apps/api/core';

/** Whether the page runs inside the Outpost app (not a plain browser). */
export function inApp(): boolean {
  return isTauri();
}

// ---------------------------------------------------------------------------------------------
// Vocabulary shared with docs/PROTOCOL.md
// ---------------------------------------------------------------------------------------------

/** Who runs a tool (ToolUseRequest `execution`). */
export type ExecutionMode = 'server' | 'client' | 'either';

/** AssistantStatus `state`. */
export type AssistantState = 'idle' | 'listening' | 'thinking' | 'speaking' | 'using_tool';

/** ToolUseResult `errorCode` values of PROTOCOL.md §5.2; custom codes arrive verbatim. */
export type ToolErrorCode =
  | 'unknown_tool'
  | 'invalid_parameters'
  | 'execution_error'
  | 'timeout'
  | 'permission_denied'
  | 'cancelled';

/** Link to the room, as the session engine sees it. */
export type ConnectionStatus = 'disconnected' | 'connecting' | 'connected' | 'reconnecting' | 'failed';

/** What a tool card shows. The store's `error` state splits into the last four for people. */
export type ToolCardStatus =
  | 'initiated'
  | 'awaiting_consent'
  | 'running'
  | 'completed'
  | 'error'
  | 'timeout'
  | 'denied'
  | 'cancelled';

/** Tool descriptor hints (ToolDescriptor in PROTOCOL.md §3). Absent means false. */
export interface ToolHints {
  readOnly?: boolean;
  destructive?: boolean;
  openWorld?: boolean;
}

/** A JSON value as found in tool parameters and results. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** Epoch milliseconds. */
export type Millis = number;

// ---------------------------------------------------------------------------------------------
// Data shapes
// ---------------------------------------------------------------------------------------------

export interface ConnectionEvent {
  state: ConnectionStatus;
  /** Free text, e.g. the last error ("token expired") or "resuming". */
  detail?: string;
  /** While `reconnecting`: the attempt number, from 1. */
  attempt?: number;
}

/** What the assistant speaks: the Outpost protocol, or LiveKit Agents' conventions. */
export type AssistantMode = 'outpost' | 'livekit_agents';

export interface SessionInfo {
  conversationId: string;
  sessionId: string;
  assistantName: string;
  mode: AssistantMode;
}

export interface StatusEvent {
  state: AssistantState;
  toolUseId?: string;
  detail?: string;
}

export interface UserMessage {
  id: string;
  text: string;
  at: Millis;
}

export interface AssistantMessage {
  id: string;
  /** Markdown; authoritative over the deltas streamed for the same id. */
  text: string;
  inReplyTo?: string;
  at: Millis;
}

export interface AssistantDelta {
  messageId: string;
  seq: number;
  delta: string;
}

/**
 * What an MCP server says about one of its tools (MCP annotations readOnlyHint,
 * destructiveHint, idempotentHint, openWorldHint). The server's claims: shown as such,
 * never used to allow anything. Absent: the server did not say.
 */
export interface ServerClaims {
  readOnly?: boolean;
  destructive?: boolean;
  idempotent?: boolean;
  openWorld?: boolean;
}

/** A ToolUseRequest as received (or created by the client for its own purposes). */
export interface ToolInitiated extends ToolHints {
  id: string;
  messageId: string;
  toolName: string;
  execution: ExecutionMode;
  parameters: JsonObject;
  /** MCP server that provides the tool; absent for built-in tools. */
  serverName?: string;
  /** For an MCP tool: what its server claims about it. */
  claims?: ServerClaims;
  /** Effective run timeout in ms (request `timeoutMs`, default 30000). */
  timeoutMs: number;
  at: Millis;
}

export interface ToolProgress {
  id: string;
  state: 'awaiting_consent' | 'running';
  detail?: string;
  at: Millis;
}

export interface ToolResult {
  id: string;
  success: boolean;
  result?: Json;
  errorCode?: string;
  errorMessage?: string;
  /** Who ran it: `client` (Outpost) or `server` (the assistant). */
  executedBy?: 'client' | 'server';
  at: Millis;
}

/** A tool call as stored (snapshot, history) — the card's whole state. */
export interface ToolCallRecord extends ToolHints {
  id: string;
  messageId: string;
  toolName: string;
  execution: ExecutionMode;
  parameters: JsonObject;
  serverName?: string;
  /** For an MCP tool: what its server claims about it. */
  claims?: ServerClaims;
  timeoutMs: number;
  status: ToolCardStatus;
  initiatedAt: Millis;
  awaitingConsentAt?: Millis;
  runningAt?: Millis;
  finishedAt?: Millis;
  result?: Json;
  errorCode?: string;
  errorMessage?: string;
  executedBy?: 'client' | 'server';
  /** ToolUseProgress `detail`, when one was given. */
  detail?: string;
}

export type TranscriptEntry =
  | ({ kind: 'user' } & UserMessage)
  | ({ kind: 'assistant' } & AssistantMessage)
  | { kind: 'tool'; call: ToolCallRecord };

/** outpost-policy `Decision`. */
export type ConsentDecision =
  | 'allow_once'
  | 'allow_for_conversation'
  | 'always_allow'
  | 'deny_once'
  | 'always_deny';

/** A question for the user (outpost-policy `ConsentRequest` plus the tool's hints). */
export interface ConsentRequest extends ToolHints {
  /** Names this question in `consent_answer` and `consent_withdrawn`. */
  consentId: string;
  /** The ToolUseRequest id (the tool card). */
  requestId: string;
  conversationId: string;
  tool: string;
  serverName?: string;
  /** The tool's description (for an MCP tool, its server's words). */
  description?: string;
  /** For an MCP tool: what its server claims about it (never a permission). */
  claims?: ServerClaims;
  execution?: ExecutionMode;
  /** The full parameters, exactly as received. */
  parameters: JsonObject;
  /** One line, e.g. "Read /home/u/notes.txt". */
  summary: string;
  /** Resolved paths the call touches. */
  paths: string[];
  /** Folder "allow for this conversation" / "always allow" would cover. */
  folder?: string;
  /** Why the question is asked. */
  reason: string;
  /** The decisions the UI may offer; the backend refuses any other answer. */
  options: ConsentDecision[];
  /** How long the question stays open, from when it is sent. */
  expiresInMs: number;
}

export interface ErrorEvent {
  code: string;
  message: string;
  fatal?: boolean;
}

/** Everything the backend pushes, on the one channel given to `session_subscribe`. */
export type UiEvent =
  | { type: 'connection'; data: ConnectionEvent }
  | { type: 'session'; data: SessionInfo }
  | { type: 'status'; data: StatusEvent }
  | { type: 'user_message'; data: UserMessage }
  | { type: 'assistant_delta'; data: AssistantDelta }
  | { type: 'assistant_message'; data: AssistantMessage }
  | { type: 'tool_initiated'; data: ToolInitiated }
  | { type: 'tool_progress'; data: ToolProgress }
  | { type: 'tool_result'; data: ToolResult }
  | { type: 'consent_request'; data: ConsentRequest }
  | { type: 'consent_withdrawn'; data: { consentId: string; reason: 'cancelled' | 'timed_out' | 'answered' } }
  | { type: 'error'; data: ErrorEvent }
  | { type: 'elicitation'; data: ElicitationEvent }
  | { type: 'elicitation_closed'; data: { id: string } };

/** An MCP server asks the user to fill in a form (`elicitation/create`, form mode). */
export interface ElicitationEvent {
  id: string;
  server: string;
  message: string;
  /** JSON Schema of the answer: an object of primitive properties. */
  schema: JsonObject;
}

export type ElicitationAction = 'accept' | 'decline' | 'cancel';

export type UiEventType = UiEvent['type'];

/** What `session_subscribe` returns: enough to draw the window after a reload. */
export interface SessionSnapshot {
  /** False until a connection (or the demo) has been set up: the UI shows first run. */
  configured: boolean;
  connection: ConnectionEvent;
  status: StatusEvent;
  session: SessionInfo | null;
  transcript: TranscriptEntry[];
  pendingConsents: ConsentRequest[];
}

export interface ConnectionSettings {
  /** `token`: a fixed token kept in the OS keyring; `endpoint`: fetch one from a URL. */
  authMode: 'token' | 'endpoint';
  livekitUrl: string;
  tokenEndpoint: string;
  room: string;
  identity: string;
  /** Read-only: a token is stored in the keyring. Ignored by `settings_set`. */
  hasToken: boolean;
}

export interface FolderScope {
  /** Absolute, or starting with `~/`. */
  path: string;
  access: 'allow' | 'deny';
  /** Tools the entry applies to; absent = all. */
  tools?: string[];
}

export interface NotificationSettings {
  enabled: boolean;
  /** Notify when consent is needed while the window is unfocused. */
  onConsent: boolean;
  /** Notify when a long tool call finishes while the window is unfocused. */
  onLongTask: boolean;
  longTaskSecs: number;
}

export interface Settings {
  connection: ConnectionSettings;
  /** Seconds a consent question stays open (policy `consent_timeout_secs`, 1…86400). */
  consentTimeoutSecs: number;
  folders: FolderScope[];
  notifications: NotificationSettings;
  /** Days history is kept; 0 keeps it forever. */
  retentionDays: number;
}

export type SecretName = 'livekit_token';

export interface ConnectionTestResult {
  ok: boolean;
  /** Plain words: "Connected to room demo in 84 ms" or what went wrong. */
  message: string;
  latencyMs?: number;
}

export type ToolRule = 'allow' | 'ask' | 'deny';

export interface ToolInfo extends ToolHints {
  name: string;
  description: string;
  serverName?: string;
  /** JSON Schema of the parameters. */
  parameters: JsonObject;
  /** Offered to the assistant (listed in ClientHello). */
  enabled: boolean;
  rule: ToolRule;
}

export type McpServerStatus = 'running' | 'starting' | 'crashed' | 'stopped' | 'disabled';

/** One server of `mcp.toml` (Settings → Tool servers). */
export interface McpServerInfo {
  name: string;
  transport: 'stdio' | 'http';
  /** The command and its arguments, or the URL. */
  target: string;
  enabled: boolean;
  status: McpServerStatus;
  toolCount: number;
  lastError?: string;
  /** A stderr log exists (`mcp_servers_log`). */
  hasLog: boolean;
}

/** A server to add: a command (with args) or a URL. */
export interface McpServerDraft {
  name: string;
  command: string;
  args: string[];
  url: string;
  /** Environment variables (stdio) or headers (HTTP); secret-looking names go to the keyring. */
  env: Record<string, string>;
  /** A stdio server's working directory; empty = the app's. */
  cwd: string;
  enabled: boolean;
}

/** What an import would add, for the review step; nothing runs until the user adds. */
export interface McpImportPreview {
  servers: McpServerDraft[];
  skipped: string[];
}

export interface RememberedDecision {
  id: string;
  tool: string;
  decision: 'always_allow' | 'always_deny' | 'allow_for_conversation';
  /** Folder it covers; absent = every path. */
  folder?: string;
  /** With `allow_for_conversation`. */
  conversationId?: string;
  at?: Millis;
}

export interface ConversationSummary {
  id: string;
  title: string;
  assistantName: string;
  startedAt: Millis;
  updatedAt: Millis;
  messageCount: number;
  toolCallCount: number;
}

export interface SearchHit {
  kind: 'message' | 'tool_call';
  conversationId: string;
  /** Message id or tool-call id. */
  id: string;
  at: Millis;
  conversationTitle: string;
  toolName?: string;
  /** Excerpt; matches wrapped in the `highlightStart`/`highlightEnd` markers asked for. */
  snippet: string;
}

export interface ConversationDetail {
  summary: ConversationSummary;
  transcript: TranscriptEntry[];
}

export interface ExportResult {
  /** Where the file was written. */
  path: string;
  bytes: number;
}

export interface AboutInfo {
  appVersion: string;
  coreVersion: string;
  protocolVersion: number;
  dataDir: string;
  policyFile: string;
}

/** The one error shape of every command. */
export interface CommandError {
  code: string;
  message: string;
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

/** Markers the UI asks history search to wrap matches in (Unicode private use, never typed). */
export const HIGHLIGHT_START = '\uE000';
export const HIGHLIGHT_END = '\uE001';

type NoArgs = Record<string, never>;

/** Every command except `session_subscribe`: name → arguments and return value. */
export interface Commands {
  session_connect: { args: NoArgs; returns: null };
  session_start_demo: { args: NoArgs; returns: null };
  session_disconnect: { args: NoArgs; returns: null };
  session_new_conversation: { args: NoArgs; returns: SessionInfo | null };
  session_test_connection: {
    args: { connection: ConnectionSettings; token: string | null };
    returns: ConnectionTestResult;
  };

  chat_send: { args: { text: string }; returns: UserMessage };
  chat_open_link: { args: { url: string }; returns: null };

  consent_answer: { args: { consentId: string; decision: ConsentDecision }; returns: null };
  consent_list_remembered: { args: NoArgs; returns: RememberedDecision[] };
  consent_revoke: { args: { id: string }; returns: null };

  settings_get: { args: NoArgs; returns: Settings };
  settings_set: { args: { settings: Settings }; returns: Settings };
  settings_set_secret: { args: { name: SecretName; value: string }; returns: null };
  settings_clear_secret: { args: { name: SecretName }; returns: null };
  settings_pick_folder: { args: NoArgs; returns: string | null };
  settings_about: { args: NoArgs; returns: AboutInfo };

  history_list: { args: { limit: number; offset: number }; returns: ConversationSummary[] };
  history_search: {
    args: { query: string; limit: number; highlightStart: string; highlightEnd: string };
    returns: SearchHit[];
  };
  history_get: { args: { conversationId: string }; returns: ConversationDetail };
  history_export: {
    args: { conversationId: string | null; format: 'json' | 'markdown' };
    returns: ExportResult;
  };
  history_delete_all: { args: NoArgs; returns: { deleted: number } };

  tools_list: { args: NoArgs; returns: ToolInfo[] };
  tools_set: { args: { name: string; enabled: boolean; rule: ToolRule }; returns: ToolInfo };

  mcp_servers_list: { args: NoArgs; returns: McpServerInfo[] };
  mcp_servers_add: { args: { server: McpServerDraft }; returns: McpServerInfo };
  mcp_servers_set_enabled: { args: { name: string; enabled: boolean }; returns: McpServerInfo };
  mcp_servers_remove: { args: { name: string }; returns: null };
  mcp_servers_log: { args: { name: string }; returns: string };
  mcp_servers_import_preview: { args: { text: string }; returns: McpImportPreview };
  mcp_elicitation_answer: { args: { id: string; action: ElicitationAction; content: JsonObject | null }; returns: null };
}

export type CommandName = keyof Commands;

/** The names, for documentation checks and the shell's `generate_handler!` list. */
export const COMMAND_NAMES: readonly (CommandName | 'session_subscribe')[] = [
  'session_subscribe',
  'session_connect',
  'session_start_demo',
  'session_disconnect',
  'session_new_conversation',
  'session_test_connection',
  'chat_send',
  'chat_open_link',
  'consent_answer',
  'consent_list_remembered',
  'consent_revoke',
  'settings_get',
  'settings_set',
  'settings_set_secret',
  'settings_clear_secret',
  'settings_pick_folder',
  'settings_about',
  'history_list',
  'history_search',
  'history_get',
  'history_export',
  'history_delete_all',
  'tools_list',
  'tools_set',
  'mcp_servers_list',
  'mcp_servers_add',
  'mcp_servers_set_enabled',
  'mcp_servers_remove',
  'mcp_servers_log',
  'mcp_servers_import_preview',
  'mcp_elicitation_answer',
];

export interface Subscription {
  snapshot: SessionSnapshot;
  close(): void;
}

export interface Backend {
  /** Sends a command. Rejects with a `CommandError`. */
  call<K extends CommandName>(cmd: K, args: Commands[K]['args']): Promise<Commands[K]['returns']>;
  /** `session_subscribe`: the current state plus every later event, in order. */
  subscribe(onEvent: (event: UiEvent) => void): Promise<Subscription>;
}

/** Turns anything a command rejected with into a `CommandError`. */
export function toCommandError(e: unknown): CommandError {
  if (e && typeof e === 'object' && 'code' in e && 'message' in e) {
    const o = e as { code: unknown; message: unknown };
    return { code: String(o.code), message: String(o.message) };
  }
  if (e instanceof Error) return { code: 'internal_error', message: e.message };
  return { code: 'internal_error', message: String(e) };
}

/** The real backend: Tauri commands and one event Channel. */
export class TauriBackend implements Backend {
  async call<K extends CommandName>(
    cmd: K,
    args: Commands[K]['args'],
  ): Promise<Commands[K]['returns']> {
    try {
      return await invoke<Commands[K]['returns']>(cmd, args as Record<string, unknown>);
    } catch (e) {
      throw toCommandError(e);
    }
  }

  async subscribe(onEvent: (event: UiEvent) => void): Promise<Subscription> {
    let open = true;
    const channel = new Channel<UiEvent>();
    channel.onmessage = (event) => {
      if (open) onEvent(event);
    };
    try {
      const snapshot = await invoke<SessionSnapshot>('session_subscribe', { onEvent: channel });
      return {
        snapshot,
        close() {
          open = false;
        },
      };
    } catch (e) {
      throw toCommandError(e);
    }
  }
}
