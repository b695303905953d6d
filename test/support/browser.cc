#include "test/support/browser.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <string_view>

#include "machinery/json.h"
#include "test/support/process.h"

namespace klutch::testing {

namespace fs = std::filesystem;
using machinery::Json;

namespace {

constexpr char kDefaultChromium[] = "/usr/bin/chromium";
const fs::path kBrowserDir = fs::path(KLUTCH_SOURCE_DIR) / "test" / "browser";

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// `text` cut to its first `n` characters, with a mark when it was longer.
std::string Head(const std::string& text, size_t n) {
  return text.size() <= n ? text : text.substr(0, n) + "...";
}

std::vector<std::string> Strings(const Json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key) || !j[key].is_array()) return out;
  for (const auto& v : j[key]) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

std::string String(const Json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

}  // namespace

BrowserFlow& BrowserFlow::Goto(const std::string& url) {
  steps_.push_back(machinery::Dump({{"action", "goto"}, {"url", url}}));
  return *this;
}
BrowserFlow& BrowserFlow::Fill(const std::string& selector, const std::string& value) {
  steps_.push_back(machinery::Dump({{"action", "fill"}, {"selector", selector}, {"value", value}}));
  return *this;
}
BrowserFlow& BrowserFlow::Click(const std::string& selector) {
  steps_.push_back(machinery::Dump({{"action", "click"}, {"selector", selector}}));
  return *this;
}
BrowserFlow& BrowserFlow::WaitForUrlPrefix(const std::string& prefix) {
  steps_.push_back(machinery::Dump({{"action", "waitForUrl"}, {"prefix", prefix}}));
  return *this;
}
BrowserFlow& BrowserFlow::WaitForUrlMatching(const std::string& regex) {
  steps_.push_back(machinery::Dump({{"action", "waitForUrl"}, {"regex", regex}}));
  return *this;
}
BrowserFlow& BrowserFlow::WaitForSelector(const std::string& selector) {
  steps_.push_back(machinery::Dump({{"action", "waitForSelector"}, {"selector", selector}}));
  return *this;
}
BrowserFlow& BrowserFlow::GlewlwydLogin(const std::string& user, const std::string& password) {
  steps_.push_back(
      machinery::Dump({{"action", "glewlwydLogin"}, {"user", user}, {"password", password}}));
  return *this;
}
BrowserFlow& BrowserFlow::Screenshot(const fs::path& path) {
  steps_.push_back(
      machinery::Dump({{"action", "screenshot"}, {"path", fs::absolute(path).string()}}));
  return *this;
}
BrowserFlow& BrowserFlow::Text(const std::string& name, const std::string& selector) {
  steps_.push_back(machinery::Dump({{"action", "text"}, {"name", name}, {"selector", selector}}));
  return *this;
}
BrowserFlow& BrowserFlow::Html(const std::string& name) {
  steps_.push_back(machinery::Dump({{"action", "html"}, {"name", name}}));
  return *this;
}
BrowserFlow& BrowserFlow::Url(const std::string& name) {
  steps_.push_back(machinery::Dump({{"action", "url"}, {"name", name}}));
  return *this;
}

fs::path TestArtifactsDir() {
  std::string name = "no-test";
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
    name = std::string(info->test_suite_name()) + "." + info->name();
    for (char& c : name) {
      if (c == '/') c = '_';  // parameterised tests: Suite/Instance.Test/0
    }
  }
  const char* root = std::getenv("KLUTCH_TEST_ARTIFACTS");
  fs::path dir = (root != nullptr && *root != '\0')
                     ? fs::path(root)
                     : fs::path(KLUTCH_BINARY_DIR) / "test-artifacts";
  dir /= name;
  std::error_code ec;
  {
    // A test's first call empties what an earlier run of the same test left.
    static std::mutex mu;
    static std::set<std::string> seen;
    std::lock_guard<std::mutex> lock(mu);
    if (seen.insert(dir.string()).second) fs::remove_all(dir, ec);
  }
  fs::create_directories(dir, ec);
  return fs::absolute(dir);
}

core::Result<BrowserResult> RunBrowserFlow(const BrowserFlow& flow, const BrowserOptions& options) {
  std::string executable = options.executable;
  if (executable.empty()) {
    const char* env = std::getenv("KLUTCH_CHROMIUM");
    executable = (env != nullptr && *env != '\0') ? env : kDefaultChromium;
  }
  if (!fs::exists(executable)) {
    return core::Unavailable(executable + " is missing: run scripts/install-deps.sh");
  }
  if (!fs::exists(kBrowserDir / "node_modules" / "playwright-core" / "package.json")) {
    return core::Unavailable("playwright-core is missing in " + kBrowserDir.string() +
                             "/node_modules: run scripts/install-deps.sh");
  }
  fs::path dir = options.artifacts_dir.empty() ? TestArtifactsDir() : options.artifacts_dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  dir = fs::absolute(dir);

  // One flow per file name, so several flows of one test keep their own files.
  int n = 1;
  while (fs::exists(dir / ("browser-flow-" + std::to_string(n) + ".json"))) ++n;
  std::string base = "browser-flow-" + std::to_string(n);
  fs::path flow_file = dir / (base + ".json");
  fs::path failure_png = dir / (base + "-failure.png");

  Json steps = Json::array();
  for (const auto& step : flow.steps()) {
    auto parsed = machinery::ParseJson(step);
    if (!parsed.ok()) return parsed.status();
    steps.push_back(std::move(*parsed));
  }
  Json j = {
      {"executablePath", executable},
      {"ignoreHttpsErrors", options.ignore_https_errors},
      {"args", options.chromium_args},
      {"timeoutMs", std::chrono::duration_cast<std::chrono::milliseconds>(options.timeout).count()},
      {"stepTimeoutMs", options.step_timeout.count()},
      {"viewport", {{"width", options.width}, {"height", options.height}}},
      {"intercept", options.intercept_prefixes},
      {"failureScreenshot", failure_png.string()},
      {"steps", steps},
  };
  if (!options.storage_state.empty()) {
    j["storageState"] = fs::absolute(options.storage_state).string();
  }
  {
    std::ofstream out(flow_file, std::ios::trunc);
    out << j.dump(2);
    if (!out) return core::Internal("cannot write " + flow_file.string());
  }

  // node stops on its own at options.timeout (steps are bounded by it); the extra time is
  // for closing the browser and the failure screenshot.
  CommandResult r = RunShell("exec node " + ShellQuote((kBrowserDir / "run_flow.mjs").string()) +
                                 " " + ShellQuote(flow_file.string()),
                             {{"PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1"}}, kBrowserDir,
                             options.timeout + std::chrono::seconds(15));
  {
    std::ofstream log(dir / (base + ".log"), std::ios::trunc);
    log << r.err;
  }
  if (r.timed_out) {
    return core::Status(core::Reason::kTimeout, "browser flow " + flow_file.string() +
                                                    " did not end within " +
                                                    std::to_string(options.timeout.count() + 15) +
                                                    " s; node's log:\n" + Head(r.err, 4000));
  }
  if (r.exit_code == 127) {
    return core::Unavailable("node is missing: run scripts/install-deps.sh");
  }
  auto answer = machinery::ParseJson(r.out);
  if (!answer.ok() || !answer->is_object()) {
    return core::Internal(
        "browser flow " + flow_file.string() + ": node exited with " + std::to_string(r.exit_code) +
        " without a result; stdout: " + Head(r.out, 2000) + "\nstderr: " + Head(r.err, 4000));
  }
  const Json& a = *answer;
  if (r.exit_code != 0 || !a.contains("ok") || !a["ok"].is_boolean() || !a["ok"].get<bool>()) {
    std::string message = "browser flow " + flow_file.string() + ": " + String(a, "error");
    if (!String(a, "failureScreenshot").empty()) {
      message += "\nscreenshot at failure: " + String(a, "failureScreenshot");
    }
    if (!String(a, "pageText").empty()) {
      message += "\npage text:\n" + Head(String(a, "pageText"), 2000);
    }
    auto console = Strings(a, "console");
    if (!console.empty()) {
      message += "\nconsole:";
      for (const auto& line : console) message += "\n  " + Head(line, 300);
    }
    return core::Internal(message);
  }
  BrowserResult result;
  result.final_url = String(a, "url");
  if (a.contains("values") && a["values"].is_object()) {
    for (const auto& [k, v] : a["values"].items()) {
      if (v.is_string()) result.values[k] = v.get<std::string>();
    }
  }
  result.intercepted = Strings(a, "intercepted");
  result.visited = Strings(a, "visited");
  result.console = Strings(a, "console");
  return result;
}

}  // namespace klutch::testing
