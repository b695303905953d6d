#include "kubectl_bind/browser_login.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>

#include "apis/klutch/binding_response.h"
#include "core/process.h"
#include "core/sync.h"
#include "http/html.h"
#include "http/server.h"
#include "http/url.h"

namespace klutch::kubectl_bind {

core::Result<std::string> AuthorizeUrl(const std::string& authenticated_url, int port,
                                       const std::string& session_id, const std::string& cluster_id,
                                       const std::string& cluster_name) {
  auto url = http::ParseUrl(authenticated_url);
  if (!url.ok()) {
    return core::BadRequest("the backend advertises a bad login URL: " + url.status().message());
  }
  // `u` with the loopback address rather than `p` (which backends expand to localhost): a
  // browser resolving localhost to ::1 first could reach another local user's listener there.
  std::vector<std::pair<std::string, std::string>> query = {{"c", cluster_id}};
  if (!cluster_name.empty()) query.emplace_back("n", cluster_name);
  query.emplace_back("s", session_id);
  query.emplace_back("u", fmt::format("http://127.0.0.1:{}/callback", port));
  return http::AddQuery(*url, query);
}

core::Result<BindingResponse> DecodeCallbackResponse(std::string_view response,
                                                     const std::string& session_id) {
  auto decoded = apis::klutch::DecodeAnyBase64(response);
  if (!decoded) return core::BadRequest("the response parameter is not base64");
  return ParseBindingResponse(*decoded, session_id);
}

namespace {

// What the local callback server received.
class CallbackState {
 public:
  explicit CallbackState(std::string session_id) : session_id_(std::move(session_id)) {}

  http::Response Handle(http::Request& request) {
    http::Response response;
    response.headers.Set("Content-Type", "text/html; charset=utf-8");
    if (request.path != "/callback") {
      response.status = 404;
      response.body = "<h1>Not found</h1>";
      return response;
    }
    core::MutexLock lock(mu_);
    if (result_.has_value() && result_->ok()) {
      response.body = "<h1>Already authenticated.</h1><p>You can close this window.</p>";
      return response;
    }
    auto encoded = request.Query("response");
    if (!encoded) {
      response.status = 400;
      response.body = "<h1>The backend's answer is missing.</h1><p>Run kubectl bind again.</p>";
      return response;
    }
    auto decoded = DecodeCallbackResponse(*encoded, session_id_);
    if (!decoded.ok()) {
      // Not this login's answer (another page or process can reach a loopback port too):
      // shown and ignored; the login goes on waiting for the backend's.
      response.status = 400;
      response.body = "<h1>This is not the answer kubectl bind is waiting for.</h1><p>" +
                      http::HtmlEscape(decoded.status().message()) +
                      "</p><p>Finish the login in the window kubectl bind opened, or run it "
                      "again.</p>";
      std::cerr << "\nkubectl bind: ignored a request to the callback that does not carry this "
                   "login's answer ("
                << decoded.status().message() << ")\n"
                << std::flush;
      return response;
    }
    response.body =
        "<h1>You have been authenticated successfully!</h1><p>Return to your terminal; "
        "you can close this window.</p>";
    result_ = std::move(decoded);
    cv_.SignalAll();
    return response;
  }

  // The response once one arrived, nullopt after `timeout`; `tick` runs about once a second
  // while waiting.
  std::optional<core::Result<BindingResponse>> Wait(std::chrono::milliseconds timeout,
                                                    const std::function<void()>& tick) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      {
        core::MutexLock lock(mu_);
        auto next = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1));
        while (!result_.has_value() && std::chrono::steady_clock::now() < next) {
          cv_.WaitUntil(mu_, next);
        }
        if (result_.has_value()) return result_;
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      tick();
    }
  }

 private:
  const std::string session_id_;
  core::Mutex mu_;
  core::CondVar cv_;
  std::optional<core::Result<BindingResponse>> result_ GUARDED_BY(mu_);
};

void OpenBrowser(const std::string& url) {
  const char* display = std::getenv("DISPLAY");
  const char* wayland = std::getenv("WAYLAND_DISPLAY");
  if ((display == nullptr || *display == '\0') && (wayland == nullptr || *wayland == '\0')) return;
  if (access("/usr/bin/xdg-open", X_OK) != 0) return;
  (void)core::SpawnProcess({.argv = {"/usr/bin/xdg-open", url}});
}

}  // namespace

core::Result<BindingResponse> BrowserLogin(const BindingProvider& provider,
                                           const BrowserLoginOptions& options) {
  if (provider.authenticated_url.empty()) {
    return core::BadRequest(
        "the backend offers no browser login; use --headless for its device-grant login");
  }
  CallbackState state(options.session_id);
  auto server =
      http::Server::Start({.address = "127.0.0.1", .port = 0, .threads = 2, .io_threads = 1},
                          [&state](http::Request& r) { return state.Handle(r); });
  if (!server.ok()) return server.status();
  KLUTCH_ASSIGN_OR_RETURN(
      std::string authorize,
      AuthorizeUrl(provider.authenticated_url, (*server)->port(), options.session_id,
                   options.cluster_id, options.cluster_name));
  std::cerr << "To authenticate, visit in your browser:\n\n\t" << authorize << "\n\n";
  if (options.open_browser) OpenBrowser(authorize);
  bool tty = isatty(STDERR_FILENO);
  std::cerr << "Waiting for the login to finish (" << options.timeout_text
            << " at most; Ctrl-C to stop)" << (tty ? "" : "...\n") << std::flush;
  auto result = state.Wait(options.timeout, [&] {
    if (tty) std::cerr << "." << std::flush;
  });
  if (tty) std::cerr << "\n";
  (*server)->Drain(std::chrono::seconds(2));
  (*server)->Stop();
  if (!result) {
    return core::Status(core::Reason::kTimeout,
                        fmt::format("the login did not finish within {}; run kubectl bind "
                                    "again and complete it in the browser",
                                    options.timeout_text));
  }
  return std::move(*result);
}

}  // namespace klutch::kubectl_bind
