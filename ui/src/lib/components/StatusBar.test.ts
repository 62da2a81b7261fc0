// The status bar shows the network path of a connected link (direct or relayed), and
// nothing about a path while the link is not up.
import { render, screen } from '@testing-library/svelte';
import { describe, expect, it } from 'vitest';
import StatusBar from './StatusBar.svelte';

describe('status bar', () => {
  it('shows the connected path, marked when relayed', () => {
    render(StatusBar, { assistant: 'idle', connection: 'connected', path: 'relayed (TURN/TLS)', relayed: true });
    const path = screen.getByTestId('connection-path');
    expect(path).toHaveTextContent('relayed (TURN/TLS)');
    expect(path).toHaveClass('relayed');
    expect(path.getAttribute('title')).toContain('TURN server relays');
  });

  it('says direct for a direct path and nothing while reconnecting', () => {
    const { unmount } = render(StatusBar, { assistant: 'idle', connection: 'connected', path: 'direct (UDP)', relayed: false });
    expect(screen.getByTestId('connection-path')).toHaveTextContent('direct (UDP)');
    expect(screen.getByTestId('connection-path')).not.toHaveClass('relayed');
    unmount();
    render(StatusBar, { assistant: 'idle', connection: 'reconnecting', path: 'direct (UDP)' });
    expect(screen.queryByTestId('connection-path')).toBeNull();
  });
});
