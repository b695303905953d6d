#include "reconcile/crd_installer.h"

#include <algorithm>

#include "client/dynamic.h"
#include "core/sync.h"
#include "machinery/object.h"
#include "reconcile/conditions.h"

namespace klutch::reconcile {

core::Status InstallCrd(client::RestClient& rest, const machinery::Json& crd,
                        std::chrono::milliseconds timeout, const core::Clock& clock) {
  client::ResourceClient crds(rest, client::resources::kCustomResourceDefinitions);
  const std::string name = machinery::Name(crd);
  const auto deadline = clock.MonotonicNow() + timeout;
  core::Mutex mu;
  core::CondVar cv;
  auto pause = [&](std::chrono::milliseconds d) {
    core::MutexLock lock(mu);
    clock.WaitFor(cv, mu, d);
  };
  core::Status last = core::Status::Ok();
  bool written = false;
  // A CRD is usually established a few milliseconds after it is written: look again soon,
  // then less often (10, 20, 40, 80, 100, 100 ... ms).
  std::chrono::milliseconds interval(10);
  while (clock.MonotonicNow() < deadline) {
    if (!written) {
      auto existing = crds.Get(name);
      core::Result<Json> r = core::Internal("not attempted");
      if (existing.ok()) {
        Json updated = *existing;
        if (const Json* spec = machinery::Find(crd, {"spec"})) updated["spec"] = *spec;
        if (const Json* labels = machinery::Find(crd, {"metadata", "labels"})) {
          machinery::MutableMetadata(updated)["labels"] = *labels;
        }
        r = updated == *existing ? core::Result<Json>(*existing) : crds.Update(updated);
      } else if (core::IsNotFound(existing.status())) {
        r = crds.Create(crd);
      } else {
        r = existing.status();
      }
      if (r.ok()) {
        written = true;
      } else if (core::IsInvalid(r.status()) || r.status().reason() == core::Reason::kForbidden) {
        return r.status();
      } else {
        last = r.status();  // connection refused, 409, 429: try again
      }
    }
    if (written) {
      auto current = crds.Get(name);
      if (current.ok() && IsConditionTrue(*current, "Established")) return core::Status::Ok();
      if (!current.ok()) last = current.status();
    }
    pause(interval);
    interval = std::min(interval * 2, std::chrono::milliseconds(100));
  }
  return core::Status(core::Reason::kTimeout, "CustomResourceDefinition " + name +
                                                  " not established" +
                                                  (last.ok() ? "" : ": " + last.message()));
}

}  // namespace klutch::reconcile
