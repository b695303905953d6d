#include "kubectl_bind/bind_flow.h"

#include <iostream>

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "kubectl_bind/export_request.h"
#include "kubectl_bind/konnector_install.h"
#include "kubectl_bind/provider_kubeconfig.h"
#include "kubectl_bind/session.h"
#include "kubectl_bind/status_table.h"
#include "machinery/json.h"
#include "machinery/object.h"

namespace klutch::kubectl_bind {

core::Status DecideRemainingClaims(client::RestClient& app, const std::vector<Json>& requests,
                                   bool accept_claims, ClaimAnswers& answers,
                                   const BindOutput& out) {
  KLUTCH_ASSIGN_OR_RETURN(auto questions, ClaimQuestions(app, RequestedApis(requests)));
  std::erase_if(questions, [&](const ClaimQuestion& q) {
    return answers.Find(q.binding, q.group, q.resource).has_value();
  });
  KLUTCH_ASSIGN_OR_RETURN(ClaimAnswers more, DecideClaims(questions, accept_claims, out));
  answers.accept_all = answers.accept_all || more.accept_all;
  answers.given.merge(more.given);
  return core::Status::Ok();
}

core::Status CheckBindableFrom(client::RestClient& app, const ProviderAccess& provider,
                               const std::vector<Json>& requests) {
  std::string secret = provider.secret_hint;
  if (secret.empty()) {
    KLUTCH_ASSIGN_OR_RETURN(secret, StoreProviderKubeconfig(app, provider.kubeconfig,
                                                            /*dry_run=*/true, {}));
  }
  return CheckBindable(app, RequestedApis(requests), secret);
}

namespace {

void PrintObjects(const std::vector<Json>& objects, const std::string& format) {
  Json list = {
      {"apiVersion", "v1"}, {"kind", "List"}, {"items", objects}, {"metadata", Json::object()}};
  if (format == "json") {
    std::cout << list.dump(4, ' ', false, Json::error_handler_t::replace) << "\n";
  } else {
    std::cout << machinery::ToYaml(list);
  }
}

// The konnector installed (unless skipped and no image asked for) and, for real, ready.
core::Status EnsureKonnector(client::RestClient& app, const BindOptions& options,
                             std::vector<Json>& printed, const BindOutput& out) {
  std::string image = options.konnector_image;
  if (!options.konnector_version.empty()) {
    // Checked when the flags were parsed.
    KLUTCH_ASSIGN_OR_RETURN(image, KonnectorImageAt(options.konnector_version));
  }
  if (!options.skip_konnector || !image.empty()) {
    KLUTCH_RETURN_IF_ERROR(InstallKonnector(
        app,
        {.image = image, .force = !image.empty(), .dry_run = options.dry_run, .printed = &printed},
        out));
  }
  if (options.dry_run) return core::Status::Ok();
  return WaitForBindingCrd(app, options.timeout, out);
}

// Grants the konnector each bound resource of `accepted` (export requests) and the claims
// accepted on its binding (in a dry run: the claims asked for).
core::Status GrantAccepted(client::RestClient& app, const std::vector<Json>& accepted, bool dry_run,
                           const BindOutput& out) {
  for (const Json& request : accepted) {
    const Json* list = machinery::Find(request, {"spec", "resources"});
    if (list == nullptr || !list->is_array()) continue;
    for (const Json& r : *list) {
      std::string group = machinery::GetString(r, {"group"});
      std::string resource = machinery::GetString(r, {"resource"});
      Json claims = Json::array();
      if (dry_run) {
        if (const Json* c = machinery::Find(r, {"permissionClaims"}); c != nullptr) claims = *c;
      } else {
        auto binding = client::ResourceClient(app, apis::klutch::kApiServiceBindings,
                                              apis::klutch::kBindNamespace)
                           .Get(apis::klutch::BindingName(group, resource));
        const Json* c =
            binding.ok() ? machinery::Find(*binding, {"spec", "permissionClaims"}) : nullptr;
        if (c != nullptr && c->is_array()) {
          for (const Json& claim : *c) {
            if (machinery::GetString(claim, {"state"}) == "Accepted") claims.push_back(claim);
          }
        }
      }
      KLUTCH_RETURN_IF_ERROR(GrantBoundResource(app, group, resource, claims, dry_run, out));
    }
  }
  return core::Status::Ok();
}

}  // namespace

core::Status BindRequests(client::RestClient& app, const ProviderAccess& provider,
                          std::vector<Json> requests, const ClaimAnswers& answers,
                          const BindOptions& options, const BindOutput& out,
                          std::vector<std::string>& bound) {
  auto target = ReadProviderKubeconfig(provider.kubeconfig);
  if (!target.ok() && provider.remote_namespace.empty()) return target.status();
  std::string cluster_namespace =
      provider.remote_namespace.empty() ? target->cluster_namespace : provider.remote_namespace;
  KLUTCH_ASSIGN_OR_RETURN(auto provider_client,
                          ProviderClient(provider.kubeconfig, cluster_namespace));
  std::vector<Json> printed;
  if (options.dry_run) {
    for (Json& r : requests) {
      machinery::MutableMetadata(r)["namespace"] = cluster_namespace;
      printed.push_back(r);
    }
  }
  if (!options.dry_run) KLUTCH_RETURN_IF_ERROR(EnsureBindNamespace(app).status());
  std::string secret = provider.secret_hint;
  if (secret.empty()) {
    KLUTCH_ASSIGN_OR_RETURN(std::string stored, StoreProviderKubeconfig(app, provider.kubeconfig,
                                                                        options.dry_run, out));
    secret = stored.empty() ? "kubeconfig-<generated>" : stored;
  }
  std::vector<Json> accepted;
  for (Json& request : requests) {
    if (options.dry_run) {
      accepted.push_back(request);
      continue;
    }
    KLUTCH_ASSIGN_OR_RETURN(Json done, CreateExportRequest(*provider_client, cluster_namespace,
                                                           request, options.timeout, out));
    accepted.push_back(std::move(done));
  }
  KLUTCH_RETURN_IF_ERROR(EnsureKonnector(app, options, printed, out));
  std::vector<std::string> names;
  for (const Json& request : accepted) {
    KLUTCH_ASSIGN_OR_RETURN(
        auto made, CreateBindings(app, request, secret, answers, options.dry_run, &printed, out));
    names.insert(names.end(), made.begin(), made.end());
  }
  // Only now, with the user's answers stored on the bindings, may the konnector sync what
  // they accepted: the bound resources and the claims marked Accepted.
  KLUTCH_RETURN_IF_ERROR(GrantAccepted(app, accepted, options.dry_run, out));
  if (options.dry_run) PrintObjects(printed, options.output);
  bound.insert(bound.end(), names.begin(), names.end());
  return core::Status::Ok();
}

void ShowBindings(client::RestClient& app, const std::vector<std::string>& names,
                  const BindOptions& options, const BindOutput& out) {
  if (options.dry_run || names.empty()) return;
  auto waited = WaitForBindingsReady(app, names, options.ready_timeout, out);
  auto table = BindingsTable(app, names);
  if (table.ok()) std::cout << *table;
  if (waited.ok()) {
    for (const std::string& line : *waited) std::cerr << line << "\n";
  }
}

}  // namespace klutch::kubectl_bind
