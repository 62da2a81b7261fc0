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
// Data shapes: generated from the Rust types (crates/outpost-desktop/src/contract.rs) by ts-rs
// into ./generated/contract.ts. Change them in Rust and regenerate with
// `OUTPOST_WRITE_CONTRACT=1 cargo test -p outpost-desktop --test contract_ts`.
// ---------------------------------------------------------------------------------------------

import type {
  JsonValue,
  SystemSettings,
  AttachmentView,
  AboutInfo,
  ConnectionSettings,
  ConnectionTestResult,
  ConsentDecision,
  ConversationDetail,
  ConversationSummary,
  ElicitationAction,
  ExportFormat,
  ExportResult,
  McpImportPreview,
  McpServerDraft,
  McpServerInfo,
  McpServerTools,
  RememberedDecision,
  SearchHit,
  SessionInfo,
  SessionSnapshot,
  Settings,
  ToolInfo,
  ToolRule,
  UiEvent,
  UserMessage,
  VoiceStatus,
  VoiceControl,
  AudioDevices,
  AppCommand,
} from './generated/contract';
import { COMMAND_NAMES } from './generated/contract';

// Every generated type is part of this module's contract.
export type * from './generated/contract';

/** ToolUseResult `errorCode` values of PROTOCOL.md §5.2; custom codes arrive verbatim. */
export type ToolErrorCode =
  | 'unknown_tool'
  | 'invalid_parameters'
  | 'execution_error'
  | 'timeout'
  | 'permission_denied'
  | 'cancelled';

/** Tool descriptor hints (ToolDescriptor in PROTOCOL.md §3). Absent means false. */
export interface ToolHints {
  readOnly?: boolean;
  destructive?: boolean;
  openWorld?: boolean;
}

/** A JSON value as found in tool parameters and results. */
export type Json = JsonValue;
export type JsonObject = { [key: string]: Json };

/** Epoch milliseconds. */
export type Millis = number;

export type UiEventType = UiEvent['type'];

export type SecretName = 'livekit_token' | 'livekit_api_secret';

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
  chat_attach_pick: { args: NoArgs; returns: AttachmentView[] };
  chat_attach_data: { args: { name: string; mimeType: string | null; data: string }; returns: AttachmentView[] };
  chat_attach_remove: { args: { id: string }; returns: AttachmentView[] };
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
  settings_trust_policy: { args: NoArgs; returns: Settings };

  history_list: { args: { limit: number; offset: number }; returns: ConversationSummary[] };
  history_search: {
    args: { query: string; limit: number; highlightStart: string; highlightEnd: string };
    returns: SearchHit[];
  };
  history_get: { args: { conversationId: string }; returns: ConversationDetail };
  history_continue: { args: { conversationId: string }; returns: null };
  history_export: {
    args: { conversationId: string | null; format: ExportFormat };
    returns: ExportResult;
  };
  history_delete_all: { args: NoArgs; returns: { deleted: number } };

  tools_list: { args: NoArgs; returns: ToolInfo[] };
  tools_set: { args: { name: string; enabled: boolean; rule: ToolRule }; returns: ToolInfo };

  mcp_servers_list: { args: NoArgs; returns: McpServerInfo[] };
  mcp_servers_add: { args: { server: McpServerDraft }; returns: McpServerInfo };
  mcp_servers_get: { args: { name: string }; returns: McpServerDraft };
  mcp_servers_update: { args: { server: McpServerDraft }; returns: McpServerInfo };
  mcp_servers_restart: { args: { name: string }; returns: McpServerInfo };
  mcp_servers_set_rule: { args: { name: string; rule: ToolRule }; returns: McpServerInfo };
  mcp_servers_tools: { args: { name: string; refresh?: boolean }; returns: McpServerTools };
  mcp_servers_set_tool_rule: { args: { name: string; tool: string; rule: ToolRule | null }; returns: McpServerTools };
  mcp_servers_set_enabled: { args: { name: string; enabled: boolean }; returns: McpServerInfo };
  mcp_servers_remove: { args: { name: string }; returns: null };
  mcp_servers_trust: { args: { name: string }; returns: McpServerInfo };
  mcp_servers_sign_in: { args: { name: string }; returns: McpServerInfo };
  mcp_servers_sign_in_cancel: { args: { name: string }; returns: null };
  mcp_servers_sign_out: { args: { name: string }; returns: McpServerInfo };
  mcp_servers_log: { args: { name: string }; returns: string };
  mcp_servers_import_preview: { args: { text: string }; returns: McpImportPreview };
  mcp_elicitation_answer: { args: { id: string; action: ElicitationAction; content: JsonObject | null }; returns: null };

  voice_status: { args: NoArgs; returns: VoiceStatus };
  voice_start: { args: NoArgs; returns: VoiceStatus };
  voice_stop: { args: NoArgs; returns: VoiceStatus };
  voice_control: { args: { control: VoiceControl }; returns: VoiceStatus };
  voice_devices: { args: NoArgs; returns: AudioDevices };
  voice_set_devices: { args: { input: string | null; output: string | null }; returns: AudioDevices };

  system_settings: { args: NoArgs; returns: SystemSettings };
  system_set: { args: { settings: SystemSettings }; returns: SystemSettings };
}

export type CommandName = keyof Commands;

/** The app's commands (src-tauri/commands.txt, the one list), for documentation checks. */
export { COMMAND_NAMES };

/** True only when `A` and `B` are the same set of names. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** The typed commands are exactly the app's commands but `session_subscribe` (which
 * `subscribe` invokes by name): `npm run check` fails when the two lists part. */
const commandsAreTheAppsCommands: Same<CommandName | 'session_subscribe', AppCommand> = true;
void commandsAreTheAppsCommands;

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
