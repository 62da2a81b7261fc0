/**
 * Demo mode for a plain browser (`npm run dev`, screenshots): the mock backend, optionally
 * preloaded with a scenario chosen by URL parameters:
 *   ?scenario=firstrun | chat | showcase | failures | reconnecting
 *   &screen=chat | history | settings   &section=<settings section>
 */
import { MockBackend, failureShowcaseEvents, showcaseEvents } from './mock-backend';
import type { AppState, Screen, SettingsSection } from './stores/app.svelte';

export function createDemo(params: URLSearchParams): { backend: MockBackend; after: (app: AppState) => void } {
  const scenario = params.get('scenario') ?? 'firstrun';
  const backend = new MockBackend({ configured: scenario !== 'firstrun', delayScale: 1 });
  const after = (app: AppState) => {
    const now = Date.now();
    if (scenario === 'chat') void backend.call('session_start_demo', {});
    if (scenario === 'showcase') {
      // The demo's own events stand in for a live session; tools keep running forever.
      for (const e of showcaseEvents(now)) backend.emit(e);
    }
    if (scenario === 'reconnecting') {
      for (const e of showcaseEvents(now).filter((e) => !e.type.startsWith('consent'))) backend.emit(e);
    }
    if (scenario === 'failures') {
      for (const e of showcaseEvents(now).filter((e) => !e.type.startsWith('consent'))) backend.emit(e);
      backend.emit({ type: 'tool_progress', data: { id: 't3', state: 'running', status: 'running', at: now - 1000 } });
      backend.emit({ type: 'tool_result', data: { id: 't3', success: false, status: 'denied', errorCode: 'permission_denied', errorMessage: 'Permission denied by the user: denied in the consent dialog', executedBy: 'client', at: now } });
      backend.emit({ type: 'assistant_message', data: { id: 'a2', text: 'Some tools did not run. Here is what happened:', at: now } });
      for (const e of failureShowcaseEvents(now)) backend.emit(e);
      backend.emit({ type: 'status', data: { state: 'idle' } });
    }
    if (scenario === 'reconnecting') {
      backend.emit({ type: 'connection', data: { state: 'reconnecting', attempt: 2, detail: 'The network link dropped.' } });
    }
    const screen = params.get('screen') as Screen | null;
    if (screen) app.screen = screen;
    const section = params.get('section') as SettingsSection | null;
    if (section) app.settingsSection = section;
  };
  return { backend, after };
}
