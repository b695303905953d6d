// The konnector converges after failures in the middle of a burst of 200 creates, updates and
// deletes in the App Cluster (issue #11): the konnector killed with SIGKILL and restarted, the
// Control Plane's API server killed and restarted, the provider connection cut for 30 s. In
// each case both sides end with exactly the App Cluster's objects and specs: nothing missing,
// nothing left over, no consumer object stuck on its finalizer. Checked with kubectl.
#include <signal.h>

#include <set>

#include "client/dynamic.h"
#include "test/e2e/konnector_fixture.h"

namespace klutch::testing {
namespace {

const client::GroupVersionResource kClaims{"anynines.com", "v1", "postgresqlinstances"};
constexpr const char* kBurstNs = "burst";
constexpr int kOperations = 200;

class KonnectorChaosTest : public KonnectorE2eTest {
 protected:
  void SetUp() override {
    KonnectorE2eTest::SetUp();
    if (HasFatalFailure()) return;
    auto app = AdminClient(*app_);
    ASSERT_TRUE(app);
    app_rest_ = std::move(app);
    // The namespace is mapped before the burst, as after any first claim.
    ASSERT_FALSE(CreateBoundClaim(kBurstNs, "seed").is_null());
  }

  // 200 operations through the API (kubectl per operation would take minutes): creates of
  // b-0..b-119, updates of every third to version 2, deletes of b-1, b-4, ... (40 each).
  // `chaos(i)` runs before operation i. The expected end state goes to expected_.
  void Burst(const std::function<void(int)>& chaos) {
    client::ResourceClient claims(*app_rest_, kClaims, kBurstNs);
    expected_ = {{"seed", "14"}};
    for (int i = 0; i < kOperations; ++i) {
      chaos(i);
      if (HasFatalFailure()) return;
      core::Status s = core::Status::Ok();
      if (i < 120) {
        const std::string name = "b-" + std::to_string(i);
        s = claims.Create(Claim(kBurstNs, name, "1")).status();
        expected_[name] = "1";
      } else if (i < 160) {
        const std::string name = "b-" + std::to_string(3 * (i - 120));
        s = claims.Patch(name, client::PatchType::kMerge, R"({"spec":{"version":"2"}})").status();
        expected_[name] = "2";
      } else {
        const std::string name = "b-" + std::to_string(3 * (i - 160) + 1);
        s = claims.Delete(name).status();
        expected_.erase(name);
      }
      ASSERT_TRUE(s.ok()) << "operation " << i << ": " << s.ToString();
    }
  }

  // name -> spec.version of the claims kubectl lists in `ns`; "<deleting>" for an object
  // waiting for its finalizer.
  std::map<std::string, std::string> Listed(const ApiServerProcess& server, const std::string& ns) {
    Json list = Get(server, "postgresqlinstances -n " + ns);
    std::map<std::string, std::string> out;
    if (list.is_null()) return {{"<kubectl failed>", ""}};
    for (const auto& item : list["items"]) {
      out[machinery::Name(item)] = machinery::IsBeingDeleted(item)
                                       ? "<deleting>"
                                       : machinery::GetString(item, {"spec", "version"});
    }
    return out;
  }

  // Both clusters hold exactly the expected claims (bounded wait).
  void ExpectConverged() {
    std::map<std::string, std::string> app, cp;
    bool converged = Eventually(
        [&] {
          app = Listed(*app_, kBurstNs);
          cp = Listed(*cp_, Mapped(kBurstNs));
          return app == expected_ && cp == expected_;
        },
        std::chrono::seconds(120));
    EXPECT_TRUE(converged) << "App Cluster: " << Describe(app)
                           << "\nControl Plane: " << Describe(cp)
                           << "\nexpected: " << Describe(expected_);
  }

  static std::string Describe(const std::map<std::string, std::string>& m) {
    std::string out = std::to_string(m.size()) + " objects:";
    for (const auto& [name, version] : m) out += " " + name + "=" + version;
    return out;
  }

  std::unique_ptr<client::RestClient> app_rest_;
  std::map<std::string, std::string> expected_;
};

TEST_F(KonnectorChaosTest, KonnectorKilledMidBurstConvergesAfterRestart) {
  Burst([&](int i) {
    if (i == 60) {
      ASSERT_TRUE(konnector_->Signal(SIGKILL, std::chrono::seconds(10)).has_value());
    }
    if (i == 140) {
      // Restarted while the burst goes on.
      ASSERT_NO_FATAL_FAILURE(StartKonnector());
    }
  });
  ExpectConverged();
}

TEST_F(KonnectorChaosTest, ControlPlaneRestartedMidBurstConverges) {
  Burst([&](int i) {
    if (i == 50) {
      ASSERT_TRUE(cp_->process().Signal(SIGKILL, std::chrono::seconds(10)).has_value());
    }
    if (i == 110) {
      // The same data on a new port; the provider kubeconfig names the proxy, which now
      // points there.
      mapper_->Stop();
      std::string error;
      cp_ = ApiServerProcess::Start(dir_.path() / "cp", {}, &error);
      ASSERT_TRUE(cp_) << error;
      proxy_->SetUpstream(PortOf(cp_->url()));
      cp_rest_ = AdminClient(*cp_);
      ASSERT_TRUE(cp_rest_);
      mapper_ = std::make_unique<bind::NamespaceMapper>(*cp_rest_, provider_.cluster_namespace);
      mapper_->Start();
    }
  });
  ExpectConverged();
}

TEST_F(KonnectorChaosTest, ConnectionCutFor30SecondsConverges) {
  std::chrono::steady_clock::time_point cut;
  Burst([&](int i) {
    if (i == 40) {
      proxy_->SetRefusing(true);
      proxy_->CutAll();
      cut = std::chrono::steady_clock::now();
    }
  });
  // Nothing reaches the Control Plane while the connection is down.
  EXPECT_LT(Listed(*cp_, Mapped(kBurstNs)).size(), expected_.size());
  std::this_thread::sleep_until(cut + std::chrono::seconds(30));
  proxy_->SetRefusing(false);
  ExpectConverged();
}

}  // namespace
}  // namespace klutch::testing
