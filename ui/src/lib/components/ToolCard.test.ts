import { render, screen, within } from '@testing-library/svelte';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import type { ToolCallRecord } from '../backend';
import ToolCard from './ToolCard.svelte';

const T0 = 1_700_000_000_000;

function call(over: Partial<ToolCallRecord> = {}): ToolCallRecord {
  return {
    id: 'call-1',
    messageId: 'msg-1',
    toolName: 'read_local_file',
    execution: 'client',
    parameters: { path: '~/Documents/notes.txt', maxBytes: 4096 },
    timeoutMs: 30_000,
    status: 'initiated',
    initiatedAt: T0,
    readOnly: true,
    ...over,
  };
}

function card(c: ToolCallRecord, now = T0) {
  render(ToolCard, { call: c, now });
  return screen.getByRole('article');
}

describe('ToolCard', () => {
  it('initiated: name, execution mode, pretty arguments with the path highlighted', () => {
    const el = card(call());
    expect(el).toHaveAttribute('data-status', 'initiated');
    expect(el).toHaveAccessibleName('Tool read_local_file: Requested');
    expect(within(el).getByText('read_local_file')).toBeInTheDocument();
    expect(within(el).getByText('Runs on this computer')).toBeInTheDocument();
    const args = within(el).getByRole('region', { name: 'Arguments of read_local_file' });
    expect(args.textContent).toContain('"maxBytes": 4096');
    const path = within(args).getByText('"~/Documents/notes.txt"');
    expect(path).toHaveClass('path');
    expect(within(el).queryByText(/MCP/)).toBeNull();
  });

  it('shows the MCP server when present', () => {
    const el = card(call({ serverName: 'files-mcp' }));
    expect(within(el).getByText('MCP · files-mcp')).toBeInTheDocument();
  });

  it('an MCP tool shows what its server claims, marked as claims, and its progress', () => {
    const el = card(call({ serverName: 'everything', claims: { readOnly: true, destructive: false, openWorld: false }, status: 'running', runningAt: T0, detail: '3/10: working' }));
    const claims = within(el).getByTestId('server-claims');
    expect(claims).toHaveTextContent('everything claims:');
    expect(claims).toHaveTextContent('read-only');
    expect(claims).toHaveTextContent('not destructive');
    expect(claims).toHaveTextContent('stays local');
    expect(claims).toHaveTextContent('not checked by Outpost; grants nothing');
    expect(within(el).getByTestId('progress')).toHaveTextContent('3/10: working');
  });

  it('an MCP server that claims nothing is shown as saying nothing', () => {
    const quiet = card(call({ serverName: 'quiet' }));
    expect(within(quiet).getByTestId('server-claims')).toHaveTextContent('nothing about this tool');
  });

  it('a built-in tool shows no server claims', () => {
    const el = card(call());
    expect(within(el).queryByTestId('server-claims')).toBeNull();
  });

  it('awaiting consent: says it waits for the dialog', () => {
    const el = card(call({ status: 'awaiting_consent', awaitingConsentAt: T0 + 10, detail: 'Read /home/a/notes.txt' }));
    expect(within(el).getByRole('status')).toHaveTextContent('Waiting for your permission');
    expect(el).toHaveTextContent('Read /home/a/notes.txt — Waiting for your answer in the permission dialog.');
  });

  it('running: shows the elapsed time, which moves with the clock', async () => {
    const c = call({ status: 'running', runningAt: T0 });
    const { rerender } = render(ToolCard, { call: c, now: T0 + 3_200 });
    expect(screen.getByTestId('elapsed')).toHaveTextContent('3.2 s');
    await rerender({ call: c, now: T0 + 75_000 });
    expect(screen.getByTestId('elapsed')).toHaveTextContent('1 min 15 s');
    expect(screen.getByRole('status')).toHaveTextContent('Running');
  });

  it('completed: a short preview that expands to the full result and back', async () => {
    const content = Array.from({ length: 12 }, (_, i) => `line ${i + 1}`).join('\n');
    const el = card(
      call({ status: 'completed', runningAt: T0 + 100, finishedAt: T0 + 1_600, result: { content, bytes: 1234, lines: 12, path: '/home/a/notes.txt', ok: true } }),
      T0 + 5_000,
    );
    expect(within(el).getByRole('status')).toHaveTextContent('Completed');
    expect(within(el).getByTestId('elapsed')).toHaveTextContent('in 1.5 s');
    const preview = within(el).getByTestId('result-preview');
    expect(preview.textContent).toContain('"content"');
    expect(preview.textContent).not.toContain('"ok": true');
    const more = within(el).getByRole('button', { name: /Show full result/ });
    expect(more).toHaveAttribute('aria-expanded', 'false');
    const user = userEvent.setup();
    await user.click(more);
    const full = within(el).getByRole('region', { name: 'Full result of read_local_file' });
    expect(full.textContent).toContain('"ok": true');
    expect(full.textContent).toContain('line 12');
    expect(within(el).getByRole('button', { name: 'Show less' })).toHaveAttribute('aria-expanded', 'true');
    await user.click(within(el).getByRole('button', { name: 'Show less' }));
    expect(within(el).queryByRole('region', { name: 'Full result of read_local_file' })).toBeNull();
  });

  it('completed with a small result needs no expand button', () => {
    const el = card(call({ status: 'completed', finishedAt: T0 + 10, result: { value: 42 } }));
    expect(within(el).getByTestId('result-preview').textContent).toContain('"value": 42');
    expect(within(el).queryByRole('button', { name: /Show full result/ })).toBeNull();
  });

  it('the arguments can be collapsed by keyboard', async () => {
    const el = card(call());
    const user = userEvent.setup();
    const toggle = within(el).getByRole('button', { name: /Arguments/ });
    toggle.focus();
    await user.keyboard('{Enter}');
    expect(toggle).toHaveAttribute('aria-expanded', 'false');
    expect(within(el).queryByRole('region', { name: /Arguments of/ })).toBeNull();
  });

  const failures: [string, string, string, RegExp][] = [
    ['error', 'unknown_tool', "Tool 'x' is not supported by this client", /Outpost does not have this tool/],
    ['error', 'invalid_parameters', "Invalid parameters for tool 'x': path: required", /arguments the tool does not accept/],
    ['error', 'execution_error', 'File not found: /home/a/notes.txt', /ran into a problem and could not finish/],
    ['timeout', 'timeout', 'Tool execution exceeded timeout of 30000ms', /took longer than it was allowed to and was stopped/],
    ['denied', 'permission_denied', 'Permission denied by the user: no', /You did not allow this tool to run/],
    ['cancelled', 'cancelled', 'Tool execution was cancelled by the server', /assistant cancelled this tool call/],
    ['error', 'quota_exceeded', 'custom failure', /reason code “quota_exceeded”/],
  ];
  for (const [status, code, message, plain] of failures) {
    it(`${status} (${code}): plain words, then the raw details`, () => {
      const el = card(
        call({ status: status as ToolCallRecord['status'], errorCode: code, errorMessage: message, finishedAt: T0 + 50 }),
      );
      expect(el).toHaveAttribute('data-status', status);
      const note = within(el).getByRole('note');
      expect(note).toHaveTextContent(plain);
      expect(note).toHaveTextContent(message);
      expect(note).toHaveTextContent(code);
    });
  }

  it('denied by the consent timeout and by policy read differently', () => {
    const { unmount } = render(ToolCard, {
      call: call({ status: 'denied', errorCode: 'permission_denied', errorMessage: 'Permission denied by the consent timeout: 120 s' }),
      now: T0,
    });
    expect(screen.getByRole('note')).toHaveTextContent(/Nobody answered the permission request in time/);
    unmount();
    render(ToolCard, {
      call: call({ status: 'denied', errorCode: 'permission_denied', errorMessage: 'Permission denied by your policy: ~/.ssh' }),
      now: T0,
    });
    expect(screen.getByRole('note')).toHaveTextContent(/Your permission settings do not allow/);
  });

  it('timeout and denied and cancelled show their own state labels', () => {
    for (const [status, label] of [['timeout', 'Timed out'], ['denied', 'Denied'], ['cancelled', 'Cancelled'], ['error', 'Failed']] as const) {
      const { unmount } = render(ToolCard, { call: call({ status, errorCode: 'x' }), now: T0 });
      expect(screen.getByRole('status')).toHaveTextContent(label);
      unmount();
    }
  });

  it('server-executed: labelled as running on the server, from request to result', async () => {
    const base = call({ toolName: 'web_search', execution: 'server', serverName: 'web-tools', parameters: { query: 'lisbon' }, readOnly: true, openWorld: true });
    const { rerender } = render(ToolCard, { call: base, now: T0 });
    const el = screen.getByRole('article');
    expect(within(el).getByText('Runs on the assistant’s server')).toBeInTheDocument();
    expect(el).toHaveTextContent('The assistant’s server runs this tool; Outpost only shows it.');
    expect(within(el).getByText('MCP · web-tools')).toBeInTheDocument();
    await rerender({ call: { ...base, status: 'running', runningAt: T0 }, now: T0 + 2_000 });
    expect(el).toHaveTextContent('Running on the assistant’s server.');
    expect(screen.getByTestId('elapsed')).toHaveTextContent('2.0 s');
    await rerender({ call: { ...base, status: 'completed', runningAt: T0, finishedAt: T0 + 2_500, executedBy: 'server', result: { hits: 3 } }, now: T0 + 9_000 });
    expect(screen.getByRole('status')).toHaveTextContent('Completed');
    expect(screen.getByTestId('result-preview')).toHaveTextContent('"hits": 3');
  });

  it('either executed by the server says so', () => {
    const el = card(call({ execution: 'either', status: 'completed', executedBy: 'server', finishedAt: T0 + 1, result: { a: 1 } }));
    expect(within(el).getByText('Runs here or on the server')).toBeInTheDocument();
    expect(el).toHaveTextContent('The assistant’s server ran this tool.');
  });

  it('a destructive tool is flagged', () => {
    const el = card(call({ toolName: 'write_file', destructive: true, readOnly: false }));
    expect(within(el).getByText('Writes — can change or delete data')).toBeInTheDocument();
  });

  it('renders hostile argument text as text', () => {
    const el = card(call({ parameters: { path: '<img src=x onerror=alert(1)>' } }));
    expect(el.querySelector('img')).toBeNull();
    expect(el).toHaveTextContent('<img src=x onerror=alert(1)>');
  });
});
