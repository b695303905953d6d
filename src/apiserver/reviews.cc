#include "apiserver/reviews.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/clock.h"
#include "machinery/object.h"
#include "machinery/validation.h"

namespace klutch::apiserver {

namespace {

using machinery::Find;
using machinery::GetString;
using machinery::Strings;

// The echoed object kube-apiserver answers with: the request's metadata (with a null
// creationTimestamp, as these objects are never stored) and spec, plus a status.
Json Echo(const Json& body, Json status) {
  Json out = body;
  Json& meta = out["metadata"];
  if (!meta.is_object()) meta = Json::object();
  meta["creationTimestamp"] = nullptr;
  if (!out.contains("spec") || !out["spec"].is_object()) out["spec"] = Json::object();
  out["status"] = std::move(status);
  return out;
}

// spec.resourceAttributes / spec.nonResourceAttributes -> attributes, validated as kube does.
auth::Attributes AccessAttributes(const Json& spec, std::vector<core::Cause>& causes) {
  const Json* res = Find(spec, {"resourceAttributes"});
  const Json* nonres = Find(spec, {"nonResourceAttributes"});
  const bool has_res = res && res->is_object();
  const bool has_nonres = nonres && nonres->is_object();
  auth::Attributes a;
  if (has_res == has_nonres) {
    causes.push_back(machinery::FieldInvalid(
        "spec.resourceAttributes", has_res ? *res : Json(nullptr),
        "exactly one of nonResourceAttributes or resourceAttributes must be specified"));
    return a;
  }
  if (has_res) {
    a.resource_request = true;
    a.ns = GetString(*res, {"namespace"});
    a.verb = GetString(*res, {"verb"});
    a.api_group = GetString(*res, {"group"});
    a.api_version = GetString(*res, {"version"});
    a.resource = GetString(*res, {"resource"});
    a.subresource = GetString(*res, {"subresource"});
    a.name = GetString(*res, {"name"});
  } else {
    a.resource_request = false;
    a.verb = GetString(*nonres, {"verb"});
    a.path = GetString(*nonres, {"path"});
  }
  return a;
}

Json AccessStatus(const auth::Decision& d) {
  Json status = {{"allowed", d.allowed}};
  if (!d.reason.empty()) status["reason"] = d.reason;
  return status;
}

core::Status Invalid(const ResourceInfo& r, const std::vector<core::Cause>& causes) {
  return machinery::InvalidObject(r.group, r.kind, "", causes);
}

}  // namespace

core::Result<Json> CreateReview(const ResourceInfo& r, std::string_view ns, Json body,
                                const Caller& caller, AccessControl& access) {
  KLUTCH_RETURN_IF_ERROR(CheckTypeMeta({r.group, r.version, r.kind}, body));
  const Json spec = body.value("spec", Json::object());
  std::vector<core::Cause> causes;

  if (r.kind == "SelfSubjectReview") {
    return Echo(body, Json{{"userInfo", UserInfoJson(caller.user)}});
  }

  if (r.kind == "TokenReview") {
    std::string token = GetString(spec, {"token"});
    if (token.empty()) {
      causes.push_back(machinery::FieldRequired("spec.token", ""));
      return Invalid(r, causes);
    }
    // The audiences the review asks about (default: the API server's). The answer names
    // those the token is valid for: a bound service-account token's aud among them, or for
    // every other token (static, legacy, OIDC) the API audiences among them.
    const auto& own = access.tokens().api_audiences();
    std::vector<std::string> wanted = Strings(Find(spec, {"audiences"}));
    if (wanted.empty()) wanted = own;
    std::vector<std::string> own_wanted;
    for (const auto& w : wanted) {
      if (std::find(own.begin(), own.end(), w) != own.end()) own_wanted.push_back(w);
    }
    std::optional<auth::TokenResult> result;
    auto sa = access.tokens().AuthenticateFor(token, wanted);
    if (sa.ok() && sa->has_value()) {
      result = std::move(**sa);
      auth::AddAuthenticatedGroup(result->user);
    } else if (sa.ok() && !own_wanted.empty()) {
      // Not a service-account token: the other authenticators, which serve the API audiences.
      auto other = access.authenticator().AuthenticateToken(token);
      if (other.ok()) {
        result = std::move(*other);
        result->audiences = own_wanted;
      }
    }
    Json status;
    if (result && !result->audiences.empty()) {
      status = {{"authenticated", true},
                {"user", UserInfoJson(result->user)},
                {"audiences", result->audiences}};
    } else {
      // kube omits `authenticated` when false (omitempty).
      status = {{"user", Json::object()},
                {"error", "the token is not valid for this server or audience"}};
    }
    return Echo(body, std::move(status));
  }

  if (r.kind == "SelfSubjectRulesReview") {
    std::string rules_ns = GetString(spec, {"namespace"});
    Json resource_rules = Json::array();
    Json non_resource_rules = Json::array();
    for (const auto& rule : access.RulesFor(caller.user, rules_ns)) {
      if (!rule.non_resource_urls.empty()) {
        non_resource_rules.push_back(
            {{"verbs", rule.verbs}, {"nonResourceURLs", rule.non_resource_urls}});
        continue;
      }
      Json j = {{"verbs", rule.verbs}};
      if (!rule.api_groups.empty()) j["apiGroups"] = rule.api_groups;
      if (!rule.resources.empty()) j["resources"] = rule.resources;
      if (!rule.resource_names.empty()) j["resourceNames"] = rule.resource_names;
      resource_rules.push_back(std::move(j));
    }
    return Echo(body, Json{{"resourceRules", std::move(resource_rules)},
                           {"nonResourceRules", std::move(non_resource_rules)},
                           {"incomplete", false}});
  }

  // The access reviews.
  auth::Attributes attrs = AccessAttributes(spec, causes);
  auth::UserInfo subject;
  if (r.kind == "SelfSubjectAccessReview") {
    subject = caller.user;
  } else {
    subject.name = GetString(spec, {"user"});
    subject.uid = GetString(spec, {"uid"});
    subject.groups = Strings(Find(spec, {"groups"}));
    if (const Json* extra = Find(spec, {"extra"}); extra && extra->is_object()) {
      for (const auto& [k, v] : extra->items()) subject.extra[k] = Strings(&v);
    }
    if (subject.name.empty() && subject.groups.empty()) {
      causes.push_back(machinery::FieldInvalid("spec.user", "",
                                               "at least one of user or group must be specified"));
    }
    if (r.kind == "LocalSubjectAccessReview") {
      std::string meta_ns = GetString(body, {"metadata", "namespace"});
      if (!meta_ns.empty() && meta_ns != ns) {
        causes.push_back(machinery::FieldInvalid("metadata.namespace", meta_ns,
                                                 "must match the namespace of the request"));
      }
      if (attrs.resource_request && !attrs.ns.empty() && attrs.ns != ns) {
        causes.push_back(machinery::FieldInvalid("spec.resourceAttributes.namespace", attrs.ns,
                                                 "must match metadata.namespace"));
      }
      if (!attrs.resource_request && Find(spec, {"nonResourceAttributes"})) {
        causes.push_back(machinery::FieldInvalid("spec.nonResourceAttributes",
                                                 *Find(spec, {"nonResourceAttributes"}),
                                                 "disallowed on this kind of request"));
      }
      attrs.ns = std::string(ns);
      body["metadata"]["namespace"] = std::string(ns);
    }
  }
  if (!causes.empty()) return Invalid(r, causes);
  attrs.user = &subject;
  return Echo(body, AccessStatus(access.Decide(attrs)));
}

core::Result<Json> CreateServiceAccountToken(RestStorage& storage, AccessControl& access,
                                             std::string_view ns, std::string_view name,
                                             Json body) {
  KLUTCH_RETURN_IF_ERROR(CheckTypeMeta({"authentication.k8s.io", "v1", "TokenRequest"}, body));
  Json& spec = body["spec"];
  if (!spec.is_object()) spec = Json::object();
  std::vector<core::Cause> causes;
  int64_t seconds = 3600;
  if (const Json* e = Find(spec, {"expirationSeconds"}); e && !e->is_null()) {
    if (!e->is_number_integer()) {
      causes.push_back(machinery::FieldInvalid("spec.expirationSeconds", *e, "must be an integer"));
    } else {
      seconds = e->get<int64_t>();
    }
  }
  const auto min = std::chrono::duration_cast<std::chrono::seconds>(
      access.options().service_account_min_expiration);
  if (causes.empty() && seconds < min.count()) {
    causes.push_back(machinery::FieldInvalid(
        "spec.expirationSeconds", seconds,
        fmt::format("may not specify a duration less than {}",
                    min.count() % 60 == 0 ? fmt::format("{} minutes", min.count() / 60)
                                          : fmt::format("{} seconds", min.count()))));
  } else if (causes.empty() && seconds > (int64_t{1} << 32)) {
    causes.push_back(machinery::FieldInvalid(
        "spec.expirationSeconds", seconds, "may not specify a duration larger than 2^32 seconds"));
  }
  std::vector<std::string> audiences = Strings(Find(spec, {"audiences"}));
  std::optional<auth::BoundObject> bound;
  if (const Json* ref = Find(spec, {"boundObjectRef"}); ref && ref->is_object()) {
    auth::BoundObject b{GetString(*ref, {"kind"}), GetString(*ref, {"apiVersion"}),
                        GetString(*ref, {"name"}), GetString(*ref, {"uid"})};
    if (b.kind != "Secret") {
      causes.push_back(
          machinery::FieldNotSupported("spec.boundObjectRef.kind", b.kind, {"Secret"}));
    } else if (b.name.empty()) {
      causes.push_back(machinery::FieldRequired("spec.boundObjectRef.name", ""));
    } else {
      bound = std::move(b);
    }
  }
  // kube-apiserver names no object in this error (`TokenRequest.authentication.k8s.io "" is
  // invalid: ...`): the request's name is the ServiceAccount's, not the TokenRequest's.
  if (!causes.empty()) {
    return machinery::InvalidObject("authentication.k8s.io", "TokenRequest", "", causes);
  }
  auto sa_kind = storage.registry().Find("", "v1", "serviceaccounts");
  KLUTCH_ASSIGN_OR_RETURN(Json sa, storage.Get(*sa_kind, ns, name));
  if (bound) {
    auto secret_kind = storage.registry().Find("", "v1", "secrets");
    KLUTCH_ASSIGN_OR_RETURN(Json secret, storage.Get(*secret_kind, ns, bound->name));
    if (bound->uid.empty()) {
      bound->uid = machinery::Uid(secret);
    } else if (bound->uid != machinery::Uid(secret)) {
      return core::Conflict(fmt::format(
          "the UID in the bound object reference ({}) does not match the UID in record. The "
          "object might have been deleted and then recreated",
          bound->uid));
    }
    spec["boundObjectRef"]["uid"] = bound->uid;
  }
  KLUTCH_ASSIGN_OR_RETURN(auth::IssuedToken issued,
                          access.tokens().Issue(ns, name, machinery::Uid(sa), audiences,
                                                std::chrono::seconds(seconds), bound));
  spec["audiences"] = audiences.empty() ? access.tokens().api_audiences() : audiences;
  // The lifetime granted: the request's, capped at the maximum (as Issue caps it).
  spec["expirationSeconds"] =
      std::min<int64_t>(seconds, access.tokens().options().max_expiration.count());
  Json& meta = body["metadata"];
  if (!meta.is_object()) meta = Json::object();
  meta["name"] = std::string(name);
  meta["namespace"] = std::string(ns);
  meta["creationTimestamp"] = core::FormatTime(core::RealClock::Get().Now());
  body["status"] = {{"token", issued.token},
                    {"expirationTimestamp", core::FormatTime(issued.expires)}};
  return body;
}

}  // namespace klutch::apiserver
