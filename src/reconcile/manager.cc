#include "reconcile/manager.h"

#include <fmt/format.h>

#include "core/log.h"
#include "core/strings.h"

namespace klutch::reconcile {

Manager::Manager(client::RestClient& rest, ManagerOptions options)
    : rest_(rest),
      options_(std::move(options)),
      clock_(options_.clock ? *options_.clock : core::RealClock::Get()),
      metrics_(registry_) {
  health_.AddReadiness("informer-sync", [this]() -> core::Status {
    if (Ready()) return core::Status::Ok();
    return core::Unavailable("caches not synced, or controllers stopped for a lost lease");
  });
  rest_.SetRequestObserver([this](std::string_view verb, int code, double seconds) {
    metrics_.OnRequest(verb, code, seconds);
  });
}

Manager::~Manager() {
  Stop();
  rest_.SetRequestObserver(nullptr);
}

client::Informer& Manager::Informer(const client::GroupVersionResource& gvr,
                                    client::InformerOptions options) {
  std::string key = fmt::format("{}/{}/{}|{}|{}|{}|{}", gvr.group, gvr.version, gvr.resource,
                                options.ns, options.label_selector, options.field_selector,
                                options.metadata_only ? "metadata" : "full");
  core::MutexLock lock(mu_);
  auto& slot = informers_[key];
  if (!slot) {
    if (!options.on_restart) {
      options.on_restart = [this, r = gvr.GroupResource()](std::string_view what) {
        metrics_.OnInformerRestart(r, what);
      };
    }
    if (!options.clock) options.clock = &clock_;
    slot = std::make_unique<client::Informer>(rest_, gvr, std::move(options));
    if (started_) slot->Start();
  }
  return *slot;
}

Controller& Manager::AddController(std::string name, Reconciler& reconciler, int workers) {
  auto c = std::make_unique<Controller>(
      std::move(name), reconciler,
      ControllerOptions{.workers = workers, .metrics = &metrics_, .clock = &clock_});
  core::MutexLock lock(mu_);
  controllers_.push_back(std::move(c));
  return *controllers_.back();
}

core::Status Manager::Start() {
  std::vector<client::Informer*> informers;
  {
    core::MutexLock lock(mu_);
    if (started_) return core::Status::Ok();
    started_ = true;
    for (auto& [k, inf] : informers_) informers.push_back(inf.get());
  }
  if (options_.health_port) {
    auto endpoints = serving::Endpoints::Start(options_.health_address, *options_.health_port,
                                               health_, registry_);
    if (!endpoints.ok()) {
      core::Status st = endpoints.status();
      return st.Annotate("health endpoint");
    }
    endpoints_ = std::move(*endpoints);
  }
  for (auto* inf : informers) inf->Start();
  auto deadline = std::chrono::steady_clock::now() + options_.cache_sync_timeout;
  std::vector<std::string> unsynced;
  for (auto* inf : informers) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!inf->WaitForSync(std::max(left, std::chrono::milliseconds(0)))) {
      unsynced.push_back(inf->gvr().GroupResource());
    }
  }
  if (!unsynced.empty()) {
    return core::Status(
        core::Reason::kTimeout,
        fmt::format("{}: caches did not sync within {} ms: {}", options_.name,
                    options_.cache_sync_timeout.count(), core::Join(unsynced, ", ")));
  }
  {
    core::MutexLock lock(mu_);
    synced_ = true;
  }
  if (options_.leader_election) {
    LeaderElectionOptions le = *options_.leader_election;
    le.on_started_leading = [this] {
      metrics_.SetLeader(options_.leader_election->lease_name, true);
      StartControllers();
    };
    le.on_stopped_leading = [this] {
      metrics_.SetLeader(options_.leader_election->lease_name, false);
      StopControllers();
      bool stopping;
      {
        core::MutexLock lock(mu_);
        stopping = stopped_;
        lost_leadership_ = !stopping;
      }
      if (!stopping) {
        KLUTCH_LOG(kError, options_.name,
                   "leader election lost: controllers stopped; the process should exit");
      }
      if (!stopping && options_.on_lost_leadership) options_.on_lost_leadership();
    };
    elector_ = std::make_unique<LeaderElector>(rest_, std::move(le), clock_);
    elector_->Start();
  } else {
    StartControllers();
  }
  return core::Status::Ok();
}

void Manager::StartControllers() {
  core::MutexLock lock(mu_);
  if (stopped_) return;
  for (auto& c : controllers_) c->Start();
}

void Manager::StopControllers() {
  std::vector<Controller*> controllers;
  {
    core::MutexLock lock(mu_);
    for (auto& c : controllers_) controllers.push_back(c.get());
  }
  for (auto* c : controllers) c->Stop();
}

void Manager::Stop() {
  {
    core::MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  StopControllers();
  if (elector_) elector_->Stop();
  std::vector<client::Informer*> informers;
  {
    core::MutexLock lock(mu_);
    for (auto& [k, inf] : informers_) informers.push_back(inf.get());
  }
  for (auto* inf : informers) inf->Stop();
  endpoints_.reset();
}

bool Manager::Ready() const {
  core::MutexLock lock(mu_);
  return synced_ && !stopped_ && !lost_leadership_;
}

bool Manager::Leading() const { return !elector_ || elector_->IsLeader(); }

uint16_t Manager::health_port() const { return endpoints_ ? endpoints_->port() : 0; }

}  // namespace klutch::reconcile
