// A user's browser for the sign-in tests: Debian's Chromium (headless, through
// playwright-core) opens the authorization URL, logs in on oidc-provider's login page,
// agrees on its consent page and follows the redirect back to Outpost's loopback
// listener. Usage: node browser.mjs URL (the program Outpost opens URLs with).
import { chromium } from 'playwright-core';

const url = process.argv[2];
const redirect = new URL(url).searchParams.get('redirect_uri');
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-quic'],
});
try {
  const page = await browser.newPage();
  await page.goto(url);
  await page.fill('input[name=login]', 'alice');
  await page.fill('input[name=password]', 'any');
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  const back = page.waitForURL((u) => u.href.startsWith(redirect), { timeout: 20000 });
  // The consent page (a first sign-in of this client).
  if (await page.locator('button[type=submit]').count()) await page.click('button[type=submit]');
  await back;
  console.log(`redirected: ${(await page.content()).includes('Outpost has your sign-in')}`);
} finally {
  await browser.close();
}
