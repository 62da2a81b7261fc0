// Settings → Tool servers over the mock backend: list with status, enable/disable, add
// (command or URL), refused input, remove, log, and the import's review step.
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
    expect(row(list, 'notes')).toHaveTextContent('Disabled');
    await user.click(within(web).getByRole('checkbox', { name: /web-tools enabled/ }));
    await vi.waitFor(() => expect(row(list, 'web-tools')).toHaveAttribute('data-status', 'disabled'));
    expect(backend.calls.at(-1)).toEqual({ cmd: 'mcp_servers_set_enabled', args: { name: 'web-tools', enabled: false } });
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
});
