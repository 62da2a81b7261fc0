/** Plain words for codes and states: what people read instead of identifiers. */
import type {
  AssistantState,
  ConnectionStatus,
  ExecutionMode,
  ToolCallStatus,
  ToolHints,
} from '../backend';

/** One plain sentence per ToolUseResult error code (PROTOCOL.md §5.2). */
export function errorInPlainWords(code: string | undefined, message?: string): string {
  switch (code) {
    case 'unknown_tool':
      return 'Outpost does not have this tool, so it could not run on this computer.';
    case 'invalid_parameters':
      return 'The assistant asked for this tool with arguments the tool does not accept.';
    case 'execution_error':
      return 'The tool started but ran into a problem and could not finish.';
    case 'timeout':
      return 'The tool took longer than it was allowed to and was stopped.';
    case 'permission_denied':
      if (message && /consent timeout/i.test(message))
        return 'Nobody answered the permission request in time, so the tool was not allowed to run.';
      if (message && /your policy|secrets list/i.test(message))
        return 'Your permission settings do not allow this tool to run here.';
      return 'You did not allow this tool to run.';
    case 'cancelled':
      return 'The assistant cancelled this tool call before it finished.';
    case undefined:
    case '':
      return 'The tool failed without saying why.';
    default:
      return `The tool failed (reason code “${code}”).`;
  }
}

export const STATUS_LABEL: Record<ToolCallStatus, string> = {
  initiated: 'Requested',
  awaiting_consent: 'Waiting for your permission',
  running: 'Running',
  completed: 'Completed',
  error: 'Failed',
  timeout: 'Timed out',
  denied: 'Denied',
  cancelled: 'Cancelled',
};

export const EXECUTION_LABEL: Record<ExecutionMode, string> = {
  client: 'Runs on this computer',
  server: 'Runs on the assistant’s server',
  either: 'Runs here or on the server',
};

export const ASSISTANT_STATE_LABEL: Record<AssistantState, string> = {
  idle: 'Idle',
  listening: 'Listening',
  thinking: 'Thinking…',
  speaking: 'Speaking',
  using_tool: 'Using a tool',
};

export const CONNECTION_LABEL: Record<ConnectionStatus, string> = {
  disconnected: 'Disconnected',
  connecting: 'Connecting…',
  connected: 'Connected',
  reconnecting: 'Reconnecting…',
  failed: 'Connection failed',
};

export type DangerLevel = 'low' | 'medium' | 'high';

export interface Danger {
  level: DangerLevel;
  label: string;
  /** "Reads only", "Can write", … */
  access: string;
  explanation: string;
}

/** Danger level and read/write wording from the tool descriptor hints. */
export function dangerOf(h: ToolHints): Danger {
  if (h.destructive) {
    return {
      level: 'high',
      label: 'High risk',
      access: 'Writes — can change or delete data',
      explanation: 'This tool can change or delete your data. It always asks first.',
    };
  }
  if (h.readOnly && !h.openWorld) {
    return {
      level: 'low',
      label: 'Low risk',
      access: 'Reads only',
      explanation: 'This tool only reads; it changes nothing.',
    };
  }
  if (h.openWorld) {
    return {
      level: 'medium',
      label: 'Medium risk',
      access: h.readOnly ? 'Reads only — reaches outside this computer' : 'Can write — reaches outside this computer',
      explanation: 'This tool reaches outside this computer or into other applications.',
    };
  }
  return {
    level: 'medium',
    label: 'Medium risk',
    access: 'Can write',
    explanation: 'This tool may make changes.',
  };
}

/** "4.2 s", "1 min 05 s". */
export function formatDuration(ms: number): string {
  const clamped = Math.max(0, ms);
  if (clamped < 60_000) return `${(clamped / 1000).toFixed(1)} s`;
  const totalSecs = Math.floor(clamped / 1000);
  const m = Math.floor(totalSecs / 60);
  const s = totalSecs % 60;
  return `${m} min ${String(s).padStart(2, '0')} s`;
}

/** "1:59" for a countdown. */
export function formatCountdown(ms: number): string {
  const secs = Math.max(0, Math.ceil(ms / 1000));
  return `${Math.floor(secs / 60)}:${String(secs % 60).padStart(2, '0')}`;
}

export function formatTime(at: number): string {
  return new Date(at).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
}

export function formatDate(at: number): string {
  return new Date(at).toLocaleString(undefined, {
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
  });
}

/** A file size for people: `12 bytes`, `820 KB`, `1.5 MB` (as the backend words it). */
export function formatBytes(n: number): string {
  if (n >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(1)} MB`;
  if (n >= 1024) return `${Math.round(n / 1024)} KB`;
  return `${n} bytes`;
}
