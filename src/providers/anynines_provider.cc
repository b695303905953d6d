#include "providers/anynines_provider.h"

#include <vector>

#include "client/dynamic.h"
#include "machinery/object.h"
#include "providers/anynines/apis_reconciler.h"
#include "reconcile/events.h"

namespace klutch::providers {

using machinery::Json;
using reconcile::Request;

// The wiring: the CRD informer and the APIs controller, which maps every CRD event of the
// group to one key; the logic (starting and stopping the managed resources' controllers) is
// anynines::ApisReconciler's.
class AnyninesProvider::Impl {
 public:
  Impl(reconcile::Manager& manager, AnyninesProviderOptions options)
      : manager_(manager),
        options_(std::move(options)),
        clock_(options_.clock ? *options_.clock : core::RealClock::Get()),
        events_(manager.rest(), {options_.component, options_.instance}, &clock_) {}
  ~Impl() { Stop(); }

  core::Status Setup() {
    crds_ = &manager_.Informer(client::resources::kCustomResourceDefinitions,
                               client::InformerOptions{.clock = &clock_});
    reconciler_ =
        std::make_unique<anynines::ApisReconciler>(manager_, options_, clock_, events_, *crds_);
    controller_ = &manager_.AddController("klutch-manager-anynines-apis", *reconciler_, 1);
    // Every CRD event of the group maps to one key: the provider's APIs as a whole.
    controller_->Watches(*crds_, [](const Json& crd) {
      std::string name = machinery::Name(crd);
      if (!name.ends_with(".dataservices.anynines.com")) return std::vector<Request>{};
      return std::vector<Request>{{"", "dataservices.anynines.com"}};
    });
    return core::Status::Ok();
  }

  void Stop() {
    if (reconciler_) reconciler_->Stop();
    events_.Stop();
  }

  bool running() const { return reconciler_ && reconciler_->running(); }

 private:
  reconcile::Manager& manager_;
  const AnyninesProviderOptions options_;
  const core::Clock& clock_;
  reconcile::EventRecorder events_;
  client::Informer* crds_ = nullptr;
  std::unique_ptr<anynines::ApisReconciler> reconciler_;
  reconcile::Controller* controller_ = nullptr;
};

AnyninesProvider::AnyninesProvider(reconcile::Manager& manager, AnyninesProviderOptions options)
    : impl_(std::make_unique<Impl>(manager, std::move(options))) {}
AnyninesProvider::~AnyninesProvider() = default;
core::Status AnyninesProvider::Setup() { return impl_->Setup(); }
void AnyninesProvider::Stop() { impl_->Stop(); }
bool AnyninesProvider::running() const { return impl_->running(); }

}  // namespace klutch::providers
