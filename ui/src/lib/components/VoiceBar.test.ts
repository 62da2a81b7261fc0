// The voice controls over the mock backend: voice on, push-to-talk by the button and by
// the Space key, mute always visible and winning over the talk key, open mic with its
// echo cancellation setting (headphones hint only with it off), the no-microphone state (text chat still works), the live transcript
// of the user's speech (interim → final), and the device choice in Settings → Voice.
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

async function open(opts: { noMicrophone?: boolean } = {}) {
  backend = new MockBackend({ configured: true, delayScale: 0 });
  backend.noMicrophone = opts.noMicrophone ?? false;
  app = new AppState(backend);
  render(App, { app });
  await app.start();
  await app.connect();
  await vi.waitFor(() => expect(app!.session.isConnected).toBe(true));
  return { backend, user: userEvent.setup() };
}

const micState = () => screen.getByTestId('mic-state');

describe('voice', () => {
  it('push-to-talk sends only while held, by button or Space; mute wins and stays visible', async () => {
    const { backend, user } = await open();
    expect(micState()).toHaveTextContent('Voice off');
    await user.click(screen.getByTestId('voice-toggle'));
    await vi.waitFor(() => expect(micState()).toHaveTextContent('Hold to talk'));
    expect(screen.getByTestId('input-level')).toBeInTheDocument();

    const talk = screen.getByTestId('talk-button');
    await user.pointer({ keys: '[MouseLeft>]', target: talk });
    await vi.waitFor(() => expect(micState()).toHaveTextContent('Mic live'));
    expect(backend.voice.transmitting).toBe(true);
    await user.pointer({ keys: '[/MouseLeft]', target: talk });
    await vi.waitFor(() => expect(micState()).toHaveTextContent('Hold to talk'));
    expect(backend.voice.transmitting).toBe(false);

    // Space, held outside a text field.
    (document.activeElement as HTMLElement | null)?.blur();
    await user.keyboard('[Space>]');
    await vi.waitFor(() => expect(backend.voice.transmitting).toBe(true));
    await user.keyboard('[/Space]');
    await vi.waitFor(() => expect(backend.voice.transmitting).toBe(false));

    await user.click(screen.getByTestId('mute'));
    await vi.waitFor(() => expect(micState()).toHaveTextContent('Muted'));
    await user.pointer({ keys: '[MouseLeft>]', target: screen.getByTestId('talk-button') });
    await vi.waitFor(() => expect(backend.voice.talking).toBe(true));
    expect(backend.voice.transmitting).toBe(false);
    expect(micState()).toHaveTextContent('Muted');
  });

  it('open mic sends without holding; it needs headphones only with echo cancellation off', async () => {
    const { backend, user } = await open();
    await user.click(screen.getByTestId('voice-toggle'));
    await user.click(await screen.findByTestId('open-mic'));
    await vi.waitFor(() => expect(micState()).toHaveTextContent('Mic live'));
    expect(backend.voice.mode).toBe('open_mic');
    expect(backend.voice.echoCancelling).toBe(true);
    expect(screen.queryByTestId('headphones-hint')).toBeNull();
    expect(screen.queryByTestId('talk-button')).toBeNull();

    app!.openSettings('voice');
    const echo = await screen.findByTestId('echo-cancellation');
    expect(echo).toBeChecked();
    expect(screen.queryByTestId('headphones-note')).toBeNull();
    await user.click(echo);
    await vi.waitFor(() => expect(backend.voice.echoCancellation).toBe(false));
    expect(backend.calls.at(-1)).toEqual({ cmd: 'voice_control', args: { control: { echoCancellation: false } } });
    await vi.waitFor(() => expect(screen.getByTestId('headphones-note')).toHaveTextContent('Open mic needs headphones'));
    app!.screen = 'chat';
    await vi.waitFor(() => expect(screen.getByTestId('headphones-hint')).toHaveTextContent('needs headphones'));
  });

  it('no microphone is a clear state and the text chat keeps working', async () => {
    const { user } = await open({ noMicrophone: true });
    await user.click(screen.getByTestId('voice-toggle'));
    expect(await screen.findByTestId('input-error')).toHaveTextContent('No microphone was found.');
    expect(micState()).toHaveTextContent('Microphone unavailable');
    await user.type(screen.getByLabelText('Message'), 'still typing{Enter}');
    await vi.waitFor(() =>
      expect(screen.getAllByTestId('user-message').some((m) => m.textContent?.includes('still typing'))).toBe(true),
    );
  });

  it("the user's speech shows as interim, then final, in one bubble", async () => {
    const { backend } = await open();
    backend.emit({ type: 'user_transcript', data: { id: 'SG_1', text: 'what is', speech: 'interim', at: Date.now() } });
    const bubble = await screen.findByText('what is');
    const item = bubble.closest('li')!;
    expect(item).toHaveAttribute('data-speech', 'interim');
    backend.emit({ type: 'user_transcript', data: { id: 'SG_1', text: 'What is the time?', speech: 'final', at: Date.now() } });
    await vi.waitFor(() => expect(within(item).getByText('What is the time?')).toBeInTheDocument());
    expect(item).toHaveAttribute('data-speech', 'final');
    expect(screen.getAllByTestId('user-message').filter((m) => m.dataset.speech)).toHaveLength(1);
  });

  it('Settings → Voice chooses the devices', async () => {
    const { backend, user } = await open();
    app!.openSettings('voice');
    const input = await screen.findByTestId('voice-input');
    await vi.waitFor(() => expect(within(input).getAllByRole('option')).toHaveLength(3));
    expect(screen.getByTestId('echo-cancellation')).toBeChecked();
    await user.selectOptions(input, 'alsa:usb-headset');
    await vi.waitFor(() => expect(backend.audioChoice.input).toBe('alsa:usb-headset'));
    expect(backend.calls.at(-1)).toEqual({ cmd: 'voice_set_devices', args: { input: 'alsa:usb-headset', output: null } });
  });
});
