// Runs one browser flow for the e2e tests (test/support/browser.h): Debian's Chromium,
// headless, through playwright-core (never a downloaded browser).
//
//   node run_flow.mjs FLOW.json
//
// FLOW.json: {
//   "executablePath": "/usr/bin/chromium", "ignoreHttpsErrors": true,
//   "args": ["--ignore-certificate-errors-spki-list=..."],  // extra Chromium flags
//   "timeoutMs": 60000,          // the whole flow
//   "stepTimeoutMs": 15000,      // each step
//   "viewport": {"width": 1280, "height": 900},
//   "intercept": ["http://127.0.0.1/callback"],  // URL prefixes answered here with a small
//                                                // page (and recorded), never sent
//   "storageState": "cookies.json",  // loaded when the file exists, saved at the end
//   "failureScreenshot": "failure.png",
//   "steps": [{"action": "goto", "url": "..."}, ...]
// }
// Actions: goto {url}, fill {selector, value}, click {selector}, waitForUrl {prefix | regex},
// waitForSelector {selector}, screenshot {path} (full page), text {name, selector},
// html {name}, url {name}, glewlwydLogin {user, password}.
//
// Prints one JSON object on stdout: {"ok", "url", "values", "intercepted", "visited",
// "console", and on failure "error", "step", "failureScreenshot", "pageText"}; exits 0 when
// every step succeeded, 1 when one failed, 2 when the flow could not be read. On stderr: the
// launch time, each step's time, each main-frame navigation, glewlwydLogin's screens.
import { readFileSync, existsSync } from 'node:fs';
import { chromium } from 'playwright-core';

const flowPath = process.argv[2];
let flow;
try {
  flow = JSON.parse(readFileSync(flowPath, 'utf8'));
} catch (e) {
  process.stdout.write(JSON.stringify({ ok: false, error: `cannot read flow ${flowPath}: ${e}` }));
  process.exit(2);
}

const started = Date.now();
const flowTimeout = flow.timeoutMs ?? 60000;
const stepTimeout = flow.stepTimeoutMs ?? 15000;
const result = { ok: false, url: '', values: {}, intercepted: [], visited: [], console: [] };

function describe(step) {
  const { action, ...args } = step;
  if (args.password !== undefined) args.password = '***';
  if (args.value !== undefined && /password/i.test(args.selector ?? '')) args.value = '***';
  return `${action} ${JSON.stringify(args)}`;
}

function urlMatcher(step) {
  if (step.prefix !== undefined) return (u) => u.toString().startsWith(step.prefix);
  if (step.regex !== undefined) {
    const re = new RegExp(step.regex);
    return (u) => re.test(u.toString());
  }
  throw new Error('waitForUrl needs "prefix" or "regex"');
}

// glewlwyd's login web app (a React page): wait for it, enter the password form, grant the
// client's scopes when it asks, press Continue; done once the browser has left the login page.
// Each screen is recognised by what it shows, so the order glewlwyd picks does not matter. A
// session glewlwyd already has (its cookie) skips the password form.
async function glewlwydLogin(page, step, deadline) {
  const isLogin = (u) => /\/login\.html(\?|#|$)/.test(u.toString());
  const onLogin = () => isLogin(page.url());
  if (!onLogin()) {
    await page
      .waitForURL(isLogin, { timeout: Math.max(1, deadline - Date.now()) })
      .catch(() => {
        throw new Error(`the browser never reached glewlwyd's login page (at ${page.url()})`);
      });
  }
  const loginPage = page.url();
  let submitted = false;
  let granted = false;
  while (Date.now() < deadline) {
    if (!onLogin()) return;
    const password = page.locator('input#password').first();
    const grant = page.getByRole('button', { name: /grant access/i }).first();
    // Names hold the icon font's glyph before the word: match the word only.
    const cont = page.getByRole('button', { name: /\bcontinue$/i }).first();
    if (!submitted && (await password.isVisible())) {
      const username = page.locator('input#username').first();
      if ((await username.isVisible()) && (await username.isEditable())) {
        await username.fill(step.user);
      }
      await password.fill(step.password);
      await page.getByRole('button', { name: /\b(login|ok)$/i }).first().click();
      submitted = true;
      process.stderr.write('glewlwydLogin: password form sent\n');
    } else if (!granted && (await grant.isVisible())) {
      // Every scope box the client asks for, then the grant button.
      for (const box of await page.locator('input[type=checkbox]:visible').all()) {
        if (!(await box.isChecked())) await box.check();
      }
      // The React page may swap the grant screen for another (a session that has granted
      // already) between the check and the click: a click that finds no button looks again.
      if (await grant.click({ timeout: 2000 }).then(() => true, () => false)) {
        granted = true;
        process.stderr.write('glewlwydLogin: scopes granted\n');
      }
    } else if (await cont.isVisible()) {
      // Continue goes to glewlwyd's authorization endpoint, which redirects to the client or
      // back here (e.g. to grant): wait for the next page, then look again.
      const navigated = page.waitForEvent('framenavigated', {
        predicate: (frame) => frame === page.mainFrame(),
        timeout: Math.max(1, deadline - Date.now()),
      });
      if (!(await cont.click({ timeout: 2000 }).then(() => true, () => false))) {
        navigated.catch(() => {});
        continue;
      }
      await navigated;
      process.stderr.write(`glewlwydLogin: continued to ${page.url()}\n`);
      await page.waitForLoadState('domcontentloaded');
      continue;
    } else if (submitted && (await page.getByText(/authentication error/i).first().isVisible())) {
      throw new Error(`glewlwyd refused the login of ${step.user} (Authentication error)`);
    }
    await page.waitForTimeout(100);
  }
  throw new Error(`still on glewlwyd's login page after the step timeout (${loginPage})`);
}

async function runStep(page, context, step) {
  const deadline = Math.min(Date.now() + (step.timeoutMs ?? stepTimeout), started + flowTimeout);
  const timeout = Math.max(1, deadline - Date.now());
  switch (step.action) {
    case 'goto':
      await page.goto(step.url, { timeout, waitUntil: 'load' });
      return;
    case 'fill':
      await page.locator(step.selector).fill(step.value, { timeout });
      return;
    case 'click':
      await page.locator(step.selector).click({ timeout });
      return;
    case 'waitForUrl':
      await page.waitForURL(urlMatcher(step), { timeout, waitUntil: 'load' });
      return;
    case 'waitForSelector':
      await page.locator(step.selector).first().waitFor({ state: 'visible', timeout });
      return;
    case 'screenshot':
      await page.screenshot({ path: step.path, fullPage: true, timeout });
      return;
    case 'text':
      result.values[step.name] = await page.locator(step.selector ?? 'body').first().innerText({
        timeout,
      });
      return;
    case 'html':
      result.values[step.name] = await page.content();
      return;
    case 'url':
      result.values[step.name] = page.url();
      return;
    case 'glewlwydLogin':
      await glewlwydLogin(page, step, deadline);
      return;
    default:
      throw new Error(`unknown action "${step.action}"`);
  }
}

let browser;
let exitCode = 1;
try {
  browser = await chromium.launch({
    executablePath: flow.executablePath ?? '/usr/bin/chromium',
    headless: true,
    args: flow.args ?? [],
    timeout: stepTimeout,
  });
  const contextOptions = {
    ignoreHTTPSErrors: flow.ignoreHttpsErrors ?? true,
    viewport: flow.viewport ?? { width: 1280, height: 900 },
    // glewlwyd's web app has translations for 'en', not 'en-US'.
    locale: 'en',
  };
  if (flow.storageState && existsSync(flow.storageState)) {
    contextOptions.storageState = flow.storageState;
  }
  process.stderr.write(`launch: ${Date.now() - started} ms\n`);
  const context = await browser.newContext(contextOptions);
  for (const prefix of flow.intercept ?? []) {
    await context.route(
      (u) => u.toString().startsWith(prefix),
      async (route) => {
        result.intercepted.push(route.request().url());
        await route.fulfill({
          status: 200,
          contentType: 'text/html; charset=utf-8',
          body: '<!doctype html><title>intercepted</title><p>Intercepted by the test.</p>',
        });
      },
    );
  }
  const page = await context.newPage();
  page.on('framenavigated', (frame) => {
    if (frame === page.mainFrame()) {
      result.visited.push(frame.url());
      process.stderr.write(`navigated: ${frame.url()}\n`);
    }
  });
  page.on('console', (m) => result.console.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => result.console.push(`pageerror: ${e.message}`));
  page.on('response', (r) => {
    if (r.status() >= 400) result.console.push(`http ${r.status()}: ${r.request().method()} ${r.url()}`);
  });

  const steps = flow.steps ?? [];
  let i = 0;
  try {
    for (; i < steps.length; ++i) {
      if (Date.now() >= started + flowTimeout) {
        throw new Error(`the flow's timeout (${flowTimeout} ms) passed`);
      }
      const stepStarted = Date.now();
      await runStep(page, context, steps[i]);
      // The timings land in the flow's log (browser-flow-N.log beside its JSON).
      process.stderr.write(`step ${i + 1} ${describe(steps[i])}: ${Date.now() - stepStarted} ms\n`);
    }
    result.ok = true;
    exitCode = 0;
  } catch (e) {
    result.step = i;
    result.error = `step ${i + 1} of ${steps.length} (${describe(steps[i])}) failed at ${page.url()}: ${
      e.message ?? e
    }`;
    if (flow.failureScreenshot) {
      try {
        await page.screenshot({ path: flow.failureScreenshot, fullPage: true, timeout: 5000 });
        result.failureScreenshot = flow.failureScreenshot;
      } catch (shotError) {
        result.console.push(`failure screenshot: ${shotError.message}`);
      }
    }
    try {
      result.pageText = (await page.locator('body').innerText({ timeout: 2000 })).slice(0, 4000);
    } catch {
      // A page without a body (or a crashed one) has no text to show.
    }
  }
  result.url = page.url();
  if (flow.storageState) await context.storageState({ path: flow.storageState });
} catch (e) {
  result.error = `browser: ${e.message ?? e}`;
} finally {
  if (browser) await browser.close().catch(() => {});
}
process.stdout.write(JSON.stringify(result));
process.exit(exitCode);
