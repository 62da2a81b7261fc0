// Settings → Tool servers over the mock backend: list with status, a server to confirm,
// enable/disable, add
// (command or URL), refused input, edit (env/headers: every value secret, by name only,
// unless written as plain), restart, remove, log, per-tool rules, the import's review
// step, and each server's sandbox: what it may touch, its settings in the form, and the
// consent to run it unsandboxed where the computer cannot sandbox it (issue 28).
import { render, screen, within } from '@testing-library/svelte';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import App from '../../App.svelte';
import { MockBackend } from '../mock-backend';
import { AppState } from '../stores/app.svelte';

let backend: MockBackend | undefined;
let app: AppState | undefined;
afterEach(() => {
  app?.stop();
  backend?.dispose();
});

async function open() {
  backend = new MockBackend({ configured: true, delayScale: 0 });
  app = new AppState(backend);
  render(App, { app });
  await app.start();
  app.openSettings('servers');
  const list = await screen.findByRole('list', { name: 'Tool servers' });
  await vi.waitFor(() => expect(within(list).getAllByTestId('mcp-server')).toHaveLength(2));
  return { backend, list, user: userEvent.setup() };
}

const row = (list: HTMLElement, name: string) =>
  within(list).getAllByTestId('mcp-server').find((r) => r.dataset.name === name)!;

describe('Settings → Tool servers', () => {
  it('lists the servers with status and tools count; a switch disables one', async () => {
    const { backend, list, user } = await open();
    const web = row(list, 'web-tools');
    expect(web).toHaveAttribute('data-status', 'running');
    expect(web).toHaveTextContent('1 tool');
    // The MCP revision the running server speaks (the backend says; the UI copies).
    expect(web).toHaveTextContent('MCP 2026-07-28');
    expect(row(list, 'notes')).toHaveTextContent('Disabled');
    await user.click(within(web).getByRole('checkbox', { name: /web-tools enabled/ }));
    await vi.waitFor(() => expect(row(list, 'web-tools')).toHaveAttribute('data-status', 'disabled'));
    expect(backend.calls.at(-1)).toEqual({ cmd: 'mcp_servers_set_enabled', args: { name: 'web-tools', enabled: false } });
  });

  it('an HTTP server that needs a sign-in says so, signs in through the backend, then offers sign-out', async () => {
    const { backend, list, user } = await open();
    // The live session found that it answers 401 (the backend decides; the UI copies).
    Object.assign(backend.mcpServers.find((s) => s.name === 'notes')!, {
      enabled: true,
      status: 'crashed',
      signIn: 'needed',
      lastError: "MCP server 'notes' needs you to sign in: it answers 401 and uses OAuth",
    });
    await vi.waitFor(() => expect(within(row(list, 'notes')).getByTestId('mcp-sign-in')).toHaveAttribute('data-state', 'needed'), { timeout: 3000 });
    const notes = row(list, 'notes');
    expect(notes).toHaveTextContent('Needs you to sign in');
    // A stdio server has no sign-in.
    expect(within(row(list, 'web-tools')).queryByTestId('mcp-sign-in')).toBeNull();
    expect(within(row(list, 'web-tools')).queryByRole('button', { name: /Sign in/ })).toBeNull();
    await user.click(within(notes).getByRole('button', { name: 'Sign in to notes' }));
    await vi.waitFor(() => expect(backend.calls).toContainEqual({ cmd: 'mcp_servers_sign_in', args: { name: 'notes' } }));
    await vi.waitFor(() => expect(within(row(list, 'notes')).getByTestId('mcp-sign-in')).toHaveAttribute('data-state', 'signed_in'));
    expect(row(list, 'notes')).not.toHaveTextContent('needs you to sign in');
    await user.click(within(row(list, 'notes')).getByRole('button', { name: 'Sign out of notes' }));
    await vi.waitFor(() => expect(backend.calls.at(-1)).toEqual({ cmd: 'mcp_servers_sign_out', args: { name: 'notes' } }));
    await vi.waitFor(() => expect(within(row(list, 'notes')).getByTestId('mcp-sign-in')).toHaveAttribute('data-state', 'not_signed_in'));
  });

  it('a sign-in waiting for the browser can be cancelled: no error, nothing stored, and it can start again', async () => {
    const { backend, list, user } = await open();
    backend.holdSignIns = true;
    const notes = () => row(list, 'notes');
    await user.click(within(notes()).getByRole('button', { name: 'Sign in to notes' }));
    const cancel = await within(notes()).findByRole('button', { name: 'Cancel the sign-in to notes' });
    expect(within(notes()).getByRole('button', { name: 'Sign in to notes' })).toBeDisabled();
    await user.click(cancel);
    await vi.waitFor(() => expect(backend.calls).toContainEqual({ cmd: 'mcp_servers_sign_in_cancel', args: { name: 'notes' } }));
    await vi.waitFor(() => expect(within(notes()).queryByRole('button', { name: 'Cancel the sign-in to notes' })).toBeNull());
    expect(within(notes()).getByTestId('mcp-sign-in')).toHaveAttribute('data-state', 'not_signed_in');
    expect(app!.notices.map((n) => n.text)).toContain('Sign-in to notes cancelled.');
    expect(app!.notices.filter((n) => n.kind === 'error')).toEqual([]);
    // Again, and this time the login in the browser finishes.
    await user.click(within(notes()).getByRole('button', { name: 'Sign in to notes' }));
    await within(notes()).findByRole('button', { name: 'Cancel the sign-in to notes' });
    backend.finishSignIn('notes');
    await vi.waitFor(() => expect(within(notes()).getByTestId('mcp-sign-in')).toHaveAttribute('data-state', 'signed_in'));
    expect(within(notes()).queryByRole('button', { name: 'Cancel the sign-in to notes' })).toBeNull();
  });

  it('a stored sign-in that stopped working offers "Sign in again"', async () => {
    const { backend, list } = await open();
    Object.assign(backend.mcpServers.find((s) => s.name === 'notes')!, { enabled: true, status: 'crashed', signIn: 'again' });
    await vi.waitFor(() => expect(within(row(list, 'notes')).getByTestId('mcp-sign-in')).toHaveAttribute('data-state', 'again'), { timeout: 3000 });
    expect(within(row(list, 'notes')).getByRole('button', { name: 'Sign in to notes' })).toHaveTextContent('Sign in again');
  });

  it('shows a server changed outside Outpost as not confirmed, with no restart, until Confirm', async () => {
    const { backend, list, user } = await open();
    Object.assign(backend.mcpServers.find((s) => s.name === 'web-tools')!, {
      status: 'unconfirmed',
      toolCount: 0,
      lastError: 'its entry in mcp.toml was added or changed outside Outpost',
    });
    await vi.waitFor(() => expect(row(list, 'web-tools')).toHaveAttribute('data-status', 'unconfirmed'), { timeout: 3000 });
    const web = row(list, 'web-tools');
    expect(web).toHaveTextContent('Not confirmed');
    expect(web).toHaveTextContent('changed outside Outpost');
    expect(within(web).queryByRole('button', { name: 'Restart web-tools' })).toBeNull();
    await user.click(within(web).getByRole('button', { name: 'Confirm web-tools' }));
    await vi.waitFor(() => expect(row(list, 'web-tools')).not.toHaveAttribute('data-status', 'unconfirmed'));
    expect(within(row(list, 'web-tools')).queryByRole('button', { name: 'Confirm web-tools' })).toBeNull();
    expect(backend.calls.some((c) => c.cmd === 'mcp_servers_trust' && (c.args as { name: string }).name === 'web-tools')).toBe(true);
  });

  it('adds a command server with its arguments, refuses a bad name, adds a URL server', async () => {
    const { backend, list, user } = await open();
    const form = screen.getByRole('form', { name: 'Add a tool server' });
    await user.type(within(form).getByLabelText('Name'), 'every thing');
    await user.type(within(form).getByLabelText('Command'), 'npx');
    await user.type(within(form).getByLabelText('Arguments'), '-y "@scope/server one"');
    await user.click(within(form).getByRole('button', { name: 'Add server' }));
    expect(await screen.findByRole('alert')).toHaveTextContent("may only contain ASCII letters");
    expect(within(list).getAllByTestId('mcp-server')).toHaveLength(2);
    const nameBox = within(form).getByLabelText('Name');
    await user.clear(nameBox);
    await user.type(nameBox, 'everything');
    await user.click(within(form).getByRole('button', { name: 'Add server' }));
    await vi.waitFor(() => expect(row(list, 'everything')).toBeDefined());
    const added = backend.calls.filter((c) => c.cmd === 'mcp_servers_add').at(-1);
    expect(added?.args).toMatchObject({ server: { name: 'everything', command: 'npx', args: ['-y', '@scope/server one'], url: '' } });
    await user.click(within(form).getByLabelText('Connects to a URL (Streamable HTTP)'));
    await user.type(within(form).getByLabelText('Name'), 'remote');
    await user.type(within(form).getByLabelText('URL'), 'http://127.0.0.1:9/mcp');
    await user.click(within(form).getByRole('button', { name: 'Add server' }));
    await vi.waitFor(() => expect(row(list, 'remote')).toHaveTextContent('http://127.0.0.1:9/mcp'));
  });

  it('shows a server’s stderr log and removes a server', async () => {
    const { list, user } = await open();
    await user.click(within(row(list, 'web-tools')).getByRole('button', { name: 'Log of web-tools' }));
    expect(await screen.findByTestId('mcp-log')).toHaveTextContent('listening on stdio');
    await user.click(within(row(list, 'notes')).getByRole('button', { name: 'Remove notes' }));
    await vi.waitFor(() => expect(within(list).getAllByTestId('mcp-server')).toHaveLength(1));
  });

  it('an import is reviewed before anything is added; unchecked servers are left out', async () => {
    const { backend, list, user } = await open();
    const file = new File([JSON.stringify({ mcpServers: {
      time: { command: 'uvx', args: ['mcp-server-time'] },
      'web-tools': { command: 'x' },
      remote: { url: 'https://mcp.example.invalid/mcp' },
      broken: { args: [] },
    } })], 'claude_desktop_config.json', { type: 'application/json' });
    await user.upload(screen.getByLabelText('Config file to import'), file);
    const review = await screen.findByRole('region', { name: 'Review the import' });
    expect(backend.calls.some((c) => c.cmd === 'mcp_servers_add')).toBe(false);
    expect(review).toHaveTextContent('uvx mcp-server-time');
    expect(within(review).getByRole('list', { name: 'Left out' })).toHaveTextContent("'web-tools': a tool server with this name already exists");
    expect(review).toHaveTextContent("'broken': it has neither");
    await user.click(within(review).getByRole('checkbox', { name: 'remote' }));
    await user.click(within(review).getByRole('button', { name: 'Add selected' }));
    await vi.waitFor(() => expect(row(list, 'time')).toBeDefined());
    expect(within(list).getAllByTestId('mcp-server').map((r) => r.dataset.name)).not.toContain('remote');
  });

  it('a file that is not a config is refused and nothing is added', async () => {
    const { backend, user } = await open();
    await user.upload(screen.getByLabelText('Config file to import'), new File(['not json'], 'x.json', { type: 'application/json' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('not JSON');
    expect(screen.queryByRole('region', { name: 'Review the import' })).toBeNull();
    expect(backend.calls.some((c) => c.cmd === 'mcp_servers_add')).toBe(false);
  });

  it('edits a server: env lines saved, a stored secret shown blank and kept when left blank; restart', async () => {
    const { backend, list, user } = await open();
    // Running: a Restart button, which asks the backend (the mock has no session to restart in).
    await user.click(within(row(list, 'web-tools')).getByRole('button', { name: 'Restart web-tools' }));
    await vi.waitFor(() => expect(backend.calls.at(-1)).toEqual({ cmd: 'mcp_servers_restart', args: { name: 'web-tools' } }));
    await user.click(within(row(list, 'web-tools')).getByRole('button', { name: 'Edit web-tools' }));
    const form = await screen.findByRole('form', { name: 'Edit web-tools' });
    expect(within(form).getByLabelText('Name')).toBeDisabled();
    expect(within(form).getByLabelText('Command')).toHaveValue('npx');
    const env = within(form).getByLabelText(/Environment variables/);
    // An innocent name is a secret too; only the plain box writes a value into mcp.toml.
    await user.type(env, 'GITHUB_TOKEN=t0ken{Enter}GH_PAT=p4t');
    await user.type(within(form).getByLabelText(/Plain environment variables/), 'LOG_LEVEL=debug');
    await user.click(within(form).getByRole('button', { name: 'Save' }));
    await vi.waitFor(() => expect(backend.calls.some((c) => c.cmd === 'mcp_servers_update')).toBe(true));
    expect(backend.calls.filter((c) => c.cmd === 'mcp_servers_update').at(-1)?.args).toMatchObject({
      server: { name: 'web-tools', command: 'npx', args: ['-y', 'web-tools-mcp'], env: { GITHUB_TOKEN: 't0ken', GH_PAT: 'p4t', LOG_LEVEL: 'debug' }, plain: ['LOG_LEVEL'] },
    });
    // Back to the add form; editing again shows the secrets by name only.
    expect(await screen.findByRole('form', { name: 'Add a tool server' })).toBeInTheDocument();
    await user.click(within(row(list, 'web-tools')).getByRole('button', { name: 'Edit web-tools' }));
    const again = await screen.findByRole('form', { name: 'Edit web-tools' });
    expect(within(again).getByLabelText(/Environment variables/)).toHaveValue('GITHUB_TOKEN=\nGH_PAT=');
    expect(within(again).getByLabelText(/Plain environment variables/)).toHaveValue('LOG_LEVEL=debug');
    expect(again).toHaveTextContent('leave them blank to keep them (GITHUB_TOKEN, GH_PAT)');
    await user.click(within(again).getByRole('button', { name: 'Save' }));
    await vi.waitFor(() => expect(backend.calls.filter((c) => c.cmd === 'mcp_servers_update')).toHaveLength(2));
    expect(backend.mcpDrafts.get('web-tools')?.env.GITHUB_TOKEN).toBe('t0ken');
    expect(backend.mcpDrafts.get('web-tools')?.env.GH_PAT).toBe('p4t');
    // A bad line is refused before anything is sent.
    await user.click(within(row(list, 'web-tools')).getByRole('button', { name: 'Edit web-tools' }));
    const third = await screen.findByRole('form', { name: 'Edit web-tools' });
    await user.type(within(third).getByLabelText(/Environment variables/), '{Enter}no equals sign');
    await user.click(within(third).getByRole('button', { name: 'Save' }));
    await vi.waitFor(async () => {
      const alerts = await screen.findAllByRole('alert');
      expect(alerts.some((a) => a.textContent?.includes('is not NAME=value'))).toBe(true);
    });
    expect(backend.calls.filter((c) => c.cmd === 'mcp_servers_update')).toHaveLength(2);
    await user.click(within(third).getByRole('button', { name: 'Cancel' }));
    expect(await screen.findByRole('form', { name: 'Add a tool server' })).toBeInTheDocument();
    // Not connected now (saving stopped it): no Restart to offer.
    expect(within(row(list, 'web-tools')).queryByRole('button', { name: 'Restart web-tools' })).toBeNull();
  });

  it('a name given both as a secret and as a plain value is refused before anything is sent', async () => {
    const { backend, user } = await open();
    const form = screen.getByRole('form', { name: 'Add a tool server' });
    await user.type(within(form).getByLabelText('Name'), 'dup');
    await user.type(within(form).getByLabelText('Command'), 'npx');
    await user.type(within(form).getByLabelText(/Environment variables/), 'MODE=a');
    await user.type(within(form).getByLabelText(/Plain environment variables/), 'MODE=b');
    await user.click(within(form).getByRole('button', { name: 'Add server' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('MODE is given both as a secret and as a plain value');
    expect(backend.calls.some((c) => c.cmd === 'mcp_servers_add')).toBe(false);
  });

  it("lists a server's tools with their claims and sets a tool's rule; deny wins and the effective rule is shown", async () => {
    const { backend, list, user } = await open();
    await user.click(within(row(list, 'web-tools')).getByRole('button', { name: 'Tools of web-tools' }));
    const region = await screen.findByRole('region', { name: 'Tools of web-tools' });
    const tool = (name: string) => within(region).getAllByTestId('mcp-tool').find((r) => r.dataset.name === name)!;
    await vi.waitFor(() => expect(within(region).getAllByTestId('mcp-tool')).toHaveLength(2));
    expect(backend.calls.find((c) => c.cmd === 'mcp_servers_tools')?.args).toEqual({ name: 'web-tools', refresh: false });
    const search = tool('web_search');
    expect(search).toHaveTextContent('Search the web.');
    expect(within(search).getByTestId('server-claims')).toHaveTextContent(/web-tools claims:\s*read-only\s*reaches outside/);
    expect(within(tool('fetch_page')).getByTestId('server-claims')).toHaveTextContent('nothing about this tool');
    expect(tool('fetch_page')).toHaveTextContent('Fetch a page');
    // Both follow the server's rule (ask).
    expect(search).toHaveAttribute('data-effective', 'ask');
    const select = within(search).getByRole('combobox', { name: 'Rule for web_search' });
    expect(select).toHaveValue('');
    expect(within(select).getByRole('option', { name: "Server's rule (Ask)" })).toBeInTheDocument();
    await user.selectOptions(select, 'allow');
    await vi.waitFor(() => expect(backend.calls.at(-1)).toEqual({ cmd: 'mcp_servers_set_tool_rule', args: { name: 'web-tools', tool: 'mcp__web-tools__web_search', rule: 'allow' } }));
    await vi.waitFor(() => expect(tool('web_search')).toHaveAttribute('data-effective', 'allow'));
    expect(within(tool('web_search')).getByTestId('mcp-tool-effective')).toHaveTextContent('Runs: Allow');
    expect(tool('fetch_page')).toHaveAttribute('data-effective', 'ask');
    // The server set to deny: it wins over the tool's allow, and the list follows.
    await user.selectOptions(within(row(list, 'web-tools')).getByRole('combobox', { name: 'Rule for web-tools' }), 'deny');
    await vi.waitFor(() => expect(tool('web_search')).toHaveAttribute('data-effective', 'deny'));
    expect(within(tool('web_search')).getByRole('combobox', { name: 'Rule for web_search' })).toHaveValue('allow');
    expect(within(tool('fetch_page')).getByRole('option', { name: "Server's rule (Deny)" })).toBeInTheDocument();
    // Back to the server's rule: the tool's own rule is removed (null).
    await user.selectOptions(within(row(list, 'web-tools')).getByRole('combobox', { name: 'Rule for web-tools' }), 'allow');
    await user.selectOptions(within(tool('web_search')).getByRole('combobox', { name: 'Rule for web_search' }), '');
    await vi.waitFor(() => expect(backend.calls.at(-1)).toEqual({ cmd: 'mcp_servers_set_tool_rule', args: { name: 'web-tools', tool: 'mcp__web-tools__web_search', rule: null } }));
    expect(backend.mcpToolRules.has('mcp__web-tools__web_search')).toBe(false);
    await vi.waitFor(() => expect(tool('web_search')).toHaveAttribute('data-effective', 'allow'));
    // A tool's deny wins over the server's allow.
    await user.selectOptions(within(tool('fetch_page')).getByRole('combobox', { name: 'Rule for fetch_page' }), 'deny');
    await vi.waitFor(() => expect(tool('fetch_page')).toHaveAttribute('data-effective', 'deny'));
    // Read again on request; closing hides the list.
    await user.click(within(region).getByRole('button', { name: 'Read the list again' }));
    await vi.waitFor(() => expect(backend.calls.at(-1)).toEqual({ cmd: 'mcp_servers_tools', args: { name: 'web-tools', refresh: true } }));
    await user.click(within(region).getByRole('button', { name: 'Close' }));
    expect(screen.queryByRole('region', { name: 'Tools of web-tools' })).toBeNull();
  });

  it("sets a server's rule (allow, deny, back to ask)", async () => {
    const { backend, list, user } = await open();
    const select = within(row(list, 'web-tools')).getByRole('combobox', { name: 'Rule for web-tools' });
    expect(select).toHaveValue('ask');
    await user.selectOptions(select, 'allow');
    await vi.waitFor(() => expect(backend.calls.at(-1)).toEqual({ cmd: 'mcp_servers_set_rule', args: { name: 'web-tools', rule: 'allow' } }));
    expect(backend.mcpServers.find((s) => s.name === 'web-tools')?.rule).toBe('allow');
    await user.selectOptions(select, 'deny');
    await vi.waitFor(() => expect(backend.calls.at(-1)).toEqual({ cmd: 'mcp_servers_set_rule', args: { name: 'web-tools', rule: 'deny' } }));
    await user.selectOptions(select, 'ask');
    await vi.waitFor(() => expect(backend.mcpServers.find((s) => s.name === 'web-tools')?.rule).toBe('ask'));
  });

  it('shows what each server may touch; the form sets its sandbox and the list follows', async () => {
    const { backend, list, user } = await open();
    const web = within(row(list, 'web-tools')).getByTestId('mcp-sandbox');
    expect(web).toHaveAttribute('data-state', 'sandboxed');
    expect(web).toHaveTextContent('Sandboxed');
    expect(web).toHaveTextContent('reads and writes /home/demo/Projects; network on');
    await user.click(within(web).getByText('What web-tools may touch'));
    const grants = within(web).getByRole('list', { name: 'What web-tools may touch' });
    expect(grants).toHaveTextContent("/home/demo/.npm (its launcher: npx's cache)");
    expect(web).toHaveTextContent('Network: on: npx downloads');
    // An HTTP server runs elsewhere: nothing to show.
    expect(within(row(list, 'notes')).queryByTestId('mcp-sandbox')).toBeNull();
    // Added with its network off, the allowed folders read-only and one folder to write.
    const form = screen.getByRole('form', { name: 'Add a tool server' });
    await user.type(within(form).getByLabelText('Name'), 'files');
    await user.type(within(form).getByLabelText('Command'), 'node');
    await user.type(within(form).getByLabelText('Arguments'), 'server.js');
    await user.selectOptions(within(form).getByLabelText('Network'), 'off');
    await user.selectOptions(within(form).getByLabelText('Allowed folders'), 'read');
    await user.type(within(form).getByLabelText(/read and write$/), '~/exports');
    await user.click(within(form).getByRole('button', { name: 'Add server' }));
    await vi.waitFor(() => expect(row(list, 'files')).toBeDefined());
    expect(backend.calls.filter((c) => c.cmd === 'mcp_servers_add').at(-1)?.args).toMatchObject({
      server: { name: 'files', sandbox: 'on', network: 'off', folders: 'read', read: [], write: ['~/exports'] },
    });
    expect(within(row(list, 'files')).getByTestId('mcp-sandbox-summary'))
      .toHaveTextContent('sandboxed: reads and writes ~/exports; reads /home/demo/Projects; no network');
    // Editing shows the settings back, and what it may touch.
    await user.click(within(row(list, 'files')).getByRole('button', { name: 'Edit files' }));
    const edit = await screen.findByRole('form', { name: 'Edit files' });
    expect(within(edit).getByLabelText('Network')).toHaveValue('off');
    expect(within(edit).getByLabelText('Allowed folders')).toHaveValue('read');
    expect(within(edit).getByLabelText(/read and write$/)).toHaveValue('~/exports');
    expect(within(edit).getByTestId('mcp-sandbox')).toHaveTextContent('no network');
    // A relative folder is refused by the backend; nothing changes.
    await user.type(within(edit).getByLabelText(/it may read \(one a line/), 'relative/x');
    await user.click(within(edit).getByRole('button', { name: 'Save' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('neither absolute');
    expect(backend.mcpDrafts.get('files')?.read).toEqual([]);
  });

  it('where the computer cannot sandbox, a server waits until the user agrees to run it unsandboxed', async () => {
    const { backend, list, user } = await open();
    backend.noLandlock = true;
    const form = screen.getByRole('form', { name: 'Add a tool server' });
    await user.type(within(form).getByLabelText('Name'), 'time');
    await user.type(within(form).getByLabelText('Command'), 'uvx');
    await user.click(within(form).getByRole('button', { name: 'Add server' }));
    await vi.waitFor(() => expect(row(list, 'time')).toBeDefined());
    // Not connected: stopped, but the plan says it would not start.
    expect(within(row(list, 'time')).getByTestId('mcp-sandbox')).toHaveAttribute('data-state', 'refused');
    expect(row(list, 'time')).toHaveTextContent('Not started: no sandbox here');
    Object.assign(backend.mcpServers.find((s) => s.name === 'time')!, { status: 'no_sandbox', lastError: 'this computer\'s kernel cannot sandbox programs' });
    await vi.waitFor(() => expect(row(list, 'time')).toHaveAttribute('data-status', 'no_sandbox'), { timeout: 3000 });
    expect(row(list, 'time')).toHaveTextContent('No sandbox here');
    expect(within(row(list, 'time')).queryByRole('button', { name: 'Restart time' })).toBeNull();
    await user.click(within(row(list, 'time')).getByRole('button', { name: 'Run time unsandboxed' }));
    await vi.waitFor(() => expect(backend.calls.at(-1)?.cmd).toBe('mcp_servers_update'));
    expect(backend.calls.at(-1)?.args).toMatchObject({ server: { name: 'time', sandbox: 'if_available' } });
    expect((backend.calls.at(-1)?.args as { server: object }).server).not.toHaveProperty('reach');
    await vi.waitFor(() => expect(within(row(list, 'time')).getByTestId('mcp-sandbox')).toHaveAttribute('data-state', 'unsandboxed'));
    expect(row(list, 'time')).toHaveTextContent('NOT sandboxed');
    expect(await screen.findByText(/runs unsandboxed on this computer/)).toBeInTheDocument();
  });

  it("an import's review shows what each server would touch", async () => {
    const { user } = await open();
    const file = new File([JSON.stringify({ mcpServers: {
      github: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-github'] },
      local: { command: 'node', args: ['/opt/srv/index.js'] },
    } })], 'claude_desktop_config.json', { type: 'application/json' });
    await user.upload(screen.getByLabelText('Config file to import'), file);
    const review = await screen.findByRole('region', { name: 'Review the import' });
    const reaches = within(review).getAllByTestId('mcp-sandbox-summary');
    expect(reaches[0]).toHaveTextContent('network on');
    expect(reaches[1]).toHaveTextContent('no network');
  });
});
