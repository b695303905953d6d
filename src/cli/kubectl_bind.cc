// kubectl-bind: flags, the login flows and the order of the steps in bind_client.h.
#include "cli/kubectl_bind.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "apis/klutch/ids.h"
#include "cli/bind_client.h"
#include "client/dynamic.h"
#include "client/kubeconfig.h"
#include "core/duration.h"
#include "core/file.h"
#include "core/process.h"
#include "core/strings.h"
#include "core/sync.h"
#include "http/html.h"
#include "http/server.h"
#include "http/url.h"
#include "machinery/object.h"

namespace klutch::cli {
namespace {

using bind::BindOutput;
using machinery::Json;

struct ConnectionFlags {
  std::string kubeconfig, context, cluster, user, namespace_;
};

struct CommonFlags {
  ConnectionFlags app;
  std::string output = "yaml";
  bool dry_run = false;
  bool skip_konnector = false;
  std::string konnector_image;
  std::string konnector_version;
  bool accept_claims = false;
  std::string timeout = "10m";
  std::string ready_timeout = "1m";
};

struct BindFlags {
  CommonFlags common;
  std::string url;
  bool skip_browser = false;
  bool headless = false;
  std::string backend_ca_file;
  std::vector<std::string> apis;            // --headless: <resource>.<group> to bind
  std::optional<std::string> cluster_name;  // --cluster-name, when given
};

struct ApiServiceFlags {
  CommonFlags common;
  std::string url;
  std::string file;
  std::string remote_kubeconfig;
  std::string remote_kubeconfig_namespace;
  std::string remote_kubeconfig_name;
  std::string remote_namespace;
};

// Help in kubectl's layout: description, examples, commands, options, usage.
class KubectlHelp : public CLI::Formatter {
 public:
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode) const override {
    std::ostringstream out;
    out << app->get_description() << "\n\n";
    if (!app->get_footer().empty()) out << "Examples:\n" << app->get_footer() << "\n\n";
    auto subs = app->get_subcommands({});
    if (!subs.empty()) {
      out << "Available Commands:\n";
      for (const CLI::App* sub : subs) {
        out << "  " << sub->get_name()
            << std::string(14 - std::min<size_t>(13, sub->get_name().size()), ' ')
            << sub->get_description().substr(0, sub->get_description().find('\n')) << "\n";
      }
      out << "\n";
    }
    out << "Options:\n";
    for (const CLI::Option* opt : app->get_options()) {
      if (opt->get_lnames().empty() || opt->get_group().empty()) continue;
      std::string names;
      for (const auto& s : opt->get_snames()) names += "-" + s + ", ";
      names += "--" + opt->get_lnames().front();
      std::string value = opt->get_default_str();
      if (opt->get_expected_min() == 0) {
        value = value.empty() ? "false" : value;
      } else if (value.empty()) {
        // A repeatable option shows as kubectl shows a stringArray flag.
        value = opt->get_expected_max() > 1 ? "[]" : "''";
      }
      out << "    " << names << "=" << value << ":\n\t" << opt->get_description() << "\n\n";
    }
    std::string usage = name.empty() ? app->get_name() : name;
    out << "Usage:\n  " << usage << " " << usage_ << "\n";
    if (!subs.empty()) {
      out << "\nUse \"kubectl bind <command> --help\" for more information about a given "
             "command.\n";
    }
    return out.str();
  }
  void set_usage(std::string u) { usage_ = std::move(u); }

 private:
  std::string usage_;
};

void AddCommonFlags(CLI::App* cmd, CommonFlags& f) {
  cmd->add_option("--kubeconfig", f.app.kubeconfig,
                  "Path to the kubeconfig file of the App Cluster (default: $KUBECONFIG or "
                  "~/.kube/config).")
      ->group("Options");
  cmd->add_option("--context", f.app.context, "The name of the kubeconfig context to use.")
      ->group("Options");
  cmd->add_option("--cluster", f.app.cluster, "The name of the kubeconfig cluster to use.")
      ->group("Options");
  cmd->add_option("--user", f.app.user, "The name of the kubeconfig user to use.")
      ->group("Options");
  cmd->add_option("-o,--output", f.output, "Output format of --dry-run. One of: (json, yaml).")
      ->check(CLI::IsMember({"json", "yaml"}))
      ->capture_default_str()
      ->group("Options");
  cmd->add_flag("-d,--dry-run", f.dry_run,
                "If true, only print the objects that would be created in the App Cluster "
                "and on the provider, without creating them.")
      ->group("Options");
  cmd->add_flag("--skip-konnector", f.skip_konnector,
                "If true, do not install the konnector in the App Cluster (it must already "
                "run).")
      ->group("Options");
  CLI::Option* image =
      cmd->add_option("--konnector-image", f.konnector_image,
                      "The konnector image to install; given, the konnector is (re)installed "
                      "with it even when one runs.")
          ->group("Options");
  cmd->add_option("--konnector-version", f.konnector_version,
                  "The konnector version to install (the default image with that tag, e.g. "
                  "v0.1.0); given, the konnector is (re)installed at it even when one runs. "
                  "Default: this kubectl-bind's version.")
      ->group("Options")
      ->excludes(image)
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            auto at = bind::KonnectorImageAt(v);
            return at.ok() ? "" : at.status().message();
          },
          "VERSION"));
  cmd->add_flag("--accept-permission-claims", f.accept_claims,
                "If true, accept every permission claim of the bound APIs without asking "
                "(for scripts).")
      ->group("Options");
  cmd->add_option("--timeout", f.timeout,
                  "How long to wait for the login, the provider and the konnector (Go "
                  "duration).")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            auto d = core::ParseGoDuration(v);
            if (!d.ok() || (d->seconds <= 0 && d->nanos <= 0)) {
              return "must be a positive duration such as 90s, 10m or 1h30m";
            }
            return "";
          },
          "DURATION"))
      ->group("Options");
  cmd->add_option("--ready-timeout", f.ready_timeout,
                  "How long to wait, once the APIs are bound, for the konnector to report each "
                  "binding Ready before printing them (Go duration; 0 does not wait).")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            auto d = core::ParseGoDuration(v);
            if (!d.ok() || d->seconds < 0 || d->nanos < 0) {
              return "must be a duration such as 0, 30s or 2m";
            }
            return "";
          },
          "DURATION"))
      ->group("Options");
}

// The --timeout value, checked when the flags are parsed (a positive Go duration).
std::chrono::milliseconds ParseDuration(const std::string& text,
                                        std::chrono::milliseconds fallback) {
  auto d = core::ParseGoDuration(text);
  if (!d.ok()) return fallback;
  return std::chrono::milliseconds(d->seconds * 1000 + d->nanos / 1000000);
}

std::chrono::milliseconds ParseTimeout(const std::string& text) {
  return ParseDuration(text, std::chrono::minutes(10));
}

int Fail(const core::Status& st) {
  std::cerr << "error: " << st.message() << "\n";
  return 1;
}

BindOutput Output() {
  BindOutput out;
  out.err = &std::cerr;
  out.ask = [](const std::string& prompt) -> std::optional<std::string> {
    if (!isatty(STDIN_FILENO)) return std::nullopt;
    std::cerr << prompt << std::flush;
    std::string line;
    if (!std::getline(std::cin, line)) return std::nullopt;
    return line;
  };
  return out;
}

core::Result<std::unique_ptr<client::RestClient>> AppClient(const ConnectionFlags& f) {
  client::KubeconfigOptions options;
  if (!f.kubeconfig.empty()) options.paths = {f.kubeconfig};
  options.context = f.context;
  options.cluster = f.cluster;
  options.user = f.user;
  options.namespace_ = f.namespace_;
  auto config = client::LoadKubeconfig(options);
  if (!config.ok()) {
    return core::Status(config.status().reason(),
                        "reading the App Cluster's kubeconfig: " + config.status().message() +
                            "\n  pass --kubeconfig or set KUBECONFIG to reach your cluster");
  }
  config->user_agent = "kubectl-bind/" + std::string(bind::kCliVersion);
  return client::RestClient::New(*config);
}

core::Result<std::unique_ptr<client::RestClient>> ProviderClient(const std::string& kubeconfig,
                                                                 const std::string& ns_override) {
  auto parsed = client::ParseKubeconfig(kubeconfig, "the provider kubeconfig", "/");
  if (!parsed.ok()) return parsed.status();
  client::KubeconfigOptions options;
  options.namespace_ = ns_override;
  auto config = client::ResolveKubeconfig(*parsed, options);
  if (!config.ok()) return config.status();
  config->user_agent = "kubectl-bind/" + std::string(bind::kCliVersion);
  return client::RestClient::New(*config);
}

void PrintObjects(const std::vector<Json>& objects, const std::string& format) {
  Json list = {
      {"apiVersion", "v1"}, {"kind", "List"}, {"items", objects}, {"metadata", Json::object()}};
  if (format == "json") {
    std::cout << list.dump(4, ' ', false, Json::error_handler_t::replace) << "\n";
  } else {
    std::cout << machinery::ToYaml(list);
  }
}

// Everything after the provider kubeconfig and the export requests are known: the shared
// tail of `kubectl bind URL` and `kubectl bind apiservice`.
// `answers` holds the user's answers to the claims of `requests`, decided before any of them
// was bound. The bindings' names are appended to `bound` (ShowBindings prints them).
int BindRequests(client::RestClient& app, const std::string& provider_kubeconfig,
                 const std::string& secret_hint, const std::string& remote_namespace,
                 std::vector<Json> requests, const bind::ClaimAnswers& answers,
                 const CommonFlags& f, std::vector<std::string>& bound) {
  BindOutput out = Output();
  auto timeout = ParseTimeout(f.timeout);
  auto target = bind::ReadProviderKubeconfig(provider_kubeconfig);
  if (!target.ok() && remote_namespace.empty()) return Fail(target.status());
  std::string cluster_namespace =
      remote_namespace.empty() ? target->cluster_namespace : remote_namespace;
  auto provider = ProviderClient(provider_kubeconfig, cluster_namespace);
  if (!provider.ok()) return Fail(provider.status());
  std::vector<Json> printed;
  if (f.dry_run) {
    for (Json& r : requests) {
      machinery::MutableMetadata(r)["namespace"] = cluster_namespace;
      printed.push_back(r);
    }
  }
  if (!f.dry_run) {
    if (auto uid = bind::EnsureBindNamespace(app); !uid.ok()) return Fail(uid.status());
  }
  std::string secret = secret_hint;
  if (secret.empty()) {
    auto stored = bind::StoreProviderKubeconfig(app, provider_kubeconfig, f.dry_run, out);
    if (!stored.ok()) return Fail(stored.status());
    secret = stored->empty() ? "kubeconfig-<generated>" : *stored;
  }
  std::vector<Json> accepted;
  for (Json& request : requests) {
    if (f.dry_run) {
      accepted.push_back(request);
      continue;
    }
    auto done = bind::CreateExportRequest(**provider, cluster_namespace, request, timeout, out);
    if (!done.ok()) return Fail(done.status());
    accepted.push_back(*done);
  }
  std::string image = f.konnector_image;
  if (!f.konnector_version.empty()) {
    auto at = bind::KonnectorImageAt(f.konnector_version);  // checked when the flags were parsed
    if (!at.ok()) return Fail(at.status());
    image = *at;
  }
  if (!f.skip_konnector || !image.empty()) {
    core::Status st = bind::InstallKonnector(
        app, {.image = image, .force = !image.empty(), .dry_run = f.dry_run, .printed = &printed},
        out);
    if (!st.ok()) return Fail(st);
  }
  if (!f.dry_run) {
    core::Status st = bind::WaitForBindingCrd(app, timeout, out);
    if (!st.ok()) return Fail(st);
  }
  std::vector<std::string> names;
  for (const Json& request : accepted) {
    auto made = bind::CreateBindings(app, request, secret, answers, f.dry_run, &printed, out);
    if (!made.ok()) return Fail(made.status());
    names.insert(names.end(), made->begin(), made->end());
  }
  // Only now, with the user's answers stored on the bindings, may the konnector sync what
  // they accepted: the bound resources and the claims marked Accepted.
  for (const Json& request : accepted) {
    const Json* list = machinery::Find(request, {"spec", "resources"});
    if (list == nullptr || !list->is_array()) continue;
    for (const Json& r : *list) {
      std::string group = machinery::GetString(r, {"group"});
      std::string resource = machinery::GetString(r, {"resource"});
      Json claims = Json::array();
      if (f.dry_run) {
        if (const Json* c = machinery::Find(r, {"permissionClaims"}); c != nullptr) claims = *c;
      } else {
        auto binding =
            client::ResourceClient(app, {"klutch.anynines.com", "v1alpha1", "apiservicebindings"},
                                   bind::kBindNamespace)
                .Get(group.empty() ? resource : resource + "." + group);
        const Json* c =
            binding.ok() ? machinery::Find(*binding, {"spec", "permissionClaims"}) : nullptr;
        if (c != nullptr && c->is_array()) {
          for (const Json& claim : *c) {
            if (machinery::GetString(claim, {"state"}) == "Accepted") claims.push_back(claim);
          }
        }
      }
      core::Status st = bind::GrantBoundResource(app, group, resource, claims, f.dry_run, out);
      if (!st.ok()) return Fail(st);
    }
  }
  if (f.dry_run) PrintObjects(printed, f.output);
  bound.insert(bound.end(), names.begin(), names.end());
  return 0;
}

// The table of the bindings a run made, once the konnector reported them (up to
// --ready-timeout; right after binding the table would only show the CLI's own Pending), and
// for each binding not Ready yet, what it waits for. Nothing in a dry run.
int ShowBindings(client::RestClient& app, const std::vector<std::string>& names,
                 const CommonFlags& f) {
  if (f.dry_run || names.empty()) return 0;
  auto waited =
      bind::WaitForBindingsReady(app, names, ParseDuration(f.ready_timeout, {}), Output());
  auto table = bind::BindingsTable(app, names);
  if (table.ok()) std::cout << *table;
  if (waited.ok()) {
    for (const std::string& line : *waited) std::cerr << line << "\n";
  }
  return 0;
}

// Checks, before anything is written, that every API of `requests` can be bound with
// `provider_kubeconfig` (its Secret `secret_hint`, or the one StoreProviderKubeconfig would
// reuse): see bind::CheckBindable.
core::Status CheckBindable(client::RestClient& app, const std::string& provider_kubeconfig,
                           const std::string& secret_hint, const std::vector<Json>& requests) {
  std::string secret = secret_hint;
  if (secret.empty()) {
    KLUTCH_ASSIGN_OR_RETURN(secret, bind::StoreProviderKubeconfig(app, provider_kubeconfig,
                                                                  /*dry_run=*/true, {}));
  }
  return bind::CheckBindable(app, bind::RequestedApis(requests), secret);
}

// Decides the permission claims of `requests` that `answers` leaves open, adding the answers;
// called for all the APIs of a run before the first is bound.
core::Status DecideRemainingClaims(client::RestClient& app, const std::vector<Json>& requests,
                                   const CommonFlags& f, bind::ClaimAnswers& answers) {
  KLUTCH_ASSIGN_OR_RETURN(auto questions, bind::ClaimQuestions(app, bind::RequestedApis(requests)));
  std::erase_if(questions, [&](const bind::ClaimQuestion& q) {
    return answers.Find(q.binding, q.group, q.resource).has_value();
  });
  KLUTCH_ASSIGN_OR_RETURN(bind::ClaimAnswers more,
                          bind::DecideClaims(questions, f.accept_claims, Output()));
  answers.accept_all = answers.accept_all || more.accept_all;
  answers.given.merge(more.given);
  return core::Status::Ok();
}

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
    auto decoded = bind::DecodeCallbackResponse(*encoded, session_id_);
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
  std::optional<core::Result<bind::BindingResponse>> Wait(std::chrono::milliseconds timeout,
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
  std::optional<core::Result<bind::BindingResponse>> result_ GUARDED_BY(mu_);
};

void OpenBrowser(const std::string& url) {
  const char* display = std::getenv("DISPLAY");
  const char* wayland = std::getenv("WAYLAND_DISPLAY");
  if ((display == nullptr || *display == '\0') && (wayland == nullptr || *wayland == '\0')) return;
  if (access("/usr/bin/xdg-open", X_OK) != 0) return;
  (void)core::SpawnProcess({.argv = {"/usr/bin/xdg-open", url}});
}

// An --api value: <resource>.<group>.
core::Result<std::pair<std::string, std::string>> SplitApi(const std::string& api) {
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
core::Result<std::vector<std::pair<std::string, std::string>>> ChooseApis(const Json& offered,
                                                                          const BindFlags& f) {
  std::vector<std::pair<std::string, std::string>> apis;  // (resource, group)
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
  std::vector<std::pair<std::string, std::string>> chosen;
  if (!f.apis.empty()) {
    for (const std::string& api : f.apis) {
      KLUTCH_ASSIGN_OR_RETURN(auto wanted, SplitApi(api));
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

// The device authorization grant through the backend (docs/bind-backend.md): the user opens
// the printed URL on any device and enters the code; this polls until the backend answers.
// One --api: the token answer is that API's BindingResponse. Otherwise the answer is a
// DeviceSession: the user's APIs (the --api values, or chosen from its offer) are bound with
// it one by one, all with this one login.
// The permission claims of the chosen APIs are decided (into `answers`) from the offer, before
// the first of them is bound on the provider.
core::Result<std::vector<bind::BindingResponse>> DeviceLogin(
    client::RestClient& app, const bind::BindingProvider& provider, const BindFlags& f,
    const std::string& ca_pem, const std::string& session_id, const std::string& cluster_id,
    const std::string& cluster_name, std::chrono::milliseconds timeout,
    bind::ClaimAnswers& answers) {
  if (provider.device_authorization_url.empty() || provider.device_token_url.empty()) {
    return core::BadRequest(
        "this backend offers no device-grant login; run kubectl bind without --headless "
        "(with --skip-browser to open the login URL on another machine)");
  }
  std::vector<std::pair<std::string, std::string>> token_api;  // the one API asked for at once
  if (f.apis.size() == 1 || provider.device_bind_url.empty()) {
    if (f.apis.size() != 1) {
      return core::BadRequest(
          "this backend binds one API per device login: name it with --api <resource>.<group> "
          "(its catalog page lists them), e.g. --api postgresqlinstances.anynines.com");
    }
    KLUTCH_ASSIGN_OR_RETURN(auto api, SplitApi(f.apis.front()));
    token_api.push_back(api);
  } else {
    for (const std::string& api : f.apis) KLUTCH_RETURN_IF_ERROR(SplitApi(api).status());
  }
  KLUTCH_ASSIGN_OR_RETURN(
      http::ClientResponse started,
      http::PostForm(provider.device_authorization_url, ca_pem,
                     bind::DeviceAuthorizeForm(session_id, cluster_id, cluster_name)));
  auto answer = machinery::ParseJson(started.body);
  if (started.status != 200 || !answer.ok()) {
    std::string why = answer.ok() ? machinery::GetString(*answer, {"error_description"}) : "";
    return core::Status(core::Reason::kServiceUnavailable,
                        fmt::format("the backend could not start a device login (HTTP {}){}{}",
                                    started.status, why.empty() ? "" : ": ", why));
  }
  std::string handle = machinery::GetString(*answer, {"device_handle"});
  std::string code = machinery::GetString(*answer, {"user_code"});
  std::string uri = machinery::GetString(*answer, {"verification_uri"});
  std::string complete = machinery::GetString(*answer, {"verification_uri_complete"});
  int64_t interval = 5;
  if (const Json* i = machinery::Find(*answer, {"interval"}); i != nullptr) {
    if (const int64_t* v = i->get_ptr<const int64_t*>(); v != nullptr && *v > 0) interval = *v;
  }
  std::cerr << "To log in, open on any device:\n\n\t" << (complete.empty() ? uri : complete)
            << "\n\nand enter the code " << code << (complete.empty() ? "" : " if asked")
            << ".\nWaiting for the login";
  bool tty = isatty(STDERR_FILENO);
  std::cerr << (tty ? "" : "...\n") << std::flush;
  std::vector<std::pair<std::string, std::string>> form = {{"device_handle", handle}};
  if (!token_api.empty()) {
    form.emplace_back("group", token_api.front().second);
    form.emplace_back("resource", token_api.front().first);
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string session_body;
  auto refused = [](const http::ClientResponse& r) {
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
  };
  while (true) {
    if (std::chrono::steady_clock::now() >= deadline) {
      if (tty) std::cerr << "\n";
      return core::Status(core::Reason::kTimeout,
                          fmt::format("the login did not finish within {}; run kubectl bind "
                                      "--headless again",
                                      f.common.timeout));
    }
    std::this_thread::sleep_for(std::chrono::seconds(interval));
    KLUTCH_ASSIGN_OR_RETURN(http::ClientResponse polled,
                            http::PostForm(provider.device_token_url, ca_pem, form));
    if (polled.status == 200) {
      if (tty) std::cerr << "\n";
      if (!token_api.empty()) {
        KLUTCH_ASSIGN_OR_RETURN(bind::BindingResponse response,
                                bind::ParseBindingResponse(polled.body, session_id));
        return std::vector<bind::BindingResponse>{std::move(response)};
      }
      session_body = std::move(polled.body);
      break;
    }
    auto error = machinery::ParseJson(polled.body);
    std::string kind = error.ok() ? machinery::GetString(*error, {"error"}) : "";
    if (kind == "authorization_pending") {
      if (tty) std::cerr << "." << std::flush;
      continue;
    }
    if (kind == "slow_down") {
      interval += 5;
      continue;
    }
    if (tty) std::cerr << "\n";
    return refused(polled);
  }

  // Logged in: a DeviceSession with the offer; bind the chosen APIs with it.
  auto device_session = machinery::ParseJson(session_body);
  if (!device_session.ok() || machinery::GetString(*device_session, {"kind"}) != "DeviceSession") {
    return core::Internal("the backend's answer to the login is not a DeviceSession");
  }
  KLUTCH_ASSIGN_OR_RETURN(auto chosen, ChooseApis(*device_session, f));
  std::vector<Json> offered;
  if (const Json* list = machinery::Find(*device_session, {"apis"});
      list != nullptr && list->is_array()) {
    for (const Json& a : *list) {
      auto key =
          std::make_pair(machinery::GetString(a, {"resource"}), machinery::GetString(a, {"group"}));
      if (std::find(chosen.begin(), chosen.end(), key) != chosen.end()) offered.push_back(a);
    }
  }
  KLUTCH_ASSIGN_OR_RETURN(auto questions, bind::ClaimQuestions(app, offered));
  KLUTCH_ASSIGN_OR_RETURN(answers, bind::DecideClaims(questions, f.common.accept_claims, Output()));
  std::string sealed = machinery::GetString(*device_session, {"session"});
  std::vector<bind::BindingResponse> responses;
  for (const auto& [resource, group] : chosen) {
    KLUTCH_ASSIGN_OR_RETURN(
        http::ClientResponse bound,
        http::PostForm(provider.device_bind_url, ca_pem,
                       {{"session", sealed}, {"group", group}, {"resource", resource}}));
    if (bound.status != 200) return refused(bound);
    KLUTCH_ASSIGN_OR_RETURN(bind::BindingResponse response,
                            bind::ParseBindingResponse(bound.body, session_id));
    responses.push_back(std::move(response));
  }
  return responses;
}

int RunBind(BindFlags& f) {
  BindOutput out = Output();
  // A bad --cluster-name is refused before anything is fetched or written.
  if (auto checked = bind::ClusterNameToSend(f.cluster_name, ""); !checked.ok()) {
    return Fail(checked.status());
  }
  auto url = http::ParseUrl(f.url);
  if (!url.ok()) return Fail(url.status());
  std::string ca_pem;
  if (!f.backend_ca_file.empty()) {
    auto pem = core::ReadFile(f.backend_ca_file);
    if (!pem.ok()) return Fail(core::BadRequest("--backend-ca-file: " + pem.status().message()));
    ca_pem = *pem;
  }
  auto fetched = http::Fetch(*url, {.headers = {}, .ca_pem = ca_pem});
  if (!fetched.ok()) {
    return Fail(core::Status(fetched.status().reason(),
                             fetched.status().message() +
                                 "\n  check the URL; for a backend with a private CA pass "
                                 "--backend-ca-file"));
  }
  if (fetched->status != 200) {
    return Fail(core::BadRequest(
        fmt::format("GET {}: HTTP {} (is it the backend's /export URL?)", f.url, fetched->status)));
  }
  auto provider = bind::ParseBindingProvider(fetched->body, f.url);
  if (!provider.ok()) return Fail(provider.status());
  auto app = AppClient(f.common.app);
  if (!app.ok()) return Fail(app.status());
  // The name the backend shows for this cluster: --cluster-name, else the context in use.
  auto cluster_name = bind::ClusterNameToSend(f.cluster_name, (*app)->config().context_name);
  if (!cluster_name.ok()) return Fail(cluster_name.status());
  std::string cluster_id;
  if (f.common.dry_run) {
    auto ns =
        client::ResourceClient(**app, client::resources::kNamespaces).Get(bind::kBindNamespace);
    cluster_id = ns.ok() ? apis::klutch::ClusterIdFromNamespaceUid(machinery::Uid(*ns)) : "";
    if (cluster_id.empty()) {
      return Fail(core::BadRequest(
          "--dry-run needs namespace klutch-bind in the App Cluster (it identifies the cluster "
          "to the provider); run once without --dry-run, or create it"));
    }
  } else {
    auto uid = bind::EnsureBindNamespace(**app);
    if (!uid.ok()) return Fail(uid.status());
    cluster_id = apis::klutch::ClusterIdFromNamespaceUid(*uid);
  }
  std::string session_id = apis::klutch::NewSessionId();
  auto timeout = ParseTimeout(f.common.timeout);
  if (f.headless) {
    bind::ClaimAnswers answers;
    auto responses = DeviceLogin(**app, *provider, f, ca_pem, session_id, cluster_id, *cluster_name,
                                 timeout, answers);
    if (!responses.ok()) return Fail(responses.status());
    std::string user = bind::DisplayName(responses->front());
    std::cerr << "Logged in to " << (provider->pretty_name.empty() ? f.url : provider->pretty_name)
              << (user.empty() ? "" : " as " + user) << ".\n";
    // Every answer for every API before the first is bound: no half-bound cluster.
    std::vector<Json> all;
    for (const bind::BindingResponse& response : *responses) {
      all.insert(all.end(), response.requests.begin(), response.requests.end());
    }
    if (core::Status st = DecideRemainingClaims(**app, all, f.common, answers); !st.ok()) {
      return Fail(st);
    }
    for (const bind::BindingResponse& response : *responses) {
      core::Status st = CheckBindable(**app, response.kubeconfig, "", response.requests);
      if (!st.ok()) return Fail(st);
    }
    std::vector<std::string> bound;
    for (const bind::BindingResponse& response : *responses) {
      int code = BindRequests(**app, response.kubeconfig, "", "", response.requests, answers,
                              f.common, bound);
      if (code != 0) return code;
    }
    return ShowBindings(**app, bound, f.common);
  }
  if (provider->authenticated_url.empty()) {
    return Fail(core::BadRequest(
        "the backend offers no browser login; use --headless for its device-grant login"));
  }
  CallbackState state(session_id);
  auto server =
      http::Server::Start({.address = "127.0.0.1", .port = 0, .threads = 2, .io_threads = 1},
                          [&state](http::Request& r) { return state.Handle(r); });
  if (!server.ok()) return Fail(server.status());
  auto authorize = bind::AuthorizeUrl(provider->authenticated_url, (*server)->port(), session_id,
                                      cluster_id, *cluster_name);
  if (!authorize.ok()) return Fail(authorize.status());
  std::cerr << "To authenticate, visit in your browser:\n\n\t" << *authorize << "\n\n";
  if (!f.skip_browser) OpenBrowser(*authorize);
  bool tty = isatty(STDERR_FILENO);
  std::cerr << "Waiting for the login to finish (" << f.common.timeout
            << " at most; Ctrl-C to stop)" << (tty ? "" : "...\n") << std::flush;
  auto result = state.Wait(timeout, [&] {
    if (tty) std::cerr << "." << std::flush;
  });
  if (tty) std::cerr << "\n";
  (*server)->Drain(std::chrono::seconds(2));
  (*server)->Stop();
  if (!result) {
    return Fail(core::Status(core::Reason::kTimeout,
                             fmt::format("the login did not finish within {}; run kubectl bind "
                                         "again and complete it in the browser",
                                         f.common.timeout)));
  }
  if (!result->ok()) return Fail(result->status());
  const bind::BindingResponse& response = **result;
  std::string user = bind::DisplayName(response);
  std::cerr << "Logged in to " << (provider->pretty_name.empty() ? f.url : provider->pretty_name)
            << (user.empty() ? "" : " as " + user) << ".\n";
  bind::ClaimAnswers answers;
  if (core::Status st = DecideRemainingClaims(**app, response.requests, f.common, answers);
      !st.ok()) {
    return Fail(st);
  }
  if (core::Status st = CheckBindable(**app, response.kubeconfig, "", response.requests);
      !st.ok()) {
    return Fail(st);
  }
  std::vector<std::string> bound;
  int code =
      BindRequests(**app, response.kubeconfig, "", "", response.requests, answers, f.common, bound);
  return code != 0 ? code : ShowBindings(**app, bound, f.common);
}

core::Result<std::string> ReadSource(const std::string& source) {
  if (source == "-") {
    std::ostringstream text;
    text << std::cin.rdbuf();
    return text.str();
  }
  if (source.starts_with("http://") || source.starts_with("https://")) {
    KLUTCH_ASSIGN_OR_RETURN(http::Url url, http::ParseUrl(source));
    KLUTCH_ASSIGN_OR_RETURN(http::ClientResponse r, http::Fetch(url));
    if (r.status != 200) {
      return core::BadRequest(fmt::format("GET {}: HTTP {}", source, r.status));
    }
    return r.body;
  }
  auto text = core::ReadFile(source);
  if (!text.ok())
    return core::Status(text.status().reason(), source + ": " + text.status().message());
  return text;
}

int RunApiService(ApiServiceFlags& f) {
  if (f.url.empty() == f.file.empty()) {
    return Fail(core::BadRequest("give exactly one of a URL or -f FILE (- for stdin)"));
  }
  bool from_file = !f.remote_kubeconfig.empty();
  bool from_secret = !f.remote_kubeconfig_name.empty() || !f.remote_kubeconfig_namespace.empty();
  if (from_file == from_secret || (from_secret && (f.remote_kubeconfig_name.empty() ||
                                                   f.remote_kubeconfig_namespace.empty()))) {
    return Fail(core::BadRequest(
        "give the provider kubeconfig either as --remote-kubeconfig FILE or as "
        "--remote-kubeconfig-namespace NS --remote-kubeconfig-name NAME (a Secret in the App "
        "Cluster with key kubeconfig)"));
  }
  std::string source = f.file.empty() ? f.url : f.file;
  auto text = ReadSource(source);
  if (!text.ok()) return Fail(text.status());
  auto request = bind::ParseExportRequest(*text, source);
  if (!request.ok()) return Fail(request.status());
  auto app = AppClient(f.common.app);
  if (!app.ok()) return Fail(app.status());
  std::string kubeconfig;
  std::string secret_name;
  if (from_file) {
    auto read = core::ReadFile(f.remote_kubeconfig);
    if (!read.ok()) {
      return Fail(core::BadRequest("--remote-kubeconfig: " + read.status().message()));
    }
    kubeconfig = *read;
  } else {
    auto secret =
        client::ResourceClient(**app, client::resources::kSecrets, f.remote_kubeconfig_namespace)
            .Get(f.remote_kubeconfig_name);
    if (!secret.ok()) {
      return Fail(core::Status(
          secret.status().reason(),
          fmt::format("reading Secret {}/{} in the App Cluster: {}", f.remote_kubeconfig_namespace,
                      f.remote_kubeconfig_name, secret.status().message())));
    }
    auto decoded = core::Base64Decode(machinery::GetString(*secret, {"data", "kubeconfig"}));
    if (!decoded || decoded->empty()) {
      return Fail(
          core::BadRequest(fmt::format("Secret {}/{} has no key kubeconfig",
                                       f.remote_kubeconfig_namespace, f.remote_kubeconfig_name)));
    }
    kubeconfig = *decoded;
    if (f.remote_kubeconfig_namespace == bind::kBindNamespace)
      secret_name = f.remote_kubeconfig_name;
  }
  bind::ClaimAnswers answers;
  if (core::Status st = DecideRemainingClaims(**app, {*request}, f.common, answers); !st.ok()) {
    return Fail(st);
  }
  if (core::Status st = CheckBindable(**app, kubeconfig, secret_name, {*request}); !st.ok()) {
    return Fail(st);
  }
  std::vector<std::string> bound;
  int code = BindRequests(**app, kubeconfig, secret_name, f.remote_namespace, {*request}, answers,
                          f.common, bound);
  return code != 0 ? code : ShowBindings(**app, bound, f.common);
}

}  // namespace

int KubectlBindMain(int argc, char** argv) {
  CLI::App app(
      "Bind APIs of a service provider into the current cluster: log in to the provider's bind "
      "backend, pick the APIs, and kubectl bind stores the provider's credentials, installs "
      "the konnector and creates the APIServiceBindings that make the APIs usable here.",
      "kubectl bind");
  auto help = std::make_shared<KubectlHelp>();
  help->set_usage("<export URL> [options]");
  app.formatter(help);
  app.footer(
      "  # Log in to the provider's backend in a browser and bind the chosen API\n"
      "  kubectl bind https://backend.example.com/export\n\n"
      "  # Log in on another device (terminals, CI): print a code to enter there\n"
      "  kubectl bind https://backend.example.com/export --headless\n\n"
      "  # The same in CI: name the APIs to bind with that one login\n"
      "  kubectl bind https://backend.example.com/export --headless \\\n"
      "      --api postgresqlinstances.anynines.com --api servicebindings.anynines.com\n\n"
      "  # Show what would be created, without creating it\n"
      "  kubectl bind https://backend.example.com/export --dry-run -o yaml");
  BindFlags bind_flags;
  app.add_option("url", bind_flags.url, "The backend's export URL (http:// or https://).");
  AddCommonFlags(&app, bind_flags.common);
  app.add_flag("--skip-browser", bind_flags.skip_browser,
               "If true, only print the login URL instead of also opening a browser.")
      ->group("Options");
  app.add_flag("--headless", bind_flags.headless,
               "If true, log in with the device authorization grant: open the printed URL on "
               "any device and enter the code; no local browser or callback needed.")
      ->group("Options");
  app.add_option("--api", bind_flags.apis,
                 "With --headless: an API to bind, as <resource>.<group> (repeatable; without "
                 "it, choose from the backend's offer after the login).")
      ->group("Options");
  app.add_option("--cluster-name", bind_flags.cluster_name,
                 "The name the backend shows for this App Cluster on its /consumer page "
                 "(default: the kubeconfig context in use; \"\" sends none).")
      ->group("Options");
  app.add_option("--backend-ca-file", bind_flags.backend_ca_file,
                 "PEM file of the CA that signed the backend's certificate (default: the "
                 "system's CAs).")
      ->group("Options");
  app.require_subcommand(0, 1);

  ApiServiceFlags api_flags;
  CLI::App* apiservice = app.add_subcommand(
      "apiservice",
      "Bind the APIs an APIServiceExportRequest names, using a provider kubeconfig: what a "
      "platform operator scripts instead of the browser login.");
  auto api_help = std::make_shared<KubectlHelp>();
  api_help->set_usage(
      "apiservice (-f FILE | URL) (--remote-kubeconfig FILE | "
      "--remote-kubeconfig-namespace NS --remote-kubeconfig-name NAME) "
      "[options]");
  apiservice->formatter(api_help);
  apiservice->footer(
      "  # Bind PostgreSQL instances with a kubeconfig the provider handed out\n"
      "  kubectl bind apiservice --remote-kubeconfig provider.kubeconfig -f request.yaml \\\n"
      "      --accept-permission-claims");
  apiservice->add_option("url", api_flags.url, "URL of the APIServiceExportRequest manifest.");
  apiservice
      ->add_option("-f,--file", api_flags.file,
                   "File of the APIServiceExportRequest manifest (- for stdin).")
      ->group("Options");
  apiservice
      ->add_option("--remote-kubeconfig", api_flags.remote_kubeconfig,
                   "The provider kubeconfig file.")
      ->group("Options");
  apiservice
      ->add_option("--remote-kubeconfig-namespace", api_flags.remote_kubeconfig_namespace,
                   "Namespace of a Secret in the App Cluster holding the provider "
                   "kubeconfig (key kubeconfig).")
      ->group("Options");
  apiservice
      ->add_option("--remote-kubeconfig-name", api_flags.remote_kubeconfig_name,
                   "Name of that Secret.")
      ->group("Options");
  apiservice
      ->add_option("--remote-namespace", api_flags.remote_namespace,
                   "The consumer's namespace on the provider (default: the provider "
                   "kubeconfig's context namespace).")
      ->group("Options");
  AddCommonFlags(apiservice, api_flags.common);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      std::cout << (apiservice->parsed() ? apiservice->help() : app.help());
      return 0;
    }
    std::cerr << "error: " << e.what() << "\nSee 'kubectl bind --help' for usage.\n";
    return 1;
  }
  if (apiservice->parsed()) return RunApiService(api_flags);
  if (bind_flags.url.empty()) {
    std::cerr << "error: the backend's export URL is missing\nSee 'kubectl bind --help' for "
                 "usage.\n";
    return 1;
  }
  if (!bind_flags.url.starts_with("http://") && !bind_flags.url.starts_with("https://")) {
    std::cerr << "error: " << core::GoQuote(bind_flags.url)
              << " is neither a URL (http:// or https://) nor a command\nSee 'kubectl bind "
                 "--help' for usage.\n";
    return 1;
  }
  return RunBind(bind_flags);
}

}  // namespace klutch::cli
