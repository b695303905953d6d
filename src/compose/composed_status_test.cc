#include "compose/composed_status.h"

#include <gtest/gtest.h>

namespace klutch::compose::composed_status_test {
namespace {

machinery::Json WithConditions(machinery::Json conditions) {
  return {{"apiVersion", "v1"},
          {"kind", "ServiceBinding"},
          {"metadata", {{"name", "b"}}},
          {"status", {{"conditions", std::move(conditions)}}}};
}

TEST(ComposedStatus, AnErrorOutranksProgress) {
  auto o = WithConditions(
      {{{"type", "Ready"}, {"status", "False"}, {"reason", "Creating"}, {"message", "working"}},
       {{"type", "Synced"},
        {"status", "False"},
        {"reason", "ReconcileError"},
        {"message", "instance \"pg\" was not found"}}});
  EXPECT_EQ(UnreadyReason(o), "instance \"pg\" was not found");
  EXPECT_TRUE(ComposedFailing(o));
}

TEST(ComposedStatus, ProgressIsAReasonButNoFailure) {
  auto o =
      WithConditions({{{"type", "Ready"},
                       {"status", "False"},
                       {"reason", "Creating"},
                       {"message", "the broker is provisioning the instance"}},
                      {{"type", "Synced"}, {"status", "True"}, {"reason", "ReconcileSuccess"}}});
  EXPECT_EQ(UnreadyReason(o), "the broker is provisioning the instance");
  EXPECT_FALSE(ComposedFailing(o));
}

TEST(ComposedStatus, UnavailableIsAFailure) {
  auto o = WithConditions({{{"type", "Ready"},
                            {"status", "False"},
                            {"reason", "Unavailable"},
                            {"message", "the broker reports state \"failed\""}}});
  EXPECT_EQ(UnreadyReason(o), "the broker reports state \"failed\"");
  EXPECT_TRUE(ComposedFailing(o));
}

TEST(ComposedStatus, SilentOrTrueConditionsSayNothing) {
  EXPECT_EQ(UnreadyReason(WithConditions(machinery::Json::array())), "");
  auto ready = WithConditions(
      {{{"type", "Ready"}, {"status", "True"}, {"reason", "Available"}, {"message", "fine"}}});
  EXPECT_EQ(UnreadyReason(ready), "");
  EXPECT_FALSE(ComposedFailing(ready));
  auto no_message = WithConditions({{{"type", "Ready"}, {"status", "False"}}});
  EXPECT_EQ(UnreadyReason(no_message), "");
  EXPECT_FALSE(ComposedFailing(no_message));
}

}  // namespace
}  // namespace klutch::compose::composed_status_test
