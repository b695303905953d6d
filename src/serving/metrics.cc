#include "serving/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "core/sync.h"

namespace klutch::serving {

void Counter::Increment(double v) const { c_->Increment(v); }
Counter CounterFamily::With(const Labels& labels) { return Counter(&f_.Add(labels)); }

void Gauge::Set(double v) const { g_->Set(v); }
void Gauge::Add(double v) const { g_->Increment(v); }
Gauge GaugeFamily::With(const Labels& labels) { return Gauge(&f_.Add(labels)); }

void GaugeFamily::Remove(const Labels& labels) {
  if (f_.Has(labels)) f_.Remove(&f_.Add(labels));
}

void Histogram::Observe(double v) const { h_->Observe(v); }
Histogram HistogramFamily::With(const Labels& labels) {
  return Histogram(&f_.Add(labels, buckets_));
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> b;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) b.push_back(v);
  return b;
}

class MetricRegistry::Impl {
 public:
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  core::Mutex mu;
  std::map<std::string, std::unique_ptr<CounterFamily>> counters GUARDED_BY(mu);
  std::map<std::string, std::unique_ptr<GaugeFamily>> gauges GUARDED_BY(mu);
  std::map<std::string, std::unique_ptr<HistogramFamily>> histograms GUARDED_BY(mu);
  std::vector<std::function<void()>> hooks GUARDED_BY(mu);
};

MetricRegistry::MetricRegistry() : impl_(std::make_unique<Impl>()) {}
MetricRegistry::~MetricRegistry() = default;

CounterFamily& MetricRegistry::Counter(const std::string& name, const std::string& help) {
  core::MutexLock lock(impl_->mu);
  auto& slot = impl_->counters[name];
  if (!slot) {
    slot.reset(new CounterFamily(
        prometheus::BuildCounter().Name(name).Help(help).Register(*impl_->registry)));
  }
  return *slot;
}

GaugeFamily& MetricRegistry::Gauge(const std::string& name, const std::string& help) {
  core::MutexLock lock(impl_->mu);
  auto& slot = impl_->gauges[name];
  if (!slot) {
    slot.reset(
        new GaugeFamily(prometheus::BuildGauge().Name(name).Help(help).Register(*impl_->registry)));
  }
  return *slot;
}

HistogramFamily& MetricRegistry::Histogram(const std::string& name, const std::string& help,
                                           std::vector<double> buckets) {
  core::MutexLock lock(impl_->mu);
  auto& slot = impl_->histograms[name];
  if (!slot) {
    slot.reset(new HistogramFamily(
        prometheus::BuildHistogram().Name(name).Help(help).Register(*impl_->registry),
        std::move(buckets)));
  }
  return *slot;
}

void MetricRegistry::OnScrape(std::function<void()> hook) {
  core::MutexLock lock(impl_->mu);
  impl_->hooks.push_back(std::move(hook));
}

std::string MetricRegistry::Render() const {
  std::vector<std::function<void()>> hooks;
  {
    core::MutexLock lock(impl_->mu);
    hooks = impl_->hooks;
  }
  for (const auto& hook : hooks) hook();
  prometheus::TextSerializer serializer;
  return serializer.Serialize(impl_->registry->Collect());
}

}  // namespace klutch::serving
