// kubectl-bind: the flags and the wiring of the steps in src/kubectl_bind/.
#include "cli/kubectl_bind.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>
#include <sstream>

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/ids.h"
#include "client/dynamic.h"
#include "client/kubeconfig.h"
#include "core/duration.h"
#include "core/file.h"
#include "core/strings.h"
#include "http/url.h"
#include "kubectl_bind/bind_flow.h"
#include "kubectl_bind/browser_login.h"
#include "kubectl_bind/device_login.h"
#include "kubectl_bind/export_request.h"
#include "kubectl_bind/konnector_install.h"
#include "kubectl_bind/output.h"
#include "kubectl_bind/provider_discovery.h"
#include "kubectl_bind/session.h"
#include "machinery/object.h"

namespace klutch::cli {
namespace {

using kubectl_bind::BindOutput;
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
            auto at = kubectl_bind::KonnectorImageAt(v);
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
  config->user_agent = "kubectl-bind/" + std::string(kubectl_bind::kCliVersion);
  return client::RestClient::New(*config);
}

kubectl_bind::BindOptions Options(const CommonFlags& f) {
  return {.dry_run = f.dry_run,
          .output = f.output,
          .skip_konnector = f.skip_konnector,
          .konnector_image = f.konnector_image,
          .konnector_version = f.konnector_version,
          .accept_claims = f.accept_claims,
          .timeout = ParseTimeout(f.timeout),
          .ready_timeout = ParseDuration(f.ready_timeout, {})};
}

// Logs in (device grant with --headless, else the browser) and binds what the login names.
int RunBind(BindFlags& f) {
  BindOutput out = Output();
  // A bad --cluster-name is refused before anything is fetched or written.
  if (auto checked = kubectl_bind::ClusterNameToSend(f.cluster_name, ""); !checked.ok()) {
    return Fail(checked.status());
  }
  if (auto url = http::ParseUrl(f.url); !url.ok()) return Fail(url.status());
  std::string ca_pem;
  if (!f.backend_ca_file.empty()) {
    auto pem = core::ReadFile(f.backend_ca_file);
    if (!pem.ok()) return Fail(core::BadRequest("--backend-ca-file: " + pem.status().message()));
    ca_pem = *pem;
  }
  auto provider = kubectl_bind::FetchBindingProvider(f.url, ca_pem);
  if (!provider.ok()) return Fail(provider.status());
  auto app = AppClient(f.common.app);
  if (!app.ok()) return Fail(app.status());
  // The name the backend shows for this cluster: --cluster-name, else the context in use.
  auto cluster_name =
      kubectl_bind::ClusterNameToSend(f.cluster_name, (*app)->config().context_name);
  if (!cluster_name.ok()) return Fail(cluster_name.status());
  auto cluster_id = kubectl_bind::ClusterId(**app, f.common.dry_run);
  if (!cluster_id.ok()) return Fail(cluster_id.status());
  const std::string session_id = apis::klutch::NewSessionId();
  const kubectl_bind::BindOptions options = Options(f.common);
  std::vector<kubectl_bind::BindingResponse> responses;
  kubectl_bind::ClaimAnswers answers;
  if (f.headless) {
    auto logged_in = kubectl_bind::DeviceLogin(**app, *provider,
                                               {.session_id = session_id,
                                                .cluster_id = *cluster_id,
                                                .cluster_name = *cluster_name,
                                                .apis = f.apis,
                                                .accept_claims = f.common.accept_claims,
                                                .ca_pem = ca_pem,
                                                .timeout = options.timeout,
                                                .timeout_text = f.common.timeout},
                                               answers, out);
    if (!logged_in.ok()) return Fail(logged_in.status());
    responses = std::move(*logged_in);
  } else {
    auto logged_in = kubectl_bind::BrowserLogin(*provider, {.session_id = session_id,
                                                            .cluster_id = *cluster_id,
                                                            .cluster_name = *cluster_name,
                                                            .timeout = options.timeout,
                                                            .timeout_text = f.common.timeout,
                                                            .open_browser = !f.skip_browser});
    if (!logged_in.ok()) return Fail(logged_in.status());
    responses.push_back(std::move(*logged_in));
  }
  std::string user = kubectl_bind::DisplayName(responses.front());
  std::cerr << "Logged in to " << (provider->pretty_name.empty() ? f.url : provider->pretty_name)
            << (user.empty() ? "" : " as " + user) << ".\n";
  // Every answer for every API before the first is bound: no half-bound cluster.
  std::vector<Json> all;
  for (const kubectl_bind::BindingResponse& response : responses) {
    all.insert(all.end(), response.requests.begin(), response.requests.end());
  }
  if (core::Status st =
          kubectl_bind::DecideRemainingClaims(**app, all, f.common.accept_claims, answers, out);
      !st.ok()) {
    return Fail(st);
  }
  for (const kubectl_bind::BindingResponse& response : responses) {
    core::Status st = kubectl_bind::CheckBindableFrom(**app, {.kubeconfig = response.kubeconfig},
                                                      response.requests);
    if (!st.ok()) return Fail(st);
  }
  std::vector<std::string> bound;
  for (const kubectl_bind::BindingResponse& response : responses) {
    core::Status st = kubectl_bind::BindRequests(**app, {.kubeconfig = response.kubeconfig},
                                                 response.requests, answers, options, out, bound);
    if (!st.ok()) return Fail(st);
  }
  kubectl_bind::ShowBindings(**app, bound, options, out);
  return 0;
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
  auto request = kubectl_bind::ParseExportRequest(*text, source);
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
    if (f.remote_kubeconfig_namespace == apis::klutch::kBindNamespace)
      secret_name = f.remote_kubeconfig_name;
  }
  BindOutput out = Output();
  kubectl_bind::ClaimAnswers answers;
  if (core::Status st = kubectl_bind::DecideRemainingClaims(**app, {*request},
                                                            f.common.accept_claims, answers, out);
      !st.ok()) {
    return Fail(st);
  }
  const kubectl_bind::ProviderAccess access{
      .kubeconfig = kubeconfig, .secret_hint = secret_name, .remote_namespace = f.remote_namespace};
  if (core::Status st = kubectl_bind::CheckBindableFrom(**app, access, {*request}); !st.ok()) {
    return Fail(st);
  }
  const kubectl_bind::BindOptions options = Options(f.common);
  std::vector<std::string> bound;
  core::Status st =
      kubectl_bind::BindRequests(**app, access, {*request}, answers, options, out, bound);
  if (!st.ok()) return Fail(st);
  kubectl_bind::ShowBindings(**app, bound, options, out);
  return 0;
}

// `kubectl bind apiservice` and its flags, into `f`.
CLI::App* AddApiServiceCommand(CLI::App& app, ApiServiceFlags& f) {
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
  apiservice->add_option("url", f.url, "URL of the APIServiceExportRequest manifest.");
  apiservice
      ->add_option("-f,--file", f.file,
                   "File of the APIServiceExportRequest manifest (- for stdin).")
      ->group("Options");
  apiservice
      ->add_option("--remote-kubeconfig", f.remote_kubeconfig, "The provider kubeconfig file.")
      ->group("Options");
  apiservice
      ->add_option("--remote-kubeconfig-namespace", f.remote_kubeconfig_namespace,
                   "Namespace of a Secret in the App Cluster holding the provider "
                   "kubeconfig (key kubeconfig).")
      ->group("Options");
  apiservice
      ->add_option("--remote-kubeconfig-name", f.remote_kubeconfig_name, "Name of that Secret.")
      ->group("Options");
  apiservice
      ->add_option("--remote-namespace", f.remote_namespace,
                   "The consumer's namespace on the provider (default: the provider "
                   "kubeconfig's context namespace).")
      ->group("Options");
  AddCommonFlags(apiservice, f.common);
  return apiservice;
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
  CLI::App* apiservice = AddApiServiceCommand(app, api_flags);

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
