// Leader election on the in-process test cluster, in simulated time: acquisition, hand-over
// on release, expiry of a silent leader, and the renew deadline of a cut-off one.
#include "reconcile/leader_election.h"

#include <gtest/gtest.h>

#include <atomic>

#include "client/transport.h"
#include "test/support/cluster_fixture.h"

namespace klutch::reconcile::leader_election_test {
namespace {

// A transport that can be cut: while down, every request fails as an unreachable server.
class CuttableTransport final : public client::Transport {
 public:
  explicit CuttableTransport(std::shared_ptr<client::Transport> inner) : inner_(std::move(inner)) {}
  core::Result<http::ClientResponse> Do(const client::TransportRequest& r) override {
    if (down) return core::Unavailable("connect 127.0.0.1: connection refused (test cut)");
    return inner_->Do(r);
  }
  core::Result<http::ClientResponse> Stream(const client::TransportRequest& r,
                                            const std::function<bool(std::string_view)>& on_data,
                                            client::StreamCanceller* canceller) override {
    if (down) return core::Unavailable("connect 127.0.0.1: connection refused (test cut)");
    return inner_->Stream(r, on_data, canceller);
  }
  std::atomic<bool> down{false};

 private:
  std::shared_ptr<client::Transport> inner_;
};

class LeaderElection : public testing::ClusterTest {
 protected:
  struct Candidate {
    std::shared_ptr<CuttableTransport> transport;
    std::unique_ptr<client::RestClient> rest;
    std::unique_ptr<LeaderElector> elector;
    std::atomic<int> started{0}, stopped{0};
  };

  std::unique_ptr<Candidate> NewCandidate(const std::string& identity) {
    auto c = std::make_unique<Candidate>();
    auto admin = cluster_->ClientFor("elector", {"system:masters"});
    c->transport = std::make_shared<CuttableTransport>(admin->transport());
    auto rest =
        client::RestClient::New(admin->config(), {.max_retries = 0, .transport = c->transport});
    EXPECT_TRUE(rest.ok()) << rest.status().ToString();
    c->rest = std::move(rest).value();
    LeaderElectionOptions o;
    o.lease_namespace = "default";
    o.lease_name = "klutch-test";
    o.identity = identity;
    o.lease_duration = std::chrono::seconds(15);
    o.renew_deadline = std::chrono::seconds(10);
    o.retry_period = std::chrono::seconds(2);
    Candidate* raw = c.get();
    o.on_started_leading = [raw] { ++raw->started; };
    o.on_stopped_leading = [raw] { ++raw->stopped; };
    c->elector = std::make_unique<LeaderElector>(*c->rest, o, electors_clock_);
    return c;
  }

  // The electors' own simulated time: WaitForWaiters(n) then counts only their parked threads,
  // never the cluster's controllers (which wait on the cluster's clock). Sharing one clock let
  // time move on while a leader's renewal was still in flight under load, and the other
  // candidate saw the lease expire.
  core::FakeClock electors_clock_;

  // Moves the electors' time forward in `step`s until `done` (real time, bounded).
  bool AdvanceElectorsUntil(const std::function<bool()>& done, std::chrono::milliseconds step) {
    return testing::Eventually([&] {
      if (done()) return true;
      electors_clock_.Advance(step);
      return false;
    });
  }

  std::string Holder() {
    auto lease = Resource(client::resources::kLeases, "default").Get("klutch-test");
    return lease.ok() ? machinery::GetString(*lease, {"spec", "holderIdentity"}) : "";
  }
};

TEST_F(LeaderElection, OneLeadsAndAReleasedLeaseGoesToTheOtherAtOnce) {
  auto a = NewCandidate("a");
  a->elector->Start();
  ASSERT_TRUE(testing::Eventually([&] { return a->elector->IsLeader(); }));
  // IsLeader() turns true just before the elector's thread calls on_started_leading.
  EXPECT_TRUE(testing::Eventually([&] { return a->started.load() == 1; }));
  auto b = NewCandidate("b");
  b->elector->Start();
  // b campaigns every retry period; simulated minutes pass and a stays the leader.
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(electors_clock_.WaitForWaiters(2));
    electors_clock_.Advance(std::chrono::seconds(2));
  }
  EXPECT_TRUE(a->elector->IsLeader());
  EXPECT_FALSE(b->elector->IsLeader());
  EXPECT_EQ(Holder(), "a");
  a->elector->Stop();  // releases the lease
  EXPECT_EQ(a->stopped.load(), 1);
  EXPECT_TRUE(
      AdvanceElectorsUntil([&] { return b->elector->IsLeader(); }, std::chrono::seconds(2)));
  EXPECT_EQ(Holder(), "b");
}

TEST_F(LeaderElection, ASilentLeaderLosesTheLeaseAfterItsDurationAndStopsLeading) {
  auto a = NewCandidate("a");
  a->elector->Start();
  ASSERT_TRUE(testing::Eventually([&] { return a->elector->IsLeader(); }));
  auto b = NewCandidate("b");
  b->elector->Start();
  ASSERT_TRUE(electors_clock_.WaitForWaiters(2));
  const core::MonoTime cut = electors_clock_.MonotonicNow();
  a->transport->down = true;  // a can no longer renew
  // b takes over once the lease has not changed for its duration (15 s) on b's clock; a gives
  // up once it could not renew for its deadline (10 s).
  EXPECT_TRUE(
      AdvanceElectorsUntil([&] { return b->elector->IsLeader(); }, std::chrono::seconds(1)));
  EXPECT_GE(electors_clock_.MonotonicNow() - cut, std::chrono::seconds(13))
      << "the lease moved before it expired";
  EXPECT_TRUE(testing::Eventually([&] { return !a->elector->IsLeader(); }));
  // on_stopped_leading runs just after IsLeader() turns false.
  EXPECT_TRUE(testing::Eventually([&] { return a->stopped.load() == 1; }));
  EXPECT_EQ(Holder(), "b");
}

TEST_F(LeaderElection, ALeaderCutOffStopsLeadingAtTheRenewDeadline) {
  auto a = NewCandidate("a");
  a->elector->Start();
  ASSERT_TRUE(testing::Eventually([&] { return a->elector->IsLeader(); }));
  ASSERT_TRUE(electors_clock_.WaitForWaiters(1));
  a->transport->down = true;
  electors_clock_.Advance(std::chrono::seconds(8));
  ASSERT_TRUE(electors_clock_.WaitForWaiters(1));
  EXPECT_TRUE(a->elector->IsLeader()) << "gave up before the renew deadline";
  EXPECT_TRUE(
      AdvanceElectorsUntil([&] { return !a->elector->IsLeader(); }, std::chrono::seconds(1)));
  EXPECT_TRUE(testing::Eventually([&] { return a->stopped.load() == 1; }));
}

}  // namespace
}  // namespace klutch::reconcile::leader_election_test
