// A real browser for e2e tests: Debian's Chromium (/usr/bin/chromium), headless, driven by
// playwright-core through test/browser/run_flow.mjs, for the pages people use (glewlwyd's web
// login, the bind backend's catalog and consumer pages).
//
// A BrowserFlow is a list of steps run in order in one browser launch and one browser context,
// so cookies carry from step to step: open a URL, fill a field, click, wait for a URL, log in
// at a glewlwyd login page, save a full-page screenshot, read the page's text or HTML.
// RunBrowserFlow() writes the flow as JSON, runs one `node` process on it and reads its JSON
// answer. When a step fails, the error names the step and the URL, and a screenshot of the page
// at that moment is saved.
//
// Needs node, /usr/bin/chromium and test/browser/node_modules/playwright-core, all installed
// by scripts/install-deps.sh. Screenshots and other artifacts go to TestArtifactsDir().
// BrowserFlow is a value; RunBrowserFlow() may run from several threads at once (each call is
// its own process and directory).
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace klutch::testing {

// How the browser runs.
struct BrowserOptions {
  // Where the flow's JSON, node's log and the failure screenshot are written (created);
  // TestArtifactsDir() when empty.
  std::filesystem::path artifacts_dir;
  // The whole flow (launch included); node is killed a few seconds after it.
  std::chrono::seconds timeout{60};
  // Each step's default timeout.
  std::chrono::milliseconds step_timeout{15000};
  // Accept any certificate: the tests' servers use private CAs the browser does not know.
  // Chromium then aborts each TLS handshake, asks, and connects again: the server sees failed
  // handshakes. chromium_args with --ignore-certificate-errors-spki-list avoids that.
  bool ignore_https_errors = true;
  // Extra Chromium flags, e.g. --ignore-certificate-errors-spki-list=<base64 SHA-256 of the
  // servers' certificates' public keys>: those certificates pass during the handshake.
  std::vector<std::string> chromium_args;
  int width = 1280;
  int height = 900;
  // Requests whose URL starts with one of these never leave the browser: they are answered
  // with a small HTML page and recorded in BrowserResult::intercepted. For redirect URIs no
  // server listens on (e.g. OidcProvider::redirect_uri()).
  std::vector<std::string> intercept_prefixes;
  // Cookies and local storage (Playwright's storage state): loaded when the file exists,
  // saved when the flow ends. Carries a login from one flow to the next. Empty: none.
  std::filesystem::path storage_state;
  // The browser: $KLUTCH_CHROMIUM when set, /usr/bin/chromium otherwise.
  std::string executable;
};

// The steps of one browser session, run in order. Selectors are Playwright selectors (CSS,
// or e.g. "text=Bind"). Each builder returns *this.
class BrowserFlow {
 public:
  // Opens `url` and waits for its load event.
  BrowserFlow& Goto(const std::string& url);
  // Types `value` into the (single) element `selector` matches, replacing its content.
  BrowserFlow& Fill(const std::string& selector, const std::string& value);
  // Clicks the element `selector` matches once it is visible and enabled (a navigation it
  // starts is awaited by a following WaitForUrl*).
  BrowserFlow& Click(const std::string& selector);
  // Waits until the page's URL starts with `prefix` and that page has loaded.
  BrowserFlow& WaitForUrlPrefix(const std::string& prefix);
  // Waits until the page's URL matches `regex` (JavaScript RegExp syntax, unanchored).
  BrowserFlow& WaitForUrlMatching(const std::string& regex);
  // Waits until an element `selector` matches is visible.
  BrowserFlow& WaitForSelector(const std::string& selector);
  // Logs in at glewlwyd's login page (OidcProvider with Options::serve_webapp) the browser
  // is on or being sent to (waits for it; never reaching it fails the step): enters `user`
  // and `password` in the form, grants the client's scopes when glewlwyd asks, presses
  // Continue; done once the browser has left the login page (the next page may still be
  // loading: follow with WaitForUrl*). A session glewlwyd already has for this browser skips
  // the form (and continues as that session's user). A rejected password fails the step
  // ("Authentication error").
  BrowserFlow& GlewlwydLogin(const std::string& user, const std::string& password);
  // Saves a full-page PNG of the current page to `path` (parent directories must exist).
  BrowserFlow& Screenshot(const std::filesystem::path& path);
  // Stores the rendered text (innerText) of the first element `selector` matches as
  // BrowserResult::values[name].
  BrowserFlow& Text(const std::string& name, const std::string& selector = "body");
  // Stores the page's HTML (the live DOM, serialised) as BrowserResult::values[name].
  BrowserFlow& Html(const std::string& name);
  // Stores the current URL as BrowserResult::values[name].
  BrowserFlow& Url(const std::string& name);

  // Every step, as run_flow.mjs reads them (a JSON array, text).
  const std::vector<std::string>& steps() const { return steps_; }

 private:
  std::vector<std::string> steps_;
};

// What a flow that ran to its end saw.
struct BrowserResult {
  std::string final_url;
  // From Text, Html and Url steps, by name.
  std::map<std::string, std::string> values;
  // Full URLs of requests answered through BrowserOptions::intercept_prefixes, in order.
  std::vector<std::string> intercepted;
  // Every URL the main frame navigated to, in order.
  std::vector<std::string> visited;
  // The pages' console messages and uncaught errors ("error: ...", "pageerror: ...").
  std::vector<std::string> console;
};

// Runs `flow` in a fresh headless Chromium. A failed step -> kInternalError whose message
// names the step (number, action, arguments; passwords masked), the URL, the error, the path
// of the screenshot of the page at failure and the start of the page's text; the whole flow
// over BrowserOptions::timeout -> kTimeout; node, chromium or playwright-core missing ->
// kServiceUnavailable saying to run scripts/install-deps.sh.
core::Result<BrowserResult> RunBrowserFlow(const BrowserFlow& flow,
                                           const BrowserOptions& options = {});

// The directory for the current gtest test's artifacts (screenshots, logs), created:
// $KLUTCH_TEST_ARTIFACTS/<Suite>.<Test> when that variable is set, otherwise
// <build dir>/test-artifacts/<Suite>.<Test>. Emptied by a test's first call (what an earlier
// run left), kept after the test, pass or fail.
std::filesystem::path TestArtifactsDir();

}  // namespace klutch::testing
