// EventRecorder on the in-process test cluster, in simulated time: the Event it writes, the
// aggregation of repeats, where cluster-scoped objects' events go, truncation, and the
// bounded queue (drops when full, Stop() with queued events).
#include "reconcile/events.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <regex>
#include <set>
#include <thread>

#include "client/transport.h"
#include "core/sync.h"
#include "test/support/cluster_fixture.h"

namespace klutch::reconcile::events_test {
namespace {

using namespace std::chrono_literals;

// A transport whose requests wait at a gate until the test opens it, so the recorder's
// sending thread can be held in the middle of a send.
class GatedTransport final : public client::Transport {
 public:
  explicit GatedTransport(std::shared_ptr<client::Transport> inner) : inner_(std::move(inner)) {}
  core::Result<http::ClientResponse> Do(const client::TransportRequest& r) override {
    {
      core::MutexLock lock(mu_);
      ++entered_;
      while (!open_) changed_.Wait(mu_);
    }
    return inner_->Do(r);
  }
  core::Result<http::ClientResponse> Stream(const client::TransportRequest& r,
                                            const std::function<bool(std::string_view)>& on_data,
                                            client::StreamCanceller* canceller) override {
    return inner_->Stream(r, on_data, canceller);
  }
  void Open() {
    {
      core::MutexLock lock(mu_);
      open_ = true;
    }
    changed_.SignalAll();
  }
  int entered() const {
    core::MutexLock lock(mu_);
    return entered_;
  }

 private:
  std::shared_ptr<client::Transport> inner_;
  mutable core::Mutex mu_;
  core::CondVar changed_;
  bool open_ GUARDED_BY(mu_) = false;
  int entered_ GUARDED_BY(mu_) = 0;
};

class EventRecording : public testing::ClusterTest {
 protected:
  const EventSource kSource{"klutch-konnector", "konnector-7d9f-abcde"};

  std::unique_ptr<EventRecorder> NewRecorder(EventRecorderOptions options = {}) {
    return std::make_unique<EventRecorder>(cluster_->admin(), kSource, &clock_, options);
  }

  // A recorder whose requests are held at `gate_` until gate_->Open().
  std::unique_ptr<EventRecorder> NewGatedRecorder(EventRecorderOptions options = {}) {
    auto admin = cluster_->ClientFor("recorder", {"system:masters"});
    gate_ = std::make_shared<GatedTransport>(admin->transport());
    auto rest = client::RestClient::New(admin->config(), {.max_retries = 0, .transport = gate_});
    EXPECT_TRUE(rest.ok()) << rest.status().ToString();
    gated_rest_ = std::move(rest).value();
    return std::make_unique<EventRecorder>(*gated_rest_, kSource, &clock_, options);
  }

  void CreateNamespace(const std::string& name) {
    Create(client::resources::kNamespaces,
           {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  }

  // The Events about the object with `uid`, in every namespace, oldest name first.
  std::vector<Json> EventsAbout(const std::string& uid) {
    auto list =
        Resource(client::resources::kEvents).List({.field_selector = "involvedObject.uid=" + uid});
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    std::vector<Json> out;
    if (!list.ok()) return out;
    for (const Json& item : (*list)["items"]) out.push_back(item);
    return out;
  }

  std::shared_ptr<GatedTransport> gate_;
  std::unique_ptr<client::RestClient> gated_rest_;
};

TEST_F(EventRecording, CreatesEventWithAllFieldsInTheObjectsNamespace) {
  CreateNamespace("team-a");
  Json cm = Create(client::resources::kConfigMaps, ConfigMap("team-a", "binding-1"));
  ASSERT_FALSE(machinery::Uid(cm).empty());
  auto recorder = NewRecorder();
  const std::string now = core::FormatTime(clock_.Now());

  recorder->Event(cm, kEventTypeWarning, "ExportNotFound",
                  "the provider has no export \"mangodb\"; list exports with kubectl bind");
  ASSERT_TRUE(recorder->Flush(30s));

  auto events = EventsAbout(machinery::Uid(cm));
  ASSERT_EQ(events.size(), 1u);
  const Json& e = events[0];
  EXPECT_EQ(machinery::Namespace(e), "team-a");
  EXPECT_TRUE(std::regex_match(machinery::Name(e), std::regex(R"(binding-1\.[0-9a-f]+)")))
      << machinery::Name(e);
  EXPECT_EQ(e["involvedObject"], (Json{{"apiVersion", "v1"},
                                       {"kind", "ConfigMap"},
                                       {"name", "binding-1"},
                                       {"namespace", "team-a"},
                                       {"uid", machinery::Uid(cm)},
                                       {"resourceVersion", machinery::ResourceVersion(cm)}}));
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["reason"], "ExportNotFound");
  EXPECT_EQ(e["message"], "the provider has no export \"mangodb\"; list exports with kubectl bind");
  EXPECT_EQ(e["source"], (Json{{"component", "klutch-konnector"}, {"host", kSource.host}}));
  EXPECT_EQ(e["reportingComponent"], "klutch-konnector");
  EXPECT_EQ(e["reportingInstance"], kSource.host);
  EXPECT_EQ(e["firstTimestamp"], now);
  EXPECT_EQ(e["lastTimestamp"], now);
  EXPECT_EQ(e["count"], 1);
  EXPECT_EQ(recorder->dropped(), 0u);
}

TEST_F(EventRecording, RepeatedIdenticalEventIncrementsCountOfOneEvent) {
  Json cm = Create(client::resources::kConfigMaps, ConfigMap("default", "repeat"));
  auto recorder = NewRecorder();
  const std::string first = core::FormatTime(clock_.Now());
  recorder->Event(cm, kEventTypeWarning, "ProviderUnreachable", "dial tcp: connection refused");
  ASSERT_TRUE(recorder->Flush(30s));
  const std::string name = EventsAbout(machinery::Uid(cm)).at(0)["metadata"]["name"];

  clock_.Advance(90s);
  const std::string second = core::FormatTime(clock_.Now());
  ASSERT_NE(first, second);
  recorder->Event(cm, kEventTypeWarning, "ProviderUnreachable", "dial tcp: connection refused");
  ASSERT_TRUE(recorder->Flush(30s));

  auto events = EventsAbout(machinery::Uid(cm));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(machinery::Name(events[0]), name);
  EXPECT_EQ(events[0]["count"], 2);
  EXPECT_EQ(events[0]["firstTimestamp"], first);
  EXPECT_EQ(events[0]["lastTimestamp"], second);

  recorder->Event(cm, kEventTypeWarning, "ProviderUnreachable", "dial tcp: connection refused");
  ASSERT_TRUE(recorder->Flush(30s));
  EXPECT_EQ(EventsAbout(machinery::Uid(cm)).at(0)["count"], 3);
}

TEST_F(EventRecording, IdenticalEventAfterTheWindowStartsANewEvent) {
  Json cm = Create(client::resources::kConfigMaps, ConfigMap("default", "window"));
  auto recorder = NewRecorder();
  recorder->Event(cm, kEventTypeNormal, "Synced", "bound to the provider");
  ASSERT_TRUE(recorder->Flush(30s));
  clock_.Advance(11min);
  recorder->Event(cm, kEventTypeNormal, "Synced", "bound to the provider");
  ASSERT_TRUE(recorder->Flush(30s));

  auto events = EventsAbout(machinery::Uid(cm));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["count"], 1);
  EXPECT_EQ(events[1]["count"], 1);
  EXPECT_NE(machinery::Name(events[0]), machinery::Name(events[1]));
}

TEST_F(EventRecording, DifferentMessageOrReasonCreatesAnotherEvent) {
  Json cm = Create(client::resources::kConfigMaps, ConfigMap("default", "different"));
  auto recorder = NewRecorder();
  recorder->Event(cm, kEventTypeWarning, "ProviderUnreachable", "dial tcp: connection refused");
  recorder->Event(cm, kEventTypeWarning, "ProviderUnreachable", "tls: certificate expired");
  recorder->Event(cm, kEventTypeWarning, "ProviderRejected", "tls: certificate expired");
  ASSERT_TRUE(recorder->Flush(30s));

  auto events = EventsAbout(machinery::Uid(cm));
  ASSERT_EQ(events.size(), 3u);
  std::multiset<std::string> seen;
  for (const Json& e : events) {
    EXPECT_EQ(e["count"], 1);
    seen.insert(machinery::GetString(e, {"reason"}) + ": " + machinery::GetString(e, {"message"}));
  }
  EXPECT_EQ(seen, (std::multiset<std::string>{"ProviderRejected: tls: certificate expired",
                                              "ProviderUnreachable: dial tcp: connection refused",
                                              "ProviderUnreachable: tls: certificate expired"}));
}

TEST_F(EventRecording, ClusterScopedObjectsEventGoesToDefault) {
  CreateNamespace("cluster-scoped-subject");
  auto ns = Resource(client::resources::kNamespaces).Get("cluster-scoped-subject");
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  auto recorder = NewRecorder();
  recorder->Event(*ns, kEventTypeNormal, "Adopted", "namespace adopted by the konnector");
  ASSERT_TRUE(recorder->Flush(30s));

  auto events = EventsAbout(machinery::Uid(*ns));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(machinery::Namespace(events[0]), "default");
  EXPECT_EQ(events[0]["involvedObject"]["kind"], "Namespace");
  EXPECT_FALSE(events[0]["involvedObject"].contains("namespace"));
}

TEST_F(EventRecording, LongMessagesAreTruncatedTo1024BytesOnACharacterBoundary) {
  Json cm = Create(client::resources::kConfigMaps, ConfigMap("default", "long"));
  auto recorder = NewRecorder();
  recorder->Event(cm, kEventTypeWarning, "Long", std::string(3000, 'x'));
  // 1023 ASCII bytes then a two-byte "é": cutting at 1024 would split it.
  recorder->Event(cm, kEventTypeWarning, "Accented", std::string(1023, 'a') + "\xc3\xa9" + "zz");
  recorder->Event(cm, kEventTypeWarning, "Exact", std::string(1024, 'y'));
  ASSERT_TRUE(recorder->Flush(30s));

  std::map<std::string, std::string> messages;
  for (const Json& e : EventsAbout(machinery::Uid(cm))) {
    messages[machinery::GetString(e, {"reason"})] = machinery::GetString(e, {"message"});
  }
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(messages["Long"], std::string(1024, 'x'));
  EXPECT_EQ(messages["Accented"], std::string(1023, 'a'));
  EXPECT_EQ(messages["Exact"], std::string(1024, 'y'));
}

TEST_F(EventRecording, AggregatedEventDeletedMeanwhileIsCreatedAnew) {
  Json cm = Create(client::resources::kConfigMaps, ConfigMap("default", "deleted"));
  auto recorder = NewRecorder();
  recorder->Event(cm, kEventTypeWarning, "Failed", "still failing");
  ASSERT_TRUE(recorder->Flush(30s));
  const std::string old_name = EventsAbout(machinery::Uid(cm)).at(0)["metadata"]["name"];
  ASSERT_TRUE(Resource(client::resources::kEvents, "default").Delete(old_name).ok());

  clock_.Advance(1s);
  recorder->Event(cm, kEventTypeWarning, "Failed", "still failing");
  ASSERT_TRUE(recorder->Flush(30s));

  auto events = EventsAbout(machinery::Uid(cm));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(machinery::Name(events[0]), old_name);
  EXPECT_EQ(events[0]["count"], 1);
}

TEST_F(EventRecording, InvalidInputRecordsNothing) {
  Json cm = Create(client::resources::kConfigMaps, ConfigMap("default", "invalid"));
  auto recorder = NewRecorder();
  recorder->Event(cm, "Error", "NotAType", "type must be Normal or Warning");
  Json nameless = cm;
  nameless["metadata"].erase("name");
  recorder->Event(nameless, kEventTypeNormal, "NoName", "object without a name");
  recorder->Event(cm, kEventTypeNormal, "Valid", "recorded");
  ASSERT_TRUE(recorder->Flush(30s));

  auto events = EventsAbout(machinery::Uid(cm));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], "Valid");
}

TEST_F(EventRecording, FullQueueDropsAndCountsWithoutBlocking) {
  Json cm = Create(client::resources::kConfigMaps, ConfigMap("default", "full"));
  auto recorder = NewGatedRecorder({.queue_capacity = 5});
  // The first event is taken off the queue and held at the gate...
  recorder->Event(cm, kEventTypeWarning, "Flood", "message 0");
  ASSERT_TRUE(testing::Eventually([&] { return gate_->entered() == 1; }));
  // ...five more fill the queue, three more find it full.
  for (int i = 1; i <= 8; ++i) {
    recorder->Event(cm, kEventTypeWarning, "Flood", "message " + std::to_string(i));
  }
  EXPECT_EQ(recorder->dropped(), 3u);
  EXPECT_FALSE(recorder->Flush(50ms));  // held at the gate

  gate_->Open();
  ASSERT_TRUE(recorder->Flush(30s));
  auto events = EventsAbout(machinery::Uid(cm));
  EXPECT_EQ(events.size(), 6u);
  std::set<std::string> messages;
  for (const Json& e : events) messages.insert(machinery::GetString(e, {"message"}));
  EXPECT_EQ(messages, (std::set<std::string>{"message 0", "message 1", "message 2", "message 3",
                                             "message 4", "message 5"}));
}

TEST_F(EventRecording, StopWithQueuedEventsReturnsAfterTheSendInProgress) {
  Json cm = Create(client::resources::kConfigMaps, ConfigMap("default", "stop"));
  auto recorder = NewGatedRecorder();
  recorder->Event(cm, kEventTypeWarning, "Queued", "message 0");
  ASSERT_TRUE(testing::Eventually([&] { return gate_->entered() == 1; }));
  for (int i = 1; i < 20; ++i) {
    recorder->Event(cm, kEventTypeWarning, "Queued", "message " + std::to_string(i));
  }

  core::Notification stopped;
  std::thread stopper([&] {
    recorder->Stop();
    stopped.Notify();
  });
  // Open the gate only once Stop() has begun, so the queued events are still queued then.
  EXPECT_TRUE(testing::Eventually([&] { return recorder->stopped(); }));
  gate_->Open();
  const bool returned = stopped.WaitFor(30s);
  EXPECT_TRUE(returned) << "Stop() hung with queued events";
  stopper.join();
  if (!returned) return;

  // Only the send in progress went out; the 19 queued events were dropped, not sent.
  EXPECT_EQ(recorder->dropped(), 19u);
  EXPECT_EQ(gate_->entered(), 1);
  auto events = EventsAbout(machinery::Uid(cm));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["message"], "message 0");
  // Afterwards: Stop() is idempotent, Flush() returns at once, new events are dropped.
  recorder->Stop();
  EXPECT_TRUE(recorder->Flush(1s));
  recorder->Event(cm, kEventTypeWarning, "Late", "after stop");
  EXPECT_EQ(recorder->dropped(), 20u);
  EXPECT_EQ(gate_->entered(), 1);
}

}  // namespace
}  // namespace klutch::reconcile::events_test
