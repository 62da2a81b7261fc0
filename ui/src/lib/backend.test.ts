import { clearMocks, mockIPC } from '@tauri-apps/api/mocks';
import { afterEach, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { COMMAND_NAMES, TauriBackend, toCommandError, type UiEvent } from './backend';

afterEach(() => clearMocks());

describe('TauriBackend', () => {
  it('invokes commands by name with camelCase arguments', async () => {
    const seen: { cmd: string; args: unknown }[] = [];
    mockIPC((cmd, args) => {
      seen.push({ cmd, args });
      if (cmd === 'history_search') return [];
      return null;
    });
    const b = new TauriBackend();
    await b.call('consent_answer', { consentId: 'c1', decision: 'allow_once' });
    await b.call('history_search', { query: 'q', limit: 5, highlightStart: '\uE000', highlightEnd: '\uE001' });
    expect(seen).toEqual([
      { cmd: 'consent_answer', args: { consentId: 'c1', decision: 'allow_once' } },
      { cmd: 'history_search', args: { query: 'q', limit: 5, highlightStart: '\uE000', highlightEnd: '\uE001' } },
    ]);
  });

  it('turns a rejected command into a CommandError', async () => {
    mockIPC(() => {
      throw { code: 'not_connected', message: 'Not connected to the assistant.' };
    });
    await expect(new TauriBackend().call('chat_send', { text: 'x' })).rejects.toEqual({
      code: 'not_connected',
      message: 'Not connected to the assistant.',
    });
  });

  it('subscribes by passing a Channel and returns the snapshot', async () => {
    let channelId: number | undefined;
    mockIPC((cmd, args) => {
      if (cmd === 'session_subscribe') {
        const ch = (args as { onEvent: { id: number } }).onEvent;
        channelId = ch.id;
        return { configured: false, connection: { state: 'disconnected' }, status: { state: 'idle' }, session: null, transcript: [], pendingConsents: [] };
      }
      return null;
    });
    const got: UiEvent[] = [];
    const sub = await new TauriBackend().subscribe((e) => got.push(e));
    expect(sub.snapshot.configured).toBe(false);
    expect(typeof channelId).toBe('number');
  });
});

describe('toCommandError', () => {
  it('normalises anything thrown', () => {
    expect(toCommandError({ code: 'x', message: 'y' })).toEqual({ code: 'x', message: 'y' });
    expect(toCommandError(new Error('boom'))).toEqual({ code: 'internal_error', message: 'boom' });
    expect(toCommandError('plain')).toEqual({ code: 'internal_error', message: 'plain' });
  });
});

describe('CONTRACT.md', () => {
  const doc = readFileSync(resolve(process.cwd(), 'CONTRACT.md'), 'utf8');
  it('documents every command', () => {
    for (const name of COMMAND_NAMES) expect(doc, name).toContain(`### \`${name}\``);
  });
  it('documents every event type', () => {
    const types: UiEvent['type'][] = ['connection', 'session', 'status', 'user_message', 'assistant_delta', 'assistant_message', 'tool_initiated', 'tool_progress', 'tool_result', 'consent_request', 'consent_withdrawn', 'error', 'elicitation', 'elicitation_closed', 'user_transcript', 'voice', 'voice_level'];
    for (const t of types) expect(doc, t).toContain(`### \`${t}\``);
  });
});
