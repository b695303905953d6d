#include "kubectl_bind/bindings.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>
#include <set>
#include <thread>

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "core/clock.h"
#include "core/strings.h"
#include "kubectl_bind/konnector_install.h"
#include "machinery/object.h"
#include "reconcile/conditions.h"

namespace klutch::kubectl_bind {

using client::ResourceClient;
namespace resources = client::resources;

// The Ready message of a binding the konnector has not reported on yet (the CLI writes it).
constexpr char kPendingMessage[] = "Waiting for the konnector to pick this binding up";

namespace {

// "secrets", "widgets.example.com": the claimed resource as kubectl names it.
std::string ClaimTarget(const ClaimQuestion& q) {
  return q.group.empty() ? q.resource : q.resource + "." + q.group;
}

ClaimQuestion QuestionOf(const std::string& binding, const Json& claim) {
  ClaimQuestion q;
  q.binding = binding;
  q.group = machinery::GetString(claim, {"group"});
  q.resource = machinery::GetString(claim, {"resource"});
  q.owner = machinery::GetString(claim, {"selector", "owner"});
  if (const Json* req = machinery::Find(claim, {"required"}); req != nullptr) {
    const bool* b = req->get_ptr<const bool*>();
    q.required = b != nullptr && *b;
  }
  return q;
}

// y/yes -> true, n/no -> false (any case, surrounding blanks ignored), else nullopt.
std::optional<bool> ParseYesNo(const std::string& answer) {
  std::string a = core::ToLower(core::Trim(answer));
  if (a == "y" || a == "yes") return true;
  if (a == "n" || a == "no") return false;
  return std::nullopt;
}

// The APIServiceBinding of an API ({group, resource, ...}).
std::string BindingNameOf(const Json& api) {
  return apis::klutch::BindingName(machinery::GetString(api, {"group"}),
                                   machinery::GetString(api, {"resource"}));
}

}  // namespace

std::string ClaimQuestion::Text() const {
  return fmt::format("The provider wants to {} {} {} in your cluster{}",
                     owner == "Consumer" ? "read and update" : "create and update",
                     ClaimTarget(*this),
                     owner == "Consumer" ? "objects you create" : "objects it provides",
                     required ? " (required for the API to work)" : "");
}

std::string ClaimAnswers::Key(const std::string& binding, const std::string& group,
                              const std::string& resource) {
  return binding + "|" + group + "|" + resource;
}

std::optional<bool> ClaimAnswers::Find(const std::string& binding, const std::string& group,
                                       const std::string& resource) const {
  if (accept_all) return true;
  auto it = given.find(Key(binding, group, resource));
  if (it == given.end()) return std::nullopt;
  return it->second;
}

std::vector<Json> RequestedApis(const std::vector<Json>& requests) {
  std::vector<Json> apis;
  for (const Json& request : requests) {
    const Json* list = machinery::Find(request, {"spec", "resources"});
    if (list == nullptr || !list->is_array()) continue;
    for (const Json& r : *list) apis.push_back(r);
  }
  return apis;
}

core::Result<std::vector<ClaimQuestion>> ClaimQuestions(client::RestClient& app,
                                                        const std::vector<Json>& apis) {
  ResourceClient bindings(app, apis::klutch::kApiServiceBindings, apis::klutch::kBindNamespace);
  std::vector<ClaimQuestion> questions;
  std::set<std::string> seen;
  for (const Json& api : apis) {
    std::string name = BindingNameOf(api);
    const Json* claims = machinery::Find(api, {"permissionClaims"});
    if (claims == nullptr || !claims->is_array() || claims->empty()) continue;
    auto existing = bindings.Get(name);
    if (existing.ok()) continue;
    // NotFound covers a missing CRD too (nothing bound in this cluster yet).
    if (!core::IsNotFound(existing.status())) {
      return WithHint(existing.status(), "reading APIServiceBinding " + name, "");
    }
    for (const Json& claim : *claims) {
      ClaimQuestion q = QuestionOf(name, claim);
      if (seen.insert(ClaimAnswers::Key(q.binding, q.group, q.resource)).second) {
        questions.push_back(std::move(q));
      }
    }
  }
  return questions;
}

core::Result<ClaimAnswers> DecideClaims(const std::vector<ClaimQuestion>& questions,
                                        bool accept_all, const BindOutput& out) {
  ClaimAnswers answers;
  answers.accept_all = accept_all;
  if (accept_all) return answers;
  for (size_t i = 0; i < questions.size(); ++i) {
    const ClaimQuestion& q = questions[i];
    std::optional<bool> yes;
    while (!yes) {
      std::optional<std::string> answer =
          out.ask ? out.ask(fmt::format("{}: {}. Accept? [y/n]: ", q.binding, q.Text()))
                  : std::nullopt;
      if (!answer) {
        std::string list;
        for (size_t j = 0; j < questions.size(); ++j) {
          list += fmt::format("\n  {}. {}: {}", j + 1, questions[j].binding, questions[j].Text());
        }
        return core::BadRequest(fmt::format(
            "kubectl bind needs your answer to {} permission claim{}, and there is no "
            "terminal to ask; nothing was bound:{}\n  re-run with --accept-permission-claims "
            "to accept them all, or in a terminal to answer each",
            questions.size(), questions.size() == 1 ? "" : "s", list));
      }
      yes = ParseYesNo(*answer);
    }
    answers.given[ClaimAnswers::Key(q.binding, q.group, q.resource)] = *yes;
  }
  return answers;
}

core::Status CheckBindable(client::RestClient& app, const std::vector<Json>& apis,
                           const std::string& secret_name) {
  ResourceClient bindings(app, apis::klutch::kApiServiceBindings, apis::klutch::kBindNamespace);
  std::vector<std::string> problems;
  for (const Json& api : apis) {
    std::string name = BindingNameOf(api);
    const Json* claims = machinery::Find(api, {"permissionClaims"});
    core::Status grantable = CheckGrantable(machinery::GetString(api, {"group"}),
                                            machinery::GetString(api, {"resource"}),
                                            claims != nullptr ? *claims : Json::array());
    if (!grantable.ok()) problems.push_back(name + ": " + grantable.message());
    auto existing = bindings.Get(name);
    if (!existing.ok()) {
      if (!core::IsNotFound(existing.status())) {
        return WithHint(existing.status(), "reading APIServiceBinding " + name, "");
      }
      continue;
    }
    std::string ref_name = machinery::GetString(*existing, {"spec", "kubeconfigSecretRef", "name"});
    std::string ref_ns =
        machinery::GetString(*existing, {"spec", "kubeconfigSecretRef", "namespace"});
    if (secret_name.empty() || ref_name != secret_name || ref_ns != apis::klutch::kBindNamespace) {
      problems.push_back(
          fmt::format("{}: already bound from another service provider (secret {}/{}); delete "
                      "APIServiceBinding {} first if you mean to switch providers",
                      name, ref_ns, ref_name, name));
    }
  }
  if (problems.empty()) return core::Status::Ok();
  std::string list;
  for (size_t i = 0; i < problems.size(); ++i) {
    list += fmt::format("\n  {}. {}", i + 1, problems[i]);
  }
  bool forbidden = std::any_of(problems.begin(), problems.end(), [](const std::string& p) {
    return p.find("grants it custom resources") != std::string::npos;
  });
  return core::Status(forbidden ? core::Reason::kForbidden : core::Reason::kAlreadyExists,
                      "kubectl bind cannot bind every API asked for, so it binds none:" + list);
}

namespace {

// An existing binding `name` may be bound again only from the same Secret, and its CRD, when
// present, must be the binding's own.
core::Status CheckRebind(const ResourceClient& crds, const Json& existing, const std::string& name,
                         const std::string& secret_name) {
  std::string ref_name = machinery::GetString(existing, {"spec", "kubeconfigSecretRef", "name"});
  std::string ref_ns = machinery::GetString(existing, {"spec", "kubeconfigSecretRef", "namespace"});
  if (ref_name != secret_name || ref_ns != apis::klutch::kBindNamespace) {
    return core::AlreadyExists(
        fmt::format("APIServiceBinding {} already binds {} from another service provider (secret "
                    "{}/{}); delete it first if you mean to switch providers",
                    name, name, ref_ns, ref_name));
  }
  auto crd = crds.Get(name);
  if (!crd.ok()) return core::Status::Ok();
  const Json* owners = machinery::Find(*crd, {"metadata", "ownerReferences"});
  if (owners != nullptr && owners->is_array()) {
    for (const Json& o : *owners) {
      if (machinery::GetString(o, {"kind"}) == "APIServiceBinding" &&
          machinery::GetString(o, {"name"}) == name &&
          machinery::GetString(o, {"uid"}) == machinery::Uid(existing)) {
        return core::Status::Ok();
      }
    }
  }
  return core::AlreadyExists(
      fmt::format("CustomResourceDefinition {} exists in the App Cluster but was not created by "
                  "binding {}; remove it (and its objects) before binding this API",
                  name, name));
}

// `claims` with each one's state from `answers`; a claim they do not answer is asked through
// out.ask (kBadRequest when no one can answer).
core::Result<Json> DecidedClaims(const std::string& name, const Json& claims,
                                 const ClaimAnswers& answers, const BindOutput& out) {
  Json accepted = Json::array();
  for (const Json& claim : claims) {
    Json c = claim;
    ClaimQuestion question = QuestionOf(name, claim);
    std::optional<bool> yes = answers.Find(name, question.group, question.resource);
    while (!yes) {
      // Not decided beforehand (the provider's answer added a claim): ask now.
      std::optional<std::string> answer =
          out.ask ? out.ask(question.Text() + ". Accept? [y/n]: ") : std::nullopt;
      if (!answer) {
        return core::BadRequest(fmt::format(
            "binding {} asks to accept a permission claim on {}, and there is no terminal "
            "to ask; re-run with --accept-permission-claims to accept them",
            name, ClaimTarget(question)));
      }
      yes = ParseYesNo(*answer);
    }
    c["state"] = *yes ? "Accepted" : "Rejected";
    accepted.push_back(std::move(c));
  }
  return accepted;
}

}  // namespace

core::Result<std::vector<std::string>> CreateBindings(
    client::RestClient& app, const Json& export_request, const std::string& secret_name,
    const ClaimAnswers& answers, bool dry_run, std::vector<Json>* printed, const BindOutput& out) {
  ResourceClient bindings(app, apis::klutch::kApiServiceBindings, apis::klutch::kBindNamespace);
  ResourceClient crds(app, resources::kCustomResourceDefinitions);
  std::vector<std::string> names;
  const Json* list = machinery::Find(export_request, {"spec", "resources"});
  if (list == nullptr || !list->is_array()) return names;
  for (const Json& r : *list) {
    std::string group = machinery::GetString(r, {"group"});
    std::string resource = machinery::GetString(r, {"resource"});
    std::string name = apis::klutch::BindingName(group, resource);
    Json claims = r.contains("permissionClaims") && r["permissionClaims"].is_array()
                      ? r["permissionClaims"]
                      : Json::array();
    auto existing = bindings.Get(name);
    if (existing.ok()) {
      KLUTCH_RETURN_IF_ERROR(CheckRebind(crds, *existing, name, secret_name));
      Say(out, fmt::format("Updating APIServiceBinding {}.", name));
      names.push_back(name);
      continue;
    }
    if (!core::IsNotFound(existing.status())) {
      return WithHint(existing.status(), "reading APIServiceBinding " + name, "");
    }
    KLUTCH_ASSIGN_OR_RETURN(Json accepted, DecidedClaims(name, claims, answers, out));
    Json binding = {{"apiVersion", apis::klutch::kApiVersion},
                    {"kind", "APIServiceBinding"},
                    {"metadata", {{"name", name}, {"namespace", apis::klutch::kBindNamespace}}},
                    {"spec",
                     {{"kubeconfigSecretRef",
                       {{"name", secret_name},
                        {"key", apis::klutch::kKubeconfigKey},
                        {"namespace", apis::klutch::kBindNamespace}}},
                      {"permissionClaims", accepted}}}};
    if (dry_run) {
      if (printed != nullptr) printed->push_back(binding);
      names.push_back(name);
      continue;
    }
    auto created = bindings.Create(binding);
    if (!created.ok()) return WithHint(created.status(), "creating APIServiceBinding " + name, "");
    // Best effort, as upstream: shows Pending until the konnector's first pass replaces it.
    Json status = *created;
    reconcile::MarkFalse(status, "Ready", "Pending", "Info", kPendingMessage,
                         core::RealClock::Get());
    (void)bindings.UpdateStatus(status);
    Say(out, fmt::format("Created APIServiceBinding {}.", name));
    names.push_back(name);
  }
  return names;
}

core::Result<std::vector<std::string>> WaitForBindingsReady(client::RestClient& app,
                                                            const std::vector<std::string>& names,
                                                            std::chrono::milliseconds timeout,
                                                            const BindOutput& out) {
  ResourceClient bindings(app, apis::klutch::kApiServiceBindings, apis::klutch::kBindNamespace);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool waited = false;
  int polls = 0;
  while (true) {
    std::vector<std::string> waiting;
    for (const std::string& name : names) {
      auto binding = bindings.Get(name);
      if (!binding.ok()) {
        waiting.push_back(
            fmt::format("APIServiceBinding {}: {}", name, binding.status().message()));
        continue;
      }
      auto ready = reconcile::FindCondition(*binding, "Ready");
      std::string provider = machinery::GetString(*binding, {"status", "providerPrettyName"});
      if (ready && ready->status == "True") {
        if (!provider.empty()) continue;
        waiting.push_back(fmt::format(
            "APIServiceBinding {} is Ready; the konnector has not reported its provider's name "
            "yet",
            name));
        continue;
      }
      if (!ready || ready->message == kPendingMessage) {
        waiting.push_back(fmt::format(
            "APIServiceBinding {} waits for the konnector to pick it up; check the konnector "
            "with: kubectl -n {} get deployment konnector; kubectl -n {} logs "
            "deployment/konnector",
            name, apis::klutch::kBindNamespace, apis::klutch::kBindNamespace));
        continue;
      }
      waiting.push_back(fmt::format(
          "APIServiceBinding {} is not Ready yet: {}; follow it with: kubectl -n {} get "
          "apiservicebindings -w",
          name, ready->message.empty() ? "the konnector gives no reason" : ready->message,
          apis::klutch::kBindNamespace));
    }
    if (waiting.empty() || std::chrono::steady_clock::now() >= deadline) {
      if (waited && out.err != nullptr) *out.err << (waiting.empty() ? " ready.\n" : "\n");
      return waiting;
    }
    if (!waited && out.err != nullptr) {
      *out.err << "Waiting for the konnector to report the bindings Ready" << std::flush;
    }
    waited = true;
    if (out.err != nullptr && polls++ % 5 == 0) *out.err << "." << std::flush;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace klutch::kubectl_bind
