#include "providers/anynines/provider_config.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "client/dynamic.h"
#include "core/duration.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::providers::anynines {
namespace {

using machinery::Find;
using machinery::GetString;
using std::chrono::milliseconds;

constexpr milliseconds kMaxDefaultGrace = std::chrono::hours(1);

core::Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::NotFound("cannot open " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// One key of a Secret, base64-decoded.
core::Result<std::string> SecretKey(const CredentialSources& sources, const std::string& pc,
                                    const std::string& ns, const std::string& name,
                                    const std::string& key) {
  if (name.empty()) {
    return UserError(fmt::format("ProviderConfig {}: a secretRef needs a name", pc));
  }
  auto secret = sources.get_secret(ns, name);
  if (!secret.ok()) {
    return UserError(fmt::format("ProviderConfig {}: cannot read Secret {}/{}: {}", pc, ns, name,
                                 secret.status().message()));
  }
  const Json* data = Find(*secret, {"data"});
  auto it = data && data->is_object() ? data->find(key) : Json::const_iterator();
  if (!data || !data->is_object() || it == data->end() || !it->is_string()) {
    return UserError(
        fmt::format("ProviderConfig {}: Secret {}/{} has no key {}", pc, ns, name, key));
  }
  auto decoded = core::Base64Decode(*it->get_ptr<const std::string*>());
  if (!decoded) {
    return UserError(
        fmt::format("ProviderConfig {}: Secret {}/{} key {} is not base64", pc, ns, name, key));
  }
  return *decoded;
}

// providerCredentials.<field> for `source`.
core::Result<std::string> Credential(const CredentialSources& sources, const Json& pc,
                                     std::string_view source, std::string_view field) {
  const std::string name = machinery::Name(pc);
  const Json* selector = Find(pc, {"spec", "providerCredentials", field});
  if (!selector || !selector->is_object()) {
    return UserError(
        fmt::format("ProviderConfig {}: spec.providerCredentials.{} is required", name, field));
  }
  std::string value;
  if (source == "Secret") {
    KLUTCH_ASSIGN_OR_RETURN(
        value, SecretKey(sources, name, GetString(*selector, {"secretRef", "namespace"}),
                         GetString(*selector, {"secretRef", "name"}),
                         GetString(*selector, {"secretRef", "key"})));
  } else if (source == "Environment") {
    std::string var = GetString(*selector, {"env", "name"});
    const char* v = var.empty()
                        ? nullptr
                        : (sources.getenv ? sources.getenv(var.c_str()) : ::getenv(var.c_str()));
    if (!v) {
      return UserError(fmt::format(
          "ProviderConfig {}: spec.providerCredentials.{}: environment variable \"{}\" is not set",
          name, field, var));
    }
    value = v;
  } else {  // Filesystem
    std::string path = GetString(*selector, {"fs", "path"});
    auto text = sources.read_file ? sources.read_file(path) : ReadFile(path);
    if (path.empty() || !text.ok()) {
      return UserError(fmt::format(
          "ProviderConfig {}: spec.providerCredentials.{}: cannot read \"{}\"", name, field, path));
    }
    value = *text;
  }
  return std::string(core::Trim(value));
}

core::Result<milliseconds> DurationAnnotation(const Json& pc, std::string_view key) {
  std::string text = machinery::Annotation(pc, key);
  if (text.empty()) return milliseconds(0);
  auto d = core::ParseGoDuration(text);
  if (!d.ok() || d->seconds < 0 || d->nanos < 0) {
    return UserError(fmt::format("ProviderConfig {}: annotation {}: {}", machinery::Name(pc), key,
                                 d.ok() ? "must not be negative" : d.status().message()));
  }
  return milliseconds(d->seconds * 1000 + d->nanos / 1000000);
}

}  // namespace

core::Result<ProviderConfigSettings> LoadProviderConfig(const Json& pc,
                                                        const CredentialSources& sources,
                                                        milliseconds request_timeout) {
  ProviderConfigSettings s;
  s.name = machinery::Name(pc);
  s.endpoint.url = GetString(pc, {"spec", "url"});
  if (s.endpoint.url.empty()) {
    return UserError(fmt::format("ProviderConfig {}: spec.url is required", s.name));
  }
  s.service_type = GetString(pc, {"spec", "serviceType"});
  if (s.service_type.empty()) s.service_type = std::string(kServiceTypeBroker);
  if (s.service_type != kServiceTypeBroker && s.service_type != kServiceTypeBackupManager) {
    return UserError(fmt::format(
        "ProviderConfig {}: spec.serviceType: Unsupported value: \"{}\": supported values: "
        "\"servicebroker\", \"backupmanager\"",
        s.name, s.service_type));
  }
  s.health_endpoint = GetString(pc, {"spec", "healthCheckEndpoint"});
  if (s.health_endpoint.empty()) s.health_endpoint = std::string(kDefaultHealthEndpoint);
  if (!s.health_endpoint.starts_with('/')) s.health_endpoint.insert(0, "/");

  std::string source = GetString(pc, {"spec", "providerCredentials", "source"});
  if (source == "Secret" || source == "Environment" || source == "Filesystem") {
    KLUTCH_ASSIGN_OR_RETURN(s.endpoint.username, Credential(sources, pc, source, "username"));
    KLUTCH_ASSIGN_OR_RETURN(s.endpoint.password, Credential(sources, pc, source, "password"));
  } else if (source != "None") {
    return UserError(fmt::format(
        "ProviderConfig {}: spec.providerCredentials.source \"{}\" cannot authenticate to a "
        "service broker or backup manager: use Secret, Environment, Filesystem or None",
        s.name, source));
  }

  if (const Json* tls = Find(pc, {"spec", "tls"}); tls && tls->is_object()) {
    if (const Json* insecure = Find(*tls, {"insecureSkipVerify"})) {
      if (const bool* b = insecure->get_ptr<const bool*>()) s.endpoint.insecure_skip_verify = *b;
    }
    s.endpoint.server_name = GetString(*tls, {"overrideServerName"});
    if (const Json* ref = Find(*tls, {"caBundleSecretRef"}); ref && ref->is_object()) {
      std::string key = GetString(*ref, {"key"});
      KLUTCH_ASSIGN_OR_RETURN(s.endpoint.ca_pem,
                              SecretKey(sources, s.name, GetString(*ref, {"namespace"}),
                                        GetString(*ref, {"name"}), key.empty() ? "ca.crt" : key));
    }
  }
  s.endpoint.timeout = request_timeout;

  KLUTCH_ASSIGN_OR_RETURN(s.max_credential_age,
                          DurationAnnotation(pc, kAnnotationMaxCredentialAge));
  KLUTCH_ASSIGN_OR_RETURN(s.credential_grace_period,
                          DurationAnnotation(pc, kAnnotationCredentialGracePeriod));
  if (machinery::Annotation(pc, kAnnotationCredentialGracePeriod).empty()) {
    s.credential_grace_period = std::min(s.max_credential_age, kMaxDefaultGrace);
  }
  return s;
}

// --- usage ------------------------------------------------------------------------------------

core::Status TrackUsage(Context& ctx, const Json& mr, const std::string& pc_name) {
  const std::string uid = machinery::Uid(mr);
  if (uid.empty()) return core::Status::Ok();
  client::ObjectPtr existing = ctx.usages->indexer().Get(uid);
  if (existing && GetString(*existing, {"providerConfigRef", "name"}) == pc_name &&
      GetString(*existing, {"metadata", "labels", kLabelProviderConfig}) == pc_name) {
    return core::Status::Ok();
  }
  Json usage = {{"apiVersion", kApiVersion},
                {"kind", "ProviderConfigUsage"},
                {"metadata",
                 {{"name", uid},
                  {"labels", {{kLabelProviderConfig, pc_name}}},
                  {"ownerReferences", Json::array({OwnerReference(mr, true)})}}},
                {"providerConfigRef", {{"name", pc_name}}},
                {"resourceRef",
                 {{"apiVersion", machinery::ApiVersionOf(mr)},
                  {"kind", machinery::Kind(mr)},
                  {"name", machinery::Name(mr)},
                  {"uid", uid}}}};
  client::ResourceClient usages(ctx.rest, kProviderConfigUsages);
  if (!existing) {
    auto created = usages.Create(usage, {.field_manager = std::string(kFieldManager)});
    if (created.ok() || !core::IsAlreadyExists(created.status())) return created.status();
  }
  Json patch = {{"metadata", {{"labels", {{kLabelProviderConfig, pc_name}}}}},
                {"providerConfigRef", usage["providerConfigRef"]},
                {"resourceRef", usage["resourceRef"]}};
  return usages
      .Patch(uid, client::PatchType::kMerge, machinery::Dump(patch),
             {.field_manager = std::string(kFieldManager)})
      .status();
}

}  // namespace klutch::providers::anynines
