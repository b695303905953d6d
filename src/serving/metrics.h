// MetricRegistry: the Prometheus metrics of one process, rendered for /metrics.
//
// Families are registered once by name (counters, gauges, histograms) and live as long as
// the registry; each label set is a child created on first use. Hot paths keep the child
// handle (`With`) instead of looking the labels up per event. Scrape hooks run before every
// Render(), for values computed on demand (objects in storage, watchers). prometheus-cpp stays
// in metrics.cc. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace klutch::serving {

using Labels = std::map<std::string, std::string>;

class Counter {
 public:
  void Increment(double v = 1) const;

 private:
  friend class CounterFamily;
  explicit Counter(prometheus::Counter* c) : c_(c) {}
  prometheus::Counter* c_;
};

class CounterFamily {
 public:
  Counter With(const Labels& labels);
  void Increment(const Labels& labels, double v = 1) { With(labels).Increment(v); }

 private:
  friend class MetricRegistry;
  explicit CounterFamily(prometheus::Family<prometheus::Counter>& f) : f_(f) {}
  prometheus::Family<prometheus::Counter>& f_;
};

class Gauge {
 public:
  void Set(double v) const;
  void Add(double v) const;

 private:
  friend class GaugeFamily;
  explicit Gauge(prometheus::Gauge* g) : g_(g) {}
  prometheus::Gauge* g_;
};

class GaugeFamily {
 public:
  Gauge With(const Labels& labels);
  void Set(const Labels& labels, double v) { With(labels).Set(v); }
  // Drops the child of `labels` (a series that no longer exists); handles to it become
  // invalid, so only the code that owns the series may remove it.
  void Remove(const Labels& labels);

 private:
  friend class MetricRegistry;
  explicit GaugeFamily(prometheus::Family<prometheus::Gauge>& f) : f_(f) {}
  prometheus::Family<prometheus::Gauge>& f_;
};

class Histogram {
 public:
  void Observe(double v) const;

 private:
  friend class HistogramFamily;
  explicit Histogram(prometheus::Histogram* h) : h_(h) {}
  prometheus::Histogram* h_;
};

class HistogramFamily {
 public:
  Histogram With(const Labels& labels);
  void Observe(const Labels& labels, double v) { With(labels).Observe(v); }

 private:
  friend class MetricRegistry;
  HistogramFamily(prometheus::Family<prometheus::Histogram>& f, std::vector<double> buckets)
      : f_(f), buckets_(std::move(buckets)) {}
  prometheus::Family<prometheus::Histogram>& f_;
  const std::vector<double> buckets_;
};

// Bucket boundaries start, start*factor, ... (`count` of them).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

class MetricRegistry {
 public:
  MetricRegistry();
  ~MetricRegistry();
  MetricRegistry(const MetricRegistry&) = delete;
  MetricRegistry& operator=(const MetricRegistry&) = delete;

  // The family named `name`, registered on first call (later calls return the same family
  // and ignore `help` and `buckets`).
  CounterFamily& Counter(const std::string& name, const std::string& help);
  GaugeFamily& Gauge(const std::string& name, const std::string& help);
  HistogramFamily& Histogram(const std::string& name, const std::string& help,
                             std::vector<double> buckets);

  // Runs `hook` at the start of every Render() (on the scraping thread).
  void OnScrape(std::function<void()> hook);
  // The Prometheus text exposition format (version 0.0.4).
  std::string Render() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::serving
