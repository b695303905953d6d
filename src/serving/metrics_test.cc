#include "serving/metrics.h"

#include <gtest/gtest.h>

namespace klutch::serving::metrics_test {
namespace {

TEST(MetricRegistry, RendersFamiliesWithLabelsInTheTextFormat) {
  MetricRegistry m;
  CounterFamily& requests = m.Counter("apiserver_request_total", "Requests");
  requests.Increment({{"verb", "GET"}, {"code", "200"}});
  Counter c = requests.With({{"verb", "GET"}, {"code", "200"}});
  c.Increment(2);
  m.Gauge("klutch_up", "Up").Set({}, 1);
  m.Histogram("latency_seconds", "Latency", {0.1, 1}).Observe({{"op", "get"}}, 0.5);
  const std::string text = m.Render();
  EXPECT_NE(text.find("# TYPE apiserver_request_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("apiserver_request_total{code=\"200\",verb=\"GET\"} 3"), std::string::npos)
      << text;
  EXPECT_NE(text.find("klutch_up 1"), std::string::npos) << text;
  EXPECT_NE(text.find("latency_seconds_bucket{op=\"get\",le=\"0.1\"} 0"), std::string::npos)
      << text;
  EXPECT_NE(text.find("latency_seconds_bucket{op=\"get\",le=\"1\"} 1"), std::string::npos) << text;
  EXPECT_EQ(&m.Counter("apiserver_request_total", "other help"), &requests)
      << "one family per name";
}

TEST(MetricRegistry, ScrapeHooksRunBeforeEachRenderAndSeriesCanBeRemoved) {
  MetricRegistry m;
  GaugeFamily& objects = m.Gauge("apiserver_storage_objects", "Objects");
  int scrapes = 0;
  m.OnScrape([&] {
    ++scrapes;
    objects.Set({{"resource", "configmaps"}}, scrapes * 10);
    if (scrapes == 2) objects.Remove({{"resource", "configmaps"}});
  });
  EXPECT_NE(m.Render().find("apiserver_storage_objects{resource=\"configmaps\"} 10"),
            std::string::npos);
  EXPECT_EQ(m.Render().find("configmaps"), std::string::npos);
  EXPECT_EQ(scrapes, 2);
}

}  // namespace
}  // namespace klutch::serving::metrics_test
