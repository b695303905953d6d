// CrdReconciler (klutch-apiserver-crd), on the src/reconcile framework: serves each
// CustomResourceDefinition's resources (through CrdServing, the API server's registry),
// then reports it in status (acceptedNames, storedVersions, NamesAccepted and Established
// conditions); a CRD being deleted has its instances deleted first, then its cleanup
// finalizer removed. Reads the CRD informer's cache; writes through the REST client.
// Thread-safe.
#pragma once

#include <string>

#include "client/informer.h"
#include "reconcile/controller.h"

namespace klutch::controllers {

// What the CRD controller needs of the API server it runs in.
class CrdServing {
 public:
  virtual ~CrdServing() = default;
  // Starts serving the CRD's resources; an error (e.g. a name another CRD or a built-in
  // kind serves) is reported on the CRD as NamesAccepted=False.
  virtual core::Status Serve(const client::Json& crd) = 0;
  virtual void StopServing(const std::string& crd_name) = 0;
  // Whether `crd_name` is what serves group/plural (so its cleanup may delete them).
  virtual bool Serves(const std::string& crd_name, const std::string& group,
                      const std::string& plural) const = 0;
};

class CrdReconciler final : public reconcile::Reconciler {
 public:
  CrdReconciler(client::RestClient& rest, client::Indexer& crds, CrdServing& serving)
      : rest_(rest), crds_(crds), serving_(serving) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  core::Result<reconcile::Result> Cleanup(const client::Json& crd);
  client::RestClient& rest_;
  client::Indexer& crds_;
  CrdServing& serving_;
};

}  // namespace klutch::controllers
