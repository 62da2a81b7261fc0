import { render, screen, within } from '@testing-library/svelte';
import userEvent from '@testing-library/user-event';
import { describe, expect, it, vi } from 'vitest';
import type { ConsentRequest } from '../backend';
import type { PendingConsent } from '../stores/consent.svelte';
import ConsentDialog from './ConsentDialog.svelte';

const T0 = 1_700_000_000_000;

function request(over: Partial<ConsentRequest> = {}): ConsentRequest {
  return {
    consentId: 'c1',
    requestId: 'r1',
    conversationId: 'conv',
    tool: 'read_local_file',
    parameters: { path: '~/Documents/notes.txt' },
    summary: 'Read /home/alice/Documents/notes.txt',
    paths: ['/home/alice/Documents/notes.txt'],
    folder: '/home/alice/Documents',
    reason: 'read_local_file is set to ask.',
    options: ['allow_once', 'allow_for_conversation', 'always_allow', 'deny_once'],
    expiresInMs: 120_000,
    readOnly: true,
    ...over,
  };
}

function pending(r: ConsentRequest, receivedAt = T0): PendingConsent {
  return { request: r, receivedAt, deadline: receivedAt + r.expiresInMs };
}

function setup(queue: PendingConsent[], now = T0) {
  const onAnswer = vi.fn();
  const utils = render(ConsentDialog, { queue, now, onAnswer });
  return { onAnswer, ...utils };
}

const buttonNames = () => screen.getAllByRole('button').map((b) => b.textContent?.trim());

describe('ConsentDialog', () => {
  it('an MCP tool: names the server, its description and its claims as claims only', () => {
    setup([
      pending(
        request({
          tool: 'mcp__everything__echo',
          serverName: 'everything',
          description: 'Echoes back the input',
          claims: { readOnly: true, destructive: false, idempotent: true },
          paths: [],
          folder: undefined,
          readOnly: undefined,
          parameters: { message: 'hi' },
        }),
      ),
    ]);
    const dialog = screen.getByRole('alertdialog');
    expect(within(dialog).getByText('MCP · everything')).toBeInTheDocument();
    expect(within(dialog).getByTestId('tool-description')).toHaveTextContent('everything describes it: Echoes back the input');
    const claims = within(dialog).getByTestId('server-claims');
    expect(claims).toHaveTextContent('everything claims:');
    expect(claims).toHaveTextContent('read-only');
    expect(claims).toHaveTextContent('idempotent');
    expect(claims).toHaveTextContent('grants nothing');
    // The claim of being read-only does not make the dialog call it low risk.
    expect(within(dialog).getByTestId('danger')).not.toHaveTextContent('Low risk');
    expect(within(dialog).getByRole('region', { name: 'Full arguments of mcp__everything__echo' }).textContent).toContain('"hi"');
  });

  it('a built-in tool shows no server claims', () => {
    setup([pending(request())]);
    expect(screen.queryByTestId('server-claims')).toBeNull();
  });

  it('shows the tool, the summary, danger and read/write, and the full arguments untruncated', () => {
    const long = 'x'.repeat(5000) + 'END';
    setup([pending(request({ parameters: { path: '~/Documents/notes.txt', note: long, nested: { deep: [1, { to: '/etc/hosts' }] } } }))]);
    const dialog = screen.getByRole('alertdialog');
    expect(dialog).toHaveAccessibleName('Allow read_local_file to run?');
    expect(dialog).toHaveAccessibleDescription('Read /home/alice/Documents/notes.txt');
    expect(within(dialog).getByTestId('danger')).toHaveTextContent('Low risk');
    expect(within(dialog).getByTestId('access')).toHaveTextContent('Reads only');
    const args = within(dialog).getByRole('region', { name: 'Full arguments of read_local_file' });
    // Every character of the long value is there; the block scrolls instead of cutting.
    expect(args.textContent).toContain(long);
    expect(args.textContent).toContain('"deep"');
    expect(args).toHaveAttribute('tabindex', '0');
    expect(args.style.maxHeight).toBe('14rem');
    // Paths are highlighted, in the arguments and in the resolved list.
    expect(within(args).getByText('"~/Documents/notes.txt"')).toHaveClass('path');
    expect(within(args).getByText('"/etc/hosts"')).toHaveClass('path');
    expect(within(dialog).getByText('/home/alice/Documents/notes.txt', { selector: 'li .path' })).toBeInTheDocument();
  });

  it('offers all four answers for a read-only tool', () => {
    setup([pending(request())]);
    expect(buttonNames()).toEqual(['Allow once', 'Allow for this conversation', 'Always allow', 'Deny']);
  });

  it('never offers "Always allow" for a destructive tool, even if the backend lists it', () => {
    setup([pending(request({ tool: 'write_file', destructive: true, readOnly: false, parameters: { path: '~/a.txt', content: 'hi' } }))]);
    expect(buttonNames()).toEqual(['Allow once', 'Allow for this conversation', 'Deny']);
    expect(screen.getByTestId('danger')).toHaveTextContent('High risk');
    expect(screen.getByTestId('access')).toHaveTextContent('Writes — can change or delete data');
    expect(screen.getByText(/“Always allow” is not offered/)).toBeInTheDocument();
  });

  it('offers only what the backend allows (plus Deny)', () => {
    setup([pending(request({ options: ['allow_once'] }))]);
    expect(buttonNames()).toEqual(['Allow once', 'Deny']);
  });

  it('focuses Deny first and keeps Tab inside the dialog in order', async () => {
    setup([pending(request())]);
    const user = userEvent.setup();
    const deny = screen.getByRole('button', { name: 'Deny' });
    await vi.waitFor(() => expect(deny).toHaveFocus());
    await user.tab();
    expect(screen.getByRole('region', { name: /Full arguments/ })).toHaveFocus();
    await user.tab();
    expect(screen.getByRole('button', { name: 'Allow once' })).toHaveFocus();
    await user.tab();
    expect(screen.getByRole('button', { name: 'Allow for this conversation' })).toHaveFocus();
    await user.tab();
    expect(screen.getByRole('button', { name: 'Always allow' })).toHaveFocus();
    await user.tab();
    expect(deny).toHaveFocus();
    await user.tab({ shift: true });
    expect(screen.getByRole('button', { name: 'Always allow' })).toHaveFocus();
  });

  it('Esc denies', async () => {
    const { onAnswer } = setup([pending(request())]);
    const user = userEvent.setup();
    await vi.waitFor(() => expect(screen.getByRole('button', { name: 'Deny' })).toHaveFocus());
    await user.keyboard('{Escape}');
    expect(onAnswer).toHaveBeenCalledExactlyOnceWith('c1', 'deny_once');
  });

  it('Enter on a focused button answers with that button', async () => {
    const { onAnswer } = setup([pending(request())]);
    const user = userEvent.setup();
    await vi.waitFor(() => expect(screen.getByRole('button', { name: 'Deny' })).toHaveFocus());
    screen.getByRole('button', { name: 'Allow for this conversation' }).focus();
    await user.keyboard('{Enter}');
    expect(onAnswer).toHaveBeenCalledExactlyOnceWith('c1', 'allow_for_conversation');
  });

  it('each button sends its decision', async () => {
    const user = userEvent.setup();
    for (const [name, decision] of [
      ['Allow once', 'allow_once'],
      ['Always allow', 'always_allow'],
      ['Deny', 'deny_once'],
    ] as const) {
      const { onAnswer, unmount } = setup([pending(request())]);
      await user.click(screen.getByRole('button', { name }));
      expect(onAnswer).toHaveBeenCalledExactlyOnceWith('c1', decision);
      unmount();
    }
  });

  it('shows a countdown that moves, and denies when it reaches zero', async () => {
    const p = pending(request({ expiresInMs: 90_000 }));
    const { onAnswer, rerender } = setup([p], T0);
    expect(screen.getByTestId('countdown')).toHaveTextContent('Denied automatically in 1:30');
    await rerender({ queue: [p], now: T0 + 61_000 });
    expect(screen.getByTestId('countdown')).toHaveTextContent('0:29');
    expect(onAnswer).not.toHaveBeenCalled();
    await rerender({ queue: [p], now: T0 + 90_000 });
    expect(onAnswer).toHaveBeenCalledExactlyOnceWith('c1', 'deny_once');
    await rerender({ queue: [p], now: T0 + 91_000 });
    expect(onAnswer).toHaveBeenCalledTimes(1);
  });

  it('never shows more time than granted when its clock lags the question', () => {
    // The tick that drives the countdown came 800 ms before the question arrived.
    const p = pending(request({ expiresInMs: 300_000 }));
    setup([p], T0 - 800);
    expect(screen.getByTestId('countdown')).toHaveTextContent('Denied automatically in 5:00');
  });

  it('queues several requests visibly and shows the next one after an answer', async () => {
    const a = pending(request());
    const b = pending(request({ consentId: 'c2', tool: 'list_directory', summary: 'List /home/alice', parameters: { path: '~' } }));
    const c = pending(request({ consentId: 'c3', tool: 'write_file', destructive: true, summary: 'Write /tmp/x' }));
    const { onAnswer, rerender } = setup([a, b, c]);
    expect(screen.getByText('1 of 3')).toBeInTheDocument();
    expect(screen.getByRole('alertdialog')).toHaveAccessibleName('Allow read_local_file to run?');
    const user = userEvent.setup();
    await user.click(screen.getByRole('button', { name: 'Allow once' }));
    expect(onAnswer).toHaveBeenLastCalledWith('c1', 'allow_once');
    // The store removes the answered one; the dialog follows the queue.
    await rerender({ queue: [b, c], now: T0 });
    expect(screen.getByText('1 of 2')).toBeInTheDocument();
    expect(screen.getByRole('alertdialog')).toHaveAccessibleName('Allow list_directory to run?');
    await vi.waitFor(() => expect(screen.getByRole('button', { name: 'Deny' })).toHaveFocus());
    await user.keyboard('{Escape}');
    expect(onAnswer).toHaveBeenLastCalledWith('c2', 'deny_once');
    await rerender({ queue: [c], now: T0 });
    expect(screen.queryByText(/of \d/)).toBeNull();
    expect(buttonNames()).not.toContain('Always allow');
  });

  it('renders nothing with an empty queue', () => {
    setup([]);
    expect(screen.queryByRole('alertdialog')).toBeNull();
  });

  it('shows hostile parameter text as text', () => {
    setup([pending(request({ parameters: { path: '<script>alert(1)</script>' }, summary: '<b>x</b>' }))]);
    const dialog = screen.getByRole('alertdialog');
    expect(dialog.querySelector('script, b')).toBeNull();
    expect(dialog).toHaveTextContent('<script>alert(1)</script>');
  });
});
