// Screenshots of each main screen in demo mode (mock backend), in Debian's Chromium.
// Usage: npm run screenshots   (builds, serves dist/ on 127.0.0.1, writes ../docs/screenshots/ui-*.png)
// Needs /usr/bin/chromium (apt-get install -y chromium) or CHROMIUM=/path/to/chrome.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const uiDir = resolve(here, '..');
const outDir = resolve(uiDir, '..', 'docs', 'screenshots');
const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';
if (!existsSync(executablePath)) {
  console.error(`Chromium not found at ${executablePath}: run "apt-get install -y chromium" or set CHROMIUM.`);
  process.exit(1);
}
mkdirSync(outDir, { recursive: true });

const port = 4173 + Math.floor(Math.random() * 500);
const server = spawn(join(uiDir, 'node_modules', '.bin', 'vite'), ['preview', '--host', '127.0.0.1', '--port', String(port), '--strictPort'], {
  cwd: uiDir,
  stdio: ['ignore', 'pipe', 'inherit'],
});
const base = `http://127.0.0.1:${port}/`;

async function waitForServer() {
  for (let i = 0; i < 100; i++) {
    try {
      const r = await fetch(base);
      if (r.ok) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('vite preview did not start');
}

const browser = await (async () => {
  await waitForServer();
  return chromium.launch({
    executablePath,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
})();

async function shot(name, query, { dark = false, zoom = 1, act } = {}) {
  const context = await browser.newContext({
    viewport: { width: Math.round(1280 / zoom), height: Math.round(800 / zoom) },
    deviceScaleFactor: zoom,
    colorScheme: dark ? 'dark' : 'light',
    reducedMotion: 'reduce',
  });
  const page = await context.newPage();
  // Nothing may leave the machine: refuse every request that is not the preview server.
  await page.route('**/*', (route) => (route.request().url().startsWith(base) ? route.continue() : route.abort()));
  await page.goto(`${base}?${query}`);
  await page.waitForSelector('#app > *');
  await page.waitForTimeout(700);
  if (act) await act(page);
  const file = join(outDir, `ui-${name}.png`);
  await page.screenshot({ path: file });
  console.log(`wrote ${file}`);
  await context.close();
}

try {
  await shot('first-run', 'scenario=firstrun');
  await shot('chat', 'scenario=failures', {
    act: async (p) => p.evaluate(() => document.querySelector('.scroll')?.scrollTo({ top: 0 })),
  });
  await shot('chat-tools', 'scenario=failures');
  await shot('chat-dark', 'scenario=failures', { dark: true, act: async (p) => p.evaluate(() => document.querySelector('.scroll')?.scrollTo({ top: 0 })) });
  await shot('consent', 'scenario=showcase');
  await shot('consent-dark', 'scenario=showcase', { dark: true });
  await shot('reconnecting', 'scenario=reconnecting');
  await shot('history', 'scenario=chat&screen=history', {
    act: async (p) => {
      await p.fill('#history-search', 'lisbon trip');
      await p.waitForTimeout(600);
      await p.click('ul[aria-label="Search results"] button');
      await p.waitForTimeout(300);
    },
  });
  await shot('settings-connection', 'scenario=chat&screen=settings&section=connection');
  await shot('settings-tools', 'scenario=chat&screen=settings&section=tools');
  await shot('settings-folders', 'scenario=chat&screen=settings&section=folders', { dark: true });
  await shot('settings-data', 'scenario=chat&screen=settings&section=data');
  await shot('chat-zoom-200', 'scenario=failures', { zoom: 2 });
  await shot('consent-zoom-200', 'scenario=showcase', { zoom: 2 });
} finally {
  await browser.close();
  server.kill('SIGTERM');
}
