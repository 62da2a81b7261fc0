import { mount } from 'svelte';
import './app.css';
import App from './App.svelte';
import { TauriBackend, inApp } from './lib/backend';
import { AppState } from './lib/stores/app.svelte';

async function boot(): Promise<void> {
  const target = document.getElementById('app');
  if (!target) return;
  if (inApp()) {
    const app = new AppState(new TauriBackend());
    mount(App, { target, props: { app } });
    await app.start();
    return;
  }
  // Plain browser: demo mode over the in-memory backend (loaded only here).
  const { createDemo } = await import('./lib/demo');
  const { backend, after } = createDemo(new URLSearchParams(location.search));
  const app = new AppState(backend);
  mount(App, { target, props: { app } });
  await app.start();
  after(app);
}

void boot();
