// The example controller (tests only, not shipped): for every ConfigMap labelled
// `example.klutch.io/echo=true` it keeps an "<name>-echo" ConfigMap in the same namespace
// with the same data, owned (controller=true) by the source, and records on the source a
// fingerprint of the data it echoed (annotation `example.klutch.io/echoed`). Written the way
// every controller of the project is: logic here, reading from the informer cache and
// writing through a Committer; wiring in echo_controller.cc / the tests.
#pragma once

#include "client/informer.h"
#include "reconcile/committer.h"
#include "reconcile/controller.h"

namespace klutch::example {

inline constexpr const char* kEchoLabel = "example.klutch.io/echo";
inline constexpr const char* kEchoedAnnotation = "example.klutch.io/echoed";
inline constexpr const char* kControllerName = "klutch-example-echo";

class EchoReconciler final : public reconcile::Reconciler {
 public:
  EchoReconciler(client::RestClient& rest, client::Indexer& cache) : rest_(rest), cache_(cache) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  client::RestClient& rest_;
  client::Indexer& cache_;
};

bool IsEchoSource(const client::Json& cm);

}  // namespace klutch::example
