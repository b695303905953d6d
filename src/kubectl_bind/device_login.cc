#include "kubectl_bind/device_login.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <thread>

#include "core/strings.h"
#include "http/url.h"
#include "machinery/json.h"
#include "machinery/object.h"

namespace klutch::kubectl_bind {

using machinery::Json;

std::vector<std::pair<std::string, std::string>> DeviceAuthorizeForm(
    const std::string& session_id, const std::string& cluster_id, const std::string& cluster_name) {
  std::vector<std::pair<std::string, std::string>> form = {{"s", session_id}, {"c", cluster_id}};
  if (!cluster_name.empty()) form.emplace_back("n", cluster_name);
  return form;
}

namespace {

using ApiName = std::pair<std::string, std::string>;  // (resource, group)

// An --api value: <resource>.<group>.
core::Result<ApiName> SplitApiFlag(const std::string& api) {
  size_t dot = api.find('.');
  std::string resource = api.substr(0, dot);
  std::string group = dot == std::string::npos ? "" : api.substr(dot + 1);
  if (resource.empty() || group.empty()) {
    return core::BadRequest("--api " + core::GoQuote(api) +
                            ": expected <resource>.<group>, e.g. postgresqlinstances.anynines.com");
  }
  return std::make_pair(resource, group);
}

// The APIs to bind from a DeviceSession's offer: the --api values (each must be offered), or
// the user's choice on a terminal; without a terminal, an error listing what is offered.
core::Result<std::vector<ApiName>> ChooseOfferedApis(const Json& offered,
                                                     const std::vector<std::string>& flags) {
  std::vector<ApiName> apis;
  const Json* list = machinery::Find(offered, {"apis"});
  if (list != nullptr && list->is_array()) {
    for (const Json& a : *list) {
      apis.emplace_back(machinery::GetString(a, {"resource"}), machinery::GetString(a, {"group"}));
    }
  }
  if (apis.empty()) return core::NotFound("the backend offers no API to bind");
  std::string names;
  for (size_t i = 0; i < apis.size(); ++i) {
    names += fmt::format("\n  {}. {}.{}", i + 1, apis[i].first, apis[i].second);
  }
  std::vector<ApiName> chosen;
  if (!flags.empty()) {
    for (const std::string& api : flags) {
      KLUTCH_ASSIGN_OR_RETURN(auto wanted, SplitApiFlag(api));
      if (std::find(apis.begin(), apis.end(), wanted) == apis.end()) {
        return core::NotFound("--api " + api +
                              ": the backend does not offer it; it offers:" + names);
      }
      chosen.push_back(wanted);
    }
    return chosen;
  }
  if (!isatty(STDIN_FILENO)) {
    return core::BadRequest(
        "name the APIs to bind with --api <resource>.<group> (repeatable); "
        "the backend offers:" +
        names);
  }
  std::cerr << "The backend offers:" << names
            << "\nWhich to bind? Numbers or names, separated by commas, or \"all\": " << std::flush;
  std::string answer;
  std::getline(std::cin, answer);
  for (std::string_view item : core::Split(answer, ',')) {
    std::string token(core::Trim(item));
    if (token.empty()) continue;
    if (token == "all") return apis;
    size_t index = 0;
    if (std::all_of(token.begin(), token.end(), ::isdigit)) index = std::stoul(token.substr(0, 6));
    if (index >= 1 && index <= apis.size()) {
      chosen.push_back(apis[index - 1]);
      continue;
    }
    auto it = std::find_if(apis.begin(), apis.end(), [&](const auto& a) {
      return token == a.first || token == a.first + "." + a.second;
    });
    if (it == apis.end()) return core::BadRequest(core::GoQuote(token) + " is not offered");
    chosen.push_back(*it);
  }
  if (chosen.empty()) return core::BadRequest("no API chosen; nothing to bind");
  return chosen;
}

// The error of a device-grant answer other than 200 (RFC 8628 §3.5 error codes).
core::Status DeviceGrantRefusal(const http::ClientResponse& r) {
  auto error = machinery::ParseJson(r.body);
  std::string kind = error.ok() ? machinery::GetString(*error, {"error"}) : "";
  std::string description = error.ok() ? machinery::GetString(*error, {"error_description"}) : "";
  if (kind == "access_denied") {
    return core::Forbidden("the login was declined" +
                           (description.empty() ? std::string() : ": " + description));
  }
  if (kind == "expired_token") {
    return core::Status(core::Reason::kTimeout,
                        "the login expired before it finished; run kubectl bind --headless "
                        "again");
  }
  return core::BadRequest(fmt::format("the backend refused the device login (HTTP {}, {}){}{}",
                                      r.status, kind.empty() ? "no error code" : kind,
                                      description.empty() ? "" : ": ", description));
}

struct DeviceAuthorization {
  std::string handle;
  int64_t interval = 5;  // seconds between polls
};

// POSTs the device authorization request and prints where to enter the code.
core::Result<DeviceAuthorization> StartDeviceAuthorization(const BindingProvider& provider,
                                                           const DeviceLoginOptions& options) {
  KLUTCH_ASSIGN_OR_RETURN(http::ClientResponse started,
                          http::PostForm(provider.device_authorization_url, options.ca_pem,
                                         DeviceAuthorizeForm(options.session_id, options.cluster_id,
                                                             options.cluster_name)));
  auto answer = machinery::ParseJson(started.body);
  if (started.status != 200 || !answer.ok()) {
    std::string why = answer.ok() ? machinery::GetString(*answer, {"error_description"}) : "";
    return core::Status(core::Reason::kServiceUnavailable,
                        fmt::format("the backend could not start a device login (HTTP {}){}{}",
                                    started.status, why.empty() ? "" : ": ", why));
  }
  DeviceAuthorization authorization;
  authorization.handle = machinery::GetString(*answer, {"device_handle"});
  std::string code = machinery::GetString(*answer, {"user_code"});
  std::string uri = machinery::GetString(*answer, {"verification_uri"});
  std::string complete = machinery::GetString(*answer, {"verification_uri_complete"});
  if (const Json* i = machinery::Find(*answer, {"interval"}); i != nullptr) {
    if (const int64_t* v = i->get_ptr<const int64_t*>(); v != nullptr && *v > 0) {
      authorization.interval = *v;
    }
  }
  std::cerr << "To log in, open on any device:\n\n\t" << (complete.empty() ? uri : complete)
            << "\n\nand enter the code " << code << (complete.empty() ? "" : " if asked")
            << ".\nWaiting for the login";
  return authorization;
}

// Polls the token URL until the login finishes; returns the 200 answer's body.
core::Result<std::string> PollDeviceToken(const BindingProvider& provider,
                                          const DeviceLoginOptions& options,
                                          DeviceAuthorization authorization,
                                          const std::vector<ApiName>& token_api) {
  bool tty = isatty(STDERR_FILENO);
  std::cerr << (tty ? "" : "...\n") << std::flush;
  std::vector<std::pair<std::string, std::string>> form = {{"device_handle", authorization.handle}};
  if (!token_api.empty()) {
    form.emplace_back("group", token_api.front().second);
    form.emplace_back("resource", token_api.front().first);
  }
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  while (true) {
    if (std::chrono::steady_clock::now() >= deadline) {
      if (tty) std::cerr << "\n";
      return core::Status(core::Reason::kTimeout,
                          fmt::format("the login did not finish within {}; run kubectl bind "
                                      "--headless again",
                                      options.timeout_text));
    }
    std::this_thread::sleep_for(std::chrono::seconds(authorization.interval));
    KLUTCH_ASSIGN_OR_RETURN(http::ClientResponse polled,
                            http::PostForm(provider.device_token_url, options.ca_pem, form));
    if (polled.status == 200) {
      if (tty) std::cerr << "\n";
      return std::move(polled.body);
    }
    auto error = machinery::ParseJson(polled.body);
    std::string kind = error.ok() ? machinery::GetString(*error, {"error"}) : "";
    if (kind == "authorization_pending") {
      if (tty) std::cerr << "." << std::flush;
      continue;
    }
    if (kind == "slow_down") {
      authorization.interval += 5;
      continue;
    }
    if (tty) std::cerr << "\n";
    return DeviceGrantRefusal(polled);
  }
}

// Logged in: a DeviceSession with the offer; binds the chosen APIs with it.
core::Result<std::vector<BindingResponse>> BindWithDeviceSession(
    client::RestClient& app, const BindingProvider& provider, const DeviceLoginOptions& options,
    const std::string& session_body, ClaimAnswers& answers, const BindOutput& out) {
  auto device_session = machinery::ParseJson(session_body);
  if (!device_session.ok() || machinery::GetString(*device_session, {"kind"}) != "DeviceSession") {
    return core::Internal("the backend's answer to the login is not a DeviceSession");
  }
  KLUTCH_ASSIGN_OR_RETURN(auto chosen, ChooseOfferedApis(*device_session, options.apis));
  std::vector<Json> offered;
  if (const Json* list = machinery::Find(*device_session, {"apis"});
      list != nullptr && list->is_array()) {
    for (const Json& a : *list) {
      auto key =
          std::make_pair(machinery::GetString(a, {"resource"}), machinery::GetString(a, {"group"}));
      if (std::find(chosen.begin(), chosen.end(), key) != chosen.end()) offered.push_back(a);
    }
  }
  KLUTCH_ASSIGN_OR_RETURN(auto questions, ClaimQuestions(app, offered));
  KLUTCH_ASSIGN_OR_RETURN(answers, DecideClaims(questions, options.accept_claims, out));
  std::string sealed = machinery::GetString(*device_session, {"session"});
  std::vector<BindingResponse> responses;
  for (const auto& [resource, group] : chosen) {
    KLUTCH_ASSIGN_OR_RETURN(
        http::ClientResponse bound,
        http::PostForm(provider.device_bind_url, options.ca_pem,
                       {{"session", sealed}, {"group", group}, {"resource", resource}}));
    if (bound.status != 200) return DeviceGrantRefusal(bound);
    KLUTCH_ASSIGN_OR_RETURN(BindingResponse response,
                            ParseBindingResponse(bound.body, options.session_id));
    responses.push_back(std::move(response));
  }
  return responses;
}

}  // namespace

core::Result<std::vector<BindingResponse>> DeviceLogin(client::RestClient& app,
                                                       const BindingProvider& provider,
                                                       const DeviceLoginOptions& options,
                                                       ClaimAnswers& answers,
                                                       const BindOutput& out) {
  if (provider.device_authorization_url.empty() || provider.device_token_url.empty()) {
    return core::BadRequest(
        "this backend offers no device-grant login; run kubectl bind without --headless "
        "(with --skip-browser to open the login URL on another machine)");
  }
  std::vector<ApiName> token_api;  // the one API asked for at once
  if (options.apis.size() == 1 || provider.device_bind_url.empty()) {
    if (options.apis.size() != 1) {
      return core::BadRequest(
          "this backend binds one API per device login: name it with --api <resource>.<group> "
          "(its catalog page lists them), e.g. --api postgresqlinstances.anynines.com");
    }
    KLUTCH_ASSIGN_OR_RETURN(auto api, SplitApiFlag(options.apis.front()));
    token_api.push_back(api);
  } else {
    for (const std::string& api : options.apis) KLUTCH_RETURN_IF_ERROR(SplitApiFlag(api).status());
  }
  KLUTCH_ASSIGN_OR_RETURN(DeviceAuthorization authorization,
                          StartDeviceAuthorization(provider, options));
  KLUTCH_ASSIGN_OR_RETURN(std::string body,
                          PollDeviceToken(provider, options, authorization, token_api));
  if (!token_api.empty()) {
    KLUTCH_ASSIGN_OR_RETURN(BindingResponse response,
                            ParseBindingResponse(body, options.session_id));
    return std::vector<BindingResponse>{std::move(response)};
  }
  return BindWithDeviceSession(app, provider, options, body, answers, out);
}

}  // namespace klutch::kubectl_bind
