// Generated from crates/outpost-desktop/src/contract.rs by ts-rs. Do not edit:
// OUTPOST_WRITE_CONTRACT=1 cargo test -p outpost-desktop --test contract_ts

export type JsonValue = number | string | boolean | Array<JsonValue> | { [key in string]: JsonValue } | null;

export type ConsentDecision = "allow_once" | "allow_for_conversation" | "always_allow" | "deny_once" | "always_deny";

export type AssistantMode = "outpost" | "livekit_agents";

export type ServerClaims = { 
/**
 * `readOnlyHint`: the tool changes nothing.
 */
readOnly?: boolean, 
/**
 * `destructiveHint`: the tool may delete or overwrite.
 */
destructive?: boolean, 
/**
 * `idempotentHint`: calling it again with the same arguments changes nothing more.
 */
idempotent?: boolean, 
/**
 * `openWorldHint`: the tool reaches outside (the web, other systems).
 */
openWorld?: boolean, };

export type AssistantState = "idle" | "listening" | "thinking" | "speaking" | "using_tool";

export type ExecutionMode = "server" | "client" | "either";

export type ExecutedBy = "client" | "server";

export type ToolCallStatus = "initiated" | "awaiting_consent" | "running" | "completed" | "error" | "timeout" | "denied" | "cancelled";

export type ToolProgressState = "awaiting_consent" | "running";

export type WithdrawnReason = "cancelled" | "timed_out" | "answered";

export type AuthMode = "token" | "endpoint" | "api_key";

export type FolderAccess = "allow" | "deny";

export type ToolRule = "allow" | "ask" | "deny";

export type RememberedKind = "always_allow" | "always_deny" | "allow_for_conversation";

export type SearchHitKind = "message" | "tool_call";

export type ExportFormat = "json" | "markdown";

export type ConnectionStatus = "disconnected" | "connecting" | "connected" | "reconnecting" | "failed";

export type ConnectionEvent = { 
/**
 * The state.
 */
state: ConnectionStatus, 
/**
 * Why, when known.
 */
detail?: string, 
/**
 * Reconnect attempt number.
 */
attempt?: number, 
/**
 * While connected: the network path, `direct (UDP)`, `direct (TCP)`, `relayed
 * (TURN/TLS)`...
 */
path?: string, 
/**
 * While connected: whether a TURN server relays the traffic.
 */
relayed?: boolean, };

export type SessionInfo = { 
/**
 * The conversation.
 */
conversationId: string, 
/**
 * The hello/welcome exchange.
 */
sessionId: string, 
/**
 * What to call the assistant.
 */
assistantName: string, 
/**
 * What the assistant speaks: `outpost` or `livekit_agents`.
 */
mode: AssistantMode, 
/**
 * Whether it takes files and images (a LiveKit agent: byte streams; an Outpost
 * assistant that announced `attachments`).
 */
attachments: boolean, };

export type StatusEvent = { 
/**
 * What the assistant is doing.
 */
state: AssistantState, 
/**
 * The call waited on.
 */
toolUseId?: string, 
/**
 * Free text.
 */
detail?: string, };

export type ToolCallRecord = { 
/**
 * Call id.
 */
id: string, 
/**
 * The assistant message behind it.
 */
messageId: string, 
/**
 * Tool.
 */
toolName: string, 
/**
 * Who runs it.
 */
execution: ExecutionMode, 
/**
 * Parameters as received.
 */
parameters: { [key in string]: JsonValue }, 
/**
 * MCP server, when any.
 */
serverName?: string, 
/**
 * What the MCP server claims about the tool.
 */
claims?: ServerClaims, 
/**
 * Effective timeout.
 */
timeoutMs: number, 
/**
 * Where the call stands (the core's status, copied).
 */
status: ToolCallStatus, 
/**
 * When it arrived.
 */
initiatedAt: number, 
/**
 * When consent was asked.
 */
awaitingConsentAt?: number, 
/**
 * When it started running.
 */
runningAt?: number, 
/**
 * When it ended.
 */
finishedAt?: number, 
/**
 * Result.
 */
result?: JsonValue, 
/**
 * Failure code.
 */
errorCode?: string, 
/**
 * Failure text.
 */
errorMessage?: string, 
/**
 * Who ran it.
 */
executedBy?: ExecutedBy, 
/**
 * Progress text.
 */
detail?: string, 
/**
 * Hint: changes nothing.
 */
readOnly?: boolean, 
/**
 * Hint: may change or delete data.
 */
destructive?: boolean, 
/**
 * Hint: reaches outside the machine.
 */
openWorld?: boolean, };

export type TranscriptEntry = { "kind": "user", 
/**
 * Id.
 */
id: string, 
/**
 * Text.
 */
text: string, 
/**
 * When.
 */
at: number, 
/**
 * Said aloud (the agent's transcript of it), still growing or final; absent for
 * typed messages.
 */
speech?: SpeechText, 
/**
 * The files given with it (absent when none).
 */
attachments?: Array<AttachmentView>, } | { "kind": "assistant", 
/**
 * Id.
 */
id: string, 
/**
 * Text.
 */
text: string, 
/**
 * When.
 */
at: number, 
/**
 * The user message it answers.
 */
inReplyTo?: string, } | { "kind": "tool", 
/**
 * The call.
 */
call: ToolCallRecord, };

export type ConsentRequest = { 
/**
 * Answer with this.
 */
consentId: string, 
/**
 * The call.
 */
requestId: string, 
/**
 * The conversation.
 */
conversationId: string, 
/**
 * Tool.
 */
tool: string, 
/**
 * MCP server.
 */
serverName?: string, 
/**
 * The tool's description.
 */
description?: string, 
/**
 * What the MCP server claims about the tool.
 */
claims?: ServerClaims, 
/**
 * Execution mode.
 */
execution?: ExecutionMode, 
/**
 * The full parameters.
 */
parameters: { [key in string]: JsonValue }, 
/**
 * One line.
 */
summary: string, 
/**
 * Resolved paths.
 */
paths: Array<string>, 
/**
 * What a broader answer covers.
 */
folder?: string, 
/**
 * Why asked.
 */
reason: string, 
/**
 * Answers to offer.
 */
options: Array<ConsentDecision>, 
/**
 * Time left when sent.
 */
expiresInMs: number, 
/**
 * Hint.
 */
readOnly?: boolean, 
/**
 * Hint.
 */
destructive?: boolean, 
/**
 * Hint.
 */
openWorld?: boolean, };

export type SessionSnapshot = { 
/**
 * False until a connection or the demo is set up.
 */
configured: boolean, 
/**
 * Link.
 */
connection: ConnectionEvent, 
/**
 * Assistant state.
 */
status: StatusEvent, 
/**
 * The live session.
 */
session: SessionInfo | null, 
/**
 * The live conversation so far.
 */
transcript: Array<TranscriptEntry>, 
/**
 * Open consent questions, oldest first.
 */
pendingConsents: Array<ConsentRequest>, };

export type UiEvent = { "type": "connection", "data": ConnectionEvent } | { "type": "session", "data": SessionInfo } | { "type": "status", "data": StatusEvent } | { "type": "user_message", "data": UserMessage } | { "type": "assistant_delta", "data": AssistantDelta } | { "type": "assistant_message", "data": AssistantMessage } | { "type": "tool_initiated", "data": ToolInitiated } | { "type": "tool_progress", "data": ToolProgress } | { "type": "tool_result", "data": ToolResult } | { "type": "consent_request", "data": ConsentRequest } | { "type": "consent_withdrawn", "data": ConsentWithdrawn } | { "type": "error", "data": ErrorEvent } | { "type": "elicitation", "data": ElicitationEvent } | { "type": "elicitation_closed", "data": ElicitationClosed } | { "type": "user_transcript", "data": UserTranscript } | { "type": "voice", "data": VoiceStatus } | { "type": "voice_level", "data": VoiceLevel } | { "type": "conversation", "data": ConversationOpened } | { "type": "attachments", "data": StagedAttachments } | { "type": "raised", "data": Raised };

export type UserMessage = { 
/**
 * Id.
 */
id: string, 
/**
 * Text.
 */
text: string, 
/**
 * When.
 */
at: number, 
/**
 * The files given with it (absent when none).
 */
attachments?: Array<AttachmentView>, };

export type AttachmentView = { 
/**
 * Id.
 */
id: string, 
/**
 * The file's name (no folders).
 */
name: string, 
/**
 * Its media type.
 */
mimeType: string, 
/**
 * Its length in bytes.
 */
size: number, 
/**
 * SHA-256 of the bytes, lower-case hex.
 */
sha256: string, 
/**
 * An image as a `data:` URL: every staged image; in the transcript and the history
 * only images up to 256 KiB (their bytes are kept).
 */
image?: string, };

export type StagedAttachments = { 
/**
 * The files.
 */
items: Array<AttachmentView>, };

export type AssistantDelta = { 
/**
 * The message.
 */
messageId: string, 
/**
 * Position.
 */
seq: number, 
/**
 * Text to append.
 */
delta: string, };

export type AssistantMessage = { 
/**
 * Id.
 */
id: string, 
/**
 * Markdown.
 */
text: string, 
/**
 * The user message it answers.
 */
inReplyTo?: string, 
/**
 * When.
 */
at: number, };

export type ToolInitiated = { 
/**
 * Call id.
 */
id: string, 
/**
 * Assistant message.
 */
messageId: string, 
/**
 * Tool.
 */
toolName: string, 
/**
 * Execution mode.
 */
execution: ExecutionMode, 
/**
 * Parameters.
 */
parameters: { [key in string]: JsonValue }, 
/**
 * MCP server.
 */
serverName?: string, 
/**
 * What the MCP server claims about the tool.
 */
claims?: ServerClaims, 
/**
 * Effective timeout.
 */
timeoutMs: number, 
/**
 * When.
 */
at: number, 
/**
 * Hint.
 */
readOnly?: boolean, 
/**
 * Hint.
 */
destructive?: boolean, 
/**
 * Hint.
 */
openWorld?: boolean, };

export type ToolProgress = { 
/**
 * Call id.
 */
id: string, 
/**
 * Waiting for consent or running, as reported.
 */
state: ToolProgressState, 
/**
 * The call's status after the report (the core's).
 */
status: ToolCallStatus, 
/**
 * Free text.
 */
detail?: string, 
/**
 * When.
 */
at: number, };

export type ToolResult = { 
/**
 * Call id.
 */
id: string, 
/**
 * Success.
 */
success: boolean, 
/**
 * The call's final status (the core's).
 */
status: ToolCallStatus, 
/**
 * Result.
 */
result?: JsonValue, 
/**
 * Failure code.
 */
errorCode?: string, 
/**
 * Failure text.
 */
errorMessage?: string, 
/**
 * Who ran it.
 */
executedBy?: ExecutedBy, 
/**
 * When.
 */
at: number, };

export type ConsentWithdrawn = { 
/**
 * The question.
 */
consentId: string, 
/**
 * Why.
 */
reason: WithdrawnReason, };

export type ErrorEvent = { 
/**
 * Code.
 */
code: string, 
/**
 * A sentence.
 */
message: string, 
/**
 * The session ended because of it.
 */
fatal?: boolean, };

export type ElicitationEvent = { 
/**
 * Answer with this (`mcp_elicitation_answer`).
 */
id: string, 
/**
 * The server that asks.
 */
server: string, 
/**
 * What it asks, in its words.
 */
message: string, 
/**
 * The JSON Schema of the answer: an object of primitive properties (empty for a URL
 * request).
 */
schema: { [key in string]: JsonValue }, 
/**
 * URL mode: the server asks the user to open this URL (a sign-in, a payment) instead
 * of filling a form. Shown in full; opened only if the user chooses to (then the
 * answer is `accept`, with no content).
 */
url?: string, };

export type ElicitationClosed = { 
/**
 * The form.
 */
id: string, };

export type ElicitationAction = "accept" | "decline" | "cancel";

export type SpeechText = "interim" | "final";

export type UserTranscript = { 
/**
 * The segment id (the message id once final).
 */
id: string, 
/**
 * The text so far.
 */
text: string, 
/**
 * Interim or final.
 */
speech: SpeechText, 
/**
 * When the segment began.
 */
at: number, };

export type VoiceMode = "push_to_talk" | "open_mic";

export type DeviceState = "off" | "ready" | "failed";

export type DeviceStatus = { 
/**
 * Off, ready or failed.
 */
state: DeviceState, 
/**
 * The device in use (its id), when open.
 */
device?: string, 
/**
 * Why it failed, in words for the user.
 */
error?: string, };

export type VoiceStatus = { 
/**
 * Voice is on (the devices are open or were tried).
 */
on: boolean, 
/**
 * Push-to-talk or open mic.
 */
mode: VoiceMode, 
/**
 * Muted by the user: nothing is sent whatever the mode.
 */
muted: boolean, 
/**
 * The talk key or button is held.
 */
talking: boolean, 
/**
 * The microphone track is live right now (on, not muted, open mic or held).
 */
transmitting: boolean, 
/**
 * The microphone.
 */
input: DeviceStatus, 
/**
 * The speaker or headphones.
 */
output: DeviceStatus, 
/**
 * The "Echo cancellation" setting (saved; on by default).
 */
echoCancellation: boolean, 
/**
 * The speaker's sound is being removed from the microphone right now (the setting
 * is on and the canceller runs). Off with open mic: headphones are needed.
 */
echoCancelling: boolean, };

export type VoiceLevel = { 
/**
 * The microphone's level (shown even while muted, so the user sees it works).
 */
input: number, 
/**
 * What is playing (the assistant speaking).
 */
output: number, };

export type AudioDevice = { 
/**
 * Its id (saved in the settings).
 */
id: string, 
/**
 * A name to show.
 */
name: string, 
/**
 * The system's default.
 */
isDefault: boolean, };

export type AudioDevices = { 
/**
 * Microphones.
 */
inputs: Array<AudioDevice>, 
/**
 * Speakers and headphones.
 */
outputs: Array<AudioDevice>, 
/**
 * The chosen microphone.
 */
input?: string, 
/**
 * The chosen output.
 */
output?: string, 
/**
 * Why the list is empty or incomplete, when the system said.
 */
error?: string, };

export type VoiceControl = { 
/**
 * Mute or unmute.
 */
muted?: boolean, 
/**
 * Switch the mode.
 */
mode?: VoiceMode, 
/**
 * The talk key or button went down (true) or up (false).
 */
talking?: boolean, 
/**
 * Turn echo cancellation on or off (saved in the settings; applies at once).
 */
echoCancellation?: boolean, };

export type ConnectionSettings = { 
/**
 * A fixed token or a token endpoint.
 */
authMode: AuthMode, 
/**
 * `ws(s)://` URL.
 */
livekitUrl: string, 
/**
 * Token endpoint URL.
 */
tokenEndpoint: string, 
/**
 * Room.
 */
room: string, 
/**
 * This app's identity.
 */
identity: string, 
/**
 * The LiveKit Agents agent to dispatch by name (token endpoint or API key); empty:
 * agents dispatched automatically.
 */
agentName: string, 
/**
 * API key (`apiKey` mode, local development).
 */
apiKey: string, 
/**
 * Read-only: a token is in the keyring.
 */
hasToken: boolean, 
/**
 * Read-only: the API key's secret is in the keyring.
 */
hasApiSecret: boolean, };

export type FolderScope = { 
/**
 * Absolute or `~/` path.
 */
path: string, 
/**
 * Allowed or denied.
 */
access: FolderAccess, 
/**
 * Tools it applies to; absent = all.
 */
tools?: Array<string>, };

export type NotificationSettings = { 
/**
 * Master switch.
 */
enabled: boolean, 
/**
 * When consent is needed.
 */
onConsent: boolean, 
/**
 * When a long task finishes.
 */
onLongTask: boolean, 
/**
 * What counts as long.
 */
longTaskSecs: number, };

export type Settings = { 
/**
 * Connection.
 */
connection: ConnectionSettings, 
/**
 * Consent timeout.
 */
consentTimeoutSecs: number, 
/**
 * Folder scopes (policy `[[folders]]`).
 */
folders: Array<FolderScope>, 
/**
 * Notifications.
 */
notifications: NotificationSettings, 
/**
 * 0 = forever.
 */
retentionDays: number, 
/**
 * The policy file was changed outside Outpost to allow more than the user confirmed:
 * what it would allow (not in force until `settings_trust_policy`). Ignored by
 * `settings_set`.
 */
policyUnconfirmed?: string, };

export type ConnectionTestResult = { 
/**
 * Whether the join worked.
 */
ok: boolean, 
/**
 * Plain words.
 */
message: string, 
/**
 * Join time.
 */
latencyMs?: number, };

export type SystemSettings = { 
/**
 * Closing the window keeps the session running in the tray icon (consent questions
 * then arrive as notifications and in the tray); off: closing the window quits.
 */
keepInTray: boolean, 
/**
 * Start Outpost at login (an XDG autostart entry; off by default).
 */
startAtLogin: boolean, 
/**
 * Where that entry is (read-only; empty when there is no home folder).
 */
autostartFile: string, 
/**
 * The system-wide shortcut (Settings → Voice): held with voice on in push-to-talk, the
 * microphone is live; pressed otherwise, Outpost comes forward with the message box
 * focused. An accelerator like `Ctrl+Alt+Space`; empty = off.
 */
shortcut: string, 
/**
 * Whether the shortcut works system-wide, in plain words (read-only): bound through
 * the desktop portal's GlobalShortcuts (Wayland) or an X11 key grab, or why not (no
 * portal and no X11 display, or held by another program).
 */
shortcutStatus: string, 
/**
 * The shortcut is registered and works in every window (read-only).
 */
shortcutActive: boolean, };

export type Raised = { 
/**
 * What to focus: `composer`.
 */
focus: string, };

export type ToolInfo = { 
/**
 * Name.
 */
name: string, 
/**
 * Description.
 */
description: string, 
/**
 * MCP server.
 */
serverName?: string, 
/**
 * What the MCP server claims about the tool.
 */
claims?: ServerClaims, 
/**
 * JSON Schema.
 */
parameters: { [key in string]: JsonValue }, 
/**
 * Offered in the hello.
 */
enabled: boolean, 
/**
 * The rule.
 */
rule: ToolRule, 
/**
 * Hint.
 */
readOnly: boolean, 
/**
 * Hint.
 */
destructive: boolean, 
/**
 * Hint.
 */
openWorld: boolean, };

export type McpTransport = "stdio" | "http";

export type McpSignIn = "signed_in" | "not_signed_in" | "needed" | "again";

export type McpServerStatus = "running" | "starting" | "crashed" | "stopped" | "disabled" | "unconfirmed" | "no_sandbox";

export type McpSandboxState = "sandboxed" | "unsandboxed" | "refused";

export type McpAccess = "read" | "read_write";

export type McpGrantKind = "program" | "launcher" | "working_folder" | "allowed_folder" | "extra";

export type McpSandboxMode = "on" | "if_available" | "off";

export type McpNetwork = "auto" | "on" | "off";

export type McpFolderAccess = "read_write" | "read" | "none";

export type McpSandboxGrant = { 
/**
 * The folder (and what is below it) or file.
 */
path: string, 
/**
 * Read, or read and write.
 */
access: McpAccess, 
/**
 * Why it is reachable.
 */
kind: McpGrantKind, 
/**
 * A few words on why.
 */
why: string, };

export type McpSandboxInfo = { 
/**
 * Sandboxed, not sandboxed, or not started (no sandbox here, no consent yet).
 */
state: McpSandboxState, 
/**
 * One line: what it may read and write, the network (as in the consent dialog).
 */
summary: string, 
/**
 * Why it runs unsandboxed or is not started.
 */
why?: string, 
/**
 * The places of its own it may reach (besides the system's programs and libraries,
 * parts of /etc, /proc, /dev/null and a private temporary folder).
 */
grants: Array<McpSandboxGrant>, 
/**
 * Whether it may use the network.
 */
network: boolean, 
/**
 * Why the network is on or off.
 */
networkWhy: string, 
/**
 * What was asked for but left out, and why (a secret inside a folder, a folder the
 * policy denies, a launcher's cache that holds something denied).
 */
leftOut: Array<string>, 
/**
 * What this computer's kernel cannot hold.
 */
limits: Array<string>, };

export type McpServerInfo = { 
/**
 * Its name (`mcp__NAME__tool`).
 */
name: string, 
/**
 * How Outpost talks to it.
 */
transport: McpTransport, 
/**
 * The command and its arguments, or the URL.
 */
target: string, 
/**
 * Started at connect.
 */
enabled: boolean, 
/**
 * How it is doing.
 */
status: McpServerStatus, 
/**
 * Tools it offers now.
 */
toolCount: number, 
/**
 * The MCP revision it speaks while it runs (`2026-07-28`, `2025-11-25`...).
 */
protocol?: string, 
/**
 * Why it last failed, if it did.
 */
lastError?: string, 
/**
 * A stderr log exists (`mcp_servers_log`).
 */
hasLog: boolean, 
/**
 * The server's rule in the policy (`[mcp_servers]`): every tool of it runs without
 * asking, asks (the default), or never runs; a rule for one tool (`[tools]`) wins.
 */
rule: ToolRule, 
/**
 * What a stdio server may touch (its sandbox): as it runs in the live session, else
 * as it would start now. Absent for an HTTP server (it runs elsewhere).
 */
sandbox?: McpSandboxInfo, 
/**
 * An HTTP server's OAuth sign-in (docs/MCP.md, "Signing in"); absent for stdio.
 */
signIn?: McpSignIn, };

export type McpServerDraft = { 
/**
 * Its name.
 */
name: string, 
/**
 * A stdio server's program (empty for an HTTP server).
 */
command: string, 
/**
 * Its arguments, as they are (no shell).
 */
args: Array<string>, 
/**
 * An HTTP server's URL (empty for a stdio server).
 */
url: string, 
/**
 * Environment variables (stdio) or headers (HTTP) by name. Every value goes to the
 * system keyring (`mcp.toml` keeps its name and a reference) and comes back empty,
 * by name only, unless its name is in `plain`.
 */
env: { [key in string]: string }, 
/**
 * Names in `env` whose values are not secret: written into `mcp.toml` as they are
 * and shown in the form.
 */
plain: Array<string>, 
/**
 * A stdio server's working directory (empty: the app's).
 */
cwd: string, 
/**
 * Start it at connect.
 */
enabled: boolean, 
/**
 * A stdio server's sandbox: on (the default), if-available, off.
 */
sandbox: McpSandboxMode, 
/**
 * A stdio server's network: auto (on for launchers such as npx and uvx), on, off.
 */
network: McpNetwork, 
/**
 * How a stdio server may use the policy's allowed folders.
 */
folders: McpFolderAccess, 
/**
 * More folders (or files) it may read (absolute, or starting with `~/`).
 */
read: Array<string>, 
/**
 * More folders (or files) it may read and write.
 */
write: Array<string>, 
/**
 * Given back, never read: what the server would touch with these settings
 * (`mcp_servers_get`, `mcp_servers_import_preview`).
 */
reach?: McpSandboxInfo, };

export type McpToolInfo = { 
/**
 * The server's name for it (what `tools/call` takes).
 */
name: string, 
/**
 * Its name in Outpost's catalogue (`mcp__SERVER__TOOL`), the key of its rule under
 * `[tools]` in policy.toml.
 */
outpostName: string, 
/**
 * Display title, if the server gives one.
 */
title?: string, 
/**
 * What the server says it does.
 */
description: string, 
/**
 * What the server claims about it (MCP annotations): shown, never a permission.
 */
claims?: ServerClaims, 
/**
 * Its own rule (`[tools]`); absent when it follows its server's.
 */
rule?: ToolRule, 
/**
 * The rule it runs under: `deny` at the tool or its server wins, then its own rule,
 * then its server's, then ask.
 */
effective: ToolRule, 
/**
 * The server offers it now; false for a rule in policy.toml whose tool the server
 * does not list (renamed, or gone).
 */
offered: boolean, };

export type McpServerTools = { 
/**
 * The server.
 */
server: string, 
/**
 * Its rule (`[mcp_servers]`), which a tool without its own rule follows.
 */
serverRule: ToolRule, 
/**
 * Its tools: those it offers, then rules for tools it does not offer.
 */
tools: Array<McpToolInfo>, 
/**
 * Why the list could not be read (the server did not start); the tools are then
 * only those with a rule.
 */
problem?: string, };

export type McpImportPreview = { 
/**
 * The servers that can be added (`enabled` as the file had it); the user picks.
 */
servers: Array<McpServerDraft>, 
/**
 * One sentence per entry left out (bad shape, a name already configured, ...).
 */
skipped: Array<string>, };

export type RememberedDecision = { 
/**
 * Revoke with this.
 */
id: string, 
/**
 * Tool.
 */
tool: string, 
/**
 * What was remembered.
 */
decision: RememberedKind, 
/**
 * Folder covered.
 */
folder?: string, 
/**
 * Conversation (for conversation grants).
 */
conversationId?: string, 
/**
 * When.
 */
at?: number, };

export type ConversationSummary = { 
/**
 * Id.
 */
id: string, 
/**
 * Title.
 */
title: string, 
/**
 * Assistant.
 */
assistantName: string, 
/**
 * Start.
 */
startedAt: number, 
/**
 * Last activity.
 */
updatedAt: number, 
/**
 * Messages.
 */
messageCount: number, 
/**
 * Tool calls.
 */
toolCallCount: number, };

export type SearchHit = { 
/**
 * A message or a tool call.
 */
kind: SearchHitKind, 
/**
 * Conversation.
 */
conversationId: string, 
/**
 * Message or call id.
 */
id: string, 
/**
 * When.
 */
at: number, 
/**
 * Title of the conversation.
 */
conversationTitle: string, 
/**
 * Tool, for calls.
 */
toolName?: string, 
/**
 * Marked snippet.
 */
snippet: string, };

export type ConversationDetail = { 
/**
 * Summary.
 */
summary: ConversationSummary, 
/**
 * Read-only transcript.
 */
transcript: Array<TranscriptEntry>, };

export type ConversationOpened = { 
/**
 * The conversation; the next `session` event with this id keeps the transcript.
 */
conversationId: string, 
/**
 * Its messages and tool cards so far.
 */
transcript: Array<TranscriptEntry>, };

export type ExportResult = { 
/**
 * Where.
 */
path: string, 
/**
 * Size.
 */
bytes: number, };

export type AboutInfo = { 
/**
 * The app.
 */
appVersion: string, 
/**
 * outpost-core.
 */
coreVersion: string, 
/**
 * Protocol.
 */
protocolVersion: number, 
/**
 * Data directory.
 */
dataDir: string, 
/**
 * Policy file.
 */
policyFile: string, };

/** Every app command (src-tauri/commands.txt, the one list), in order. */
export const COMMAND_NAMES = [
  'session_subscribe',
  'session_connect',
  'session_start_demo',
  'session_disconnect',
  'session_new_conversation',
  'session_test_connection',
  'chat_send',
  'chat_attach_pick',
  'chat_attach_data',
  'chat_attach_remove',
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
  'settings_trust_policy',
  'history_list',
  'history_search',
  'history_get',
  'history_continue',
  'history_export',
  'history_delete_all',
  'tools_list',
  'tools_set',
  'mcp_servers_list',
  'mcp_servers_add',
  'mcp_servers_get',
  'mcp_servers_update',
  'mcp_servers_restart',
  'mcp_servers_set_rule',
  'mcp_servers_tools',
  'mcp_servers_set_tool_rule',
  'mcp_servers_set_enabled',
  'mcp_servers_remove',
  'mcp_servers_trust',
  'mcp_servers_sign_in',
  'mcp_servers_sign_in_cancel',
  'mcp_servers_sign_out',
  'mcp_servers_log',
  'mcp_servers_import_preview',
  'mcp_elicitation_answer',
  'voice_status',
  'voice_start',
  'voice_stop',
  'voice_control',
  'voice_devices',
  'voice_set_devices',
  'system_settings',
  'system_set',
] as const;

/** An app command's name. */
export type AppCommand = (typeof COMMAND_NAMES)[number];
