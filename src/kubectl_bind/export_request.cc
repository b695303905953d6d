#include "kubectl_bind/export_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "apis/klutch/export_request.h"
#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "machinery/object.h"

namespace klutch::kubectl_bind {

using client::ResourceClient;
using machinery::Json;

core::Result<Json> ParseExportRequest(std::string_view text, const std::string& source) {
  auto doc = machinery::ParseYaml(text);
  if (!doc.ok()) return core::BadRequest(source + ": " + doc.status().message());
  if (auto decoded = apis::klutch::DecodeExportRequest(*doc); !decoded.ok()) {
    return core::Status(decoded.status().reason(), source + ": " + decoded.status().message());
  }
  return *doc;
}

core::Result<Json> CreateExportRequest(client::RestClient& provider,
                                       const std::string& cluster_namespace, Json request,
                                       std::chrono::milliseconds timeout, const BindOutput& out) {
  ResourceClient sers(provider, apis::klutch::kApiServiceExportRequests, cluster_namespace);
  Json& meta = machinery::MutableMetadata(request);
  meta["namespace"] = cluster_namespace;
  meta.erase("resourceVersion");
  meta.erase("uid");
  request.erase("status");
  std::string name = machinery::Name(request);
  if (name.empty()) meta["generateName"] = "export-";
  auto created = sers.Create(request);
  if (core::IsAlreadyExists(created.status()) && !name.empty()) {
    meta.erase("name");
    meta["generateName"] = name + "-";
    created = sers.Create(request);
  }
  if (!created.ok()) {
    return WithHint(created.status(), "creating the APIServiceExportRequest on the provider",
                    created.status().reason() == core::Reason::kForbidden
                        ? "the provider kubeconfig may no longer be valid; run kubectl bind "
                          "<backend URL> again to log in anew"
                        : "");
  }
  name = machinery::Name(*created);
  Say(out, fmt::format("Waiting for the provider to accept export request {}...", name));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  Json current = *created;
  while (true) {
    std::string phase = machinery::GetString(current, {"status", "phase"});
    if (phase == "Succeeded") return current;
    if (phase == "Failed") {
      return core::Invalid(
          fmt::format("the provider refused export request {}: {}", name,
                      machinery::GetString(current, {"status", "terminalMessage"})));
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return core::Status(core::Reason::kTimeout,
                          fmt::format("export request {} was not accepted within {} s; ask the "
                                      "provider's operator to check the bind backend",
                                      name, timeout.count() / 1000));
    }
    // Watch from the version we hold until the phase changes or a second passes.
    auto remaining = std::chrono::duration_cast<std::chrono::seconds>(deadline - now);
    bool deleted = false;
    auto watched = sers.Watch(
        {.field_selector = "metadata.name=" + name,
         .resource_version = machinery::ResourceVersion(current),
         .timeout_seconds = static_cast<int>(std::clamp<int64_t>(remaining.count(), 1, 5))},
        [&](const client::WatchEvent& event) {
          if (event.type == client::EventType::kDeleted) {
            deleted = true;
            return false;
          }
          if ((event.type == client::EventType::kAdded ||
               event.type == client::EventType::kModified) &&
              event.object) {
            current = *event.object;
            std::string p = machinery::GetString(current, {"status", "phase"});
            return p != "Succeeded" && p != "Failed";
          }
          return true;
        });
    if (deleted) {
      return core::NotFound(fmt::format(
          "export request {} was deleted on the provider before it was accepted", name));
    }
    if (!watched.ok() || watched->gone) {
      auto fresh = sers.Get(name);
      if (core::IsNotFound(fresh.status())) {
        return core::NotFound(fmt::format(
            "export request {} was deleted on the provider before it was accepted", name));
      }
      if (fresh.ok()) current = *fresh;
      if (!watched.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
}
}  // namespace klutch::kubectl_bind
