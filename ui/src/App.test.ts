// The whole app over the mock backend: first run, demo, a tool call with consent, history.
import { render, screen, within } from '@testing-library/svelte';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import App from './App.svelte';
import { MockBackend } from './lib/mock-backend';
import { AppState } from './lib/stores/app.svelte';

let backend: MockBackend | undefined;
let app: AppState | undefined;
afterEach(() => {
  app?.stop();
  backend?.dispose();
});

async function start(configured: boolean) {
  backend = new MockBackend({ configured, delayScale: 0 });
  app = new AppState(backend);
  render(App, { app });
  await app.start();
  return { backend, app };
}

describe('App over the mock backend', () => {
  it('first run offers the demo and the connection form; the demo opens the chat', async () => {
    await start(false);
    expect(await screen.findByRole('heading', { name: 'Welcome to Outpost' })).toBeInTheDocument();
    expect(await screen.findByLabelText('LiveKit URL')).toBeInTheDocument();
    const user = userEvent.setup();
    await user.click(screen.getByRole('button', { name: 'Try the local demo' }));
    await vi.waitFor(() => expect(screen.getByTestId('connection-state')).toHaveTextContent('Connected'));
    expect(screen.getByRole('navigation', { name: 'Main' })).toBeInTheDocument();
  });

  it('the connection form validates, tests, and stores the token via the keyring command', async () => {
    const { backend } = await start(false);
    const user = userEvent.setup();
    await user.click(await screen.findByRole('button', { name: 'Save and connect' }));
    expect(screen.getByRole('alert')).toHaveTextContent('must start with ws:// or wss://');
    await user.type(screen.getByLabelText('LiveKit URL'), 'ws://127.0.0.1:7880');
    await user.type(screen.getByLabelText('Room'), 'demo');
    await user.type(screen.getByLabelText('Identity'), 'alice');
    await user.type(screen.getByLabelText('Access token'), 'secret-token');
    await user.click(screen.getByRole('button', { name: 'Test connection' }));
    expect(await screen.findByTestId('test-result')).toHaveTextContent('joined room “demo”');
    await user.click(screen.getByRole('button', { name: 'Save and connect' }));
    await vi.waitFor(() => expect(backend.secrets.get('livekit_token')).toBe('secret-token'));
    const saved = backend.calls.find((c) => c.cmd === 'settings_set');
    expect(JSON.stringify(saved)).not.toContain('secret-token');
    expect(localStorage.length).toBe(0);
    await vi.waitFor(() => expect(screen.getByTestId('connection-state')).toHaveTextContent('Connected'));
  });

  it('a read request asks for consent; Allow once runs the tool and the card completes', async () => {
    const { backend } = await start(true);
    await backend.call('session_start_demo', {});
    const user = userEvent.setup();
    await vi.waitFor(() => expect(screen.getByTestId('connection-state')).toHaveTextContent('Connected'));
    await user.type(screen.getByLabelText('Message'), 'please read my notes{Enter}');
    const dialog = await screen.findByRole('alertdialog', {}, { timeout: 3000 });
    expect(within(dialog).getByRole('region', { name: /Full arguments/ })).toHaveTextContent('~/Documents/notes.txt');
    expect(screen.getByRole('article', { name: /read_local_file: Waiting for your permission/ })).toBeInTheDocument();
    await user.click(within(dialog).getByRole('button', { name: 'Allow once' }));
    await vi.waitFor(() => expect(screen.getByRole('article', { name: /read_local_file: Completed/ })).toBeInTheDocument(), { timeout: 3000 });
    expect(screen.queryByRole('alertdialog')).toBeNull();
    await vi.waitFor(() => expect(screen.getByText(/meeting moved to/)).toBeInTheDocument());
    expect(backend.calls.some((c) => c.cmd === 'consent_answer' && (c.args as { decision: string }).decision === 'allow_once')).toBe(true);
  });

  it('Esc in the dialog denies and the card says so in plain words', async () => {
    const { backend } = await start(true);
    await backend.call('session_start_demo', {});
    const user = userEvent.setup();
    await vi.waitFor(() => expect(screen.getByTestId('connection-state')).toHaveTextContent('Connected'));
    await user.type(screen.getByLabelText('Message'), 'write a summary{Enter}');
    const dialog = await screen.findByRole('alertdialog', {}, { timeout: 3000 });
    expect(within(dialog).queryByRole('button', { name: 'Always allow' })).toBeNull();
    await vi.waitFor(() => expect(within(dialog).getByRole('button', { name: 'Deny' })).toHaveFocus());
    await user.keyboard('{Escape}');
    const card = await screen.findByRole('article', { name: /write_file: Denied/ }, { timeout: 3000 });
    expect(card).toHaveTextContent('You did not allow this tool to run.');
  });

  it('shows the reconnecting banner while the link is down', async () => {
    const { backend } = await start(true);
    await backend.call('session_start_demo', {});
    await vi.waitFor(() => expect(screen.getByTestId('connection-state')).toHaveTextContent('Connected'));
    backend.simulateReconnect(50);
    expect(await screen.findByTestId('reconnecting-banner')).toHaveTextContent('Reconnecting…');
    await vi.waitFor(() => expect(screen.queryByTestId('reconnecting-banner')).toBeNull());
  });

  it('history: search highlights matches safely and opens a conversation', async () => {
    const { app, backend } = await start(true);
    backend.conversations.get('conv-trip')!.transcript.push({ kind: 'user', id: 'evil', text: 'lisbon <img src=x onerror=alert(1)>', at: Date.now() });
    app.screen = 'history';
    const user = userEvent.setup();
    await user.type(await screen.findByRole('searchbox', { name: 'Search history' }), 'lisbon');
    const results = await screen.findByRole('list', { name: 'Search results' });
    await vi.waitFor(() => expect(within(results).getAllByRole('button').length).toBeGreaterThan(1));
    const marks = results.querySelectorAll('mark');
    expect([...marks].every((m) => m.textContent?.toLowerCase() === 'lisbon')).toBe(true);
    expect(results.querySelector('img')).toBeNull();
    expect(results.textContent).not.toMatch(/[\uE000\uE001]/);
    await user.click(within(results).getAllByRole('button')[0]!);
    const cont = await screen.findByRole('button', { name: 'Continue' });
    expect(cont).toBeDisabled();
    expect(cont).toHaveAttribute('title', 'Connect to continue a conversation');
    expect(screen.queryByLabelText('Message')).toBeNull();
    await user.click(screen.getByRole('button', { name: 'Export Markdown' }));
    expect(await screen.findByText(/Exported to ~\/Downloads\/outpost-conv-trip.md/)).toBeInTheDocument();
  });

  it('history: Continue reopens a past conversation in the chat and the next message goes on in it', async () => {
    const { app, backend } = await start(true);
    await backend.call('session_start_demo', {});
    await vi.waitFor(() => expect(screen.getByTestId('connection-state')).toHaveTextContent('Connected'));
    const past = backend.conversations.get('conv-trip')!;
    const firstWords = past.transcript.find((e) => e.kind === 'user');
    app.screen = 'history';
    const user = userEvent.setup();
    await user.click(await screen.findByRole('button', { name: new RegExp(past.summary.title.slice(0, 20)) }));
    await user.click(await screen.findByRole('button', { name: 'Continue' }));
    // The chat shows the past messages, and the session is that conversation.
    await vi.waitFor(() => expect(app.screen).toBe('chat'));
    expect(firstWords && firstWords.kind === 'user').toBe(true);
    if (firstWords && firstWords.kind === 'user') {
      expect(await screen.findByText(firstWords.text)).toBeInTheDocument();
    }
    expect(app.session.session?.conversationId).toBe('conv-trip');
    await user.type(screen.getByLabelText('Message'), 'and one more thing{Enter}');
    expect(await screen.findByText('and one more thing')).toBeInTheDocument();
    expect(app.session.session?.conversationId).toBe('conv-trip');
    expect(backend.calls.some((c) => c.cmd === 'history_continue')).toBe(true);
  });

  it('a file is shown exactly as it will be sent, can be removed, and goes with the message', async () => {
    const { backend } = await start(true);
    await backend.call('session_start_demo', {});
    await vi.waitFor(() => expect(screen.getByTestId('connection-state')).toHaveTextContent('Connected'));
    const user = userEvent.setup();
    await user.click(screen.getByRole('button', { name: 'Attach a file' }));
    const staged = await screen.findByTestId('staged-files');
    expect(staged).toHaveTextContent('screenshot.png');
    expect(staged).toHaveTextContent('image/png · 68 bytes');
    expect(staged).toHaveTextContent(/SHA-256 f1f2b8e35a1e/);
    expect(staged).toHaveTextContent('as Attachment messages of the Outpost protocol');
    expect(within(staged).getByRole('img', { name: 'screenshot.png' })).toBeInTheDocument();
    // Removed, then attached again and sent with an empty text.
    await user.click(within(staged).getByRole('button', { name: 'Remove screenshot.png' }));
    await vi.waitFor(() => expect(screen.queryByTestId('staged-files')).toBeNull());
    await user.click(screen.getByRole('button', { name: 'Attach a file' }));
    await screen.findByTestId('staged-files');
    await user.click(screen.getByRole('button', { name: 'Send' }));
    const sent = await screen.findByRole('list', { name: 'Files sent' });
    expect(sent).toHaveTextContent('screenshot.png');
    expect(screen.queryByTestId('staged-files')).toBeNull();
    expect(await screen.findByText(/You gave me: screenshot.png, image\/png, 68 bytes/, {}, { timeout: 3000 })).toBeInTheDocument();
  });

  it('settings: tools can be switched and remembered decisions revoked, by keyboard', async () => {
    const { app, backend } = await start(true);
    backend.remembered.push({ id: 'r1', tool: 'read_local_file', decision: 'always_allow', folder: '~/Documents' });
    app.openSettings('tools');
    const user = userEvent.setup();
    const toggle = await screen.findByRole('checkbox', { name: /open_url enabled/ });
    toggle.focus();
    await user.keyboard(' ');
    await vi.waitFor(() => expect(backend.tools.find((t) => t.name === 'open_url')?.enabled).toBe(true));
    await user.selectOptions(screen.getByRole('combobox', { name: 'Permission for calculator' }), 'deny');
    await vi.waitFor(() => expect(backend.tools.find((t) => t.name === 'calculator')?.rule).toBe('deny'));
    const allowForWrite = within(screen.getByRole('combobox', { name: 'Permission for write_file' })).getByRole('option', { name: 'Allow' });
    expect(allowForWrite).toBeDisabled();
    await user.click(screen.getByRole('button', { name: 'Revoke Always allow for read_local_file' }));
    await vi.waitFor(() => expect(backend.remembered).toHaveLength(0));
  });

  it('settings: folders can be added and removed', async () => {
    const { app, backend } = await start(true);
    app.openSettings('folders');
    const user = userEvent.setup();
    await user.type(await screen.findByLabelText('Folder path'), '~/Work{Enter}');
    await vi.waitFor(() => expect(backend.settings.folders.map((f) => f.path)).toContain('~/Work'));
    await user.click(screen.getByRole('button', { name: 'Choose folder…' }));
    await vi.waitFor(() => expect(backend.settings.folders.map((f) => f.path)).toContain('~/Projects'));
    await user.click(screen.getByRole('button', { name: 'Remove ~/Work' }));
    await vi.waitFor(() => expect(backend.settings.folders.map((f) => f.path)).not.toContain('~/Work'));
    await user.type(screen.getByLabelText('Folder path'), 'relative/path{Enter}');
    expect(await screen.findByRole('alert')).toHaveTextContent('must be absolute or start with ~/');
  });
});
