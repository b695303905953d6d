#include "core/status.h"

#include <gtest/gtest.h>

namespace klutch::core::status_test {
namespace {

TEST(Status, ReasonTableMapsToKubernetesCodes) {
  EXPECT_EQ(HttpCode(Reason::kNotFound), 404);
  EXPECT_EQ(HttpCode(Reason::kAlreadyExists), 409);
  EXPECT_EQ(HttpCode(Reason::kConflict), 409);
  EXPECT_EQ(HttpCode(Reason::kInvalid), 422);
  EXPECT_EQ(HttpCode(Reason::kExpired), 410);
  EXPECT_EQ(HttpCode(Reason::kUnsupportedMediaType), 415);
  EXPECT_EQ(HttpCode(Reason::kRequestEntityTooLarge), 413);
  EXPECT_EQ(HttpCode(Reason::kTimeout), 504);
  EXPECT_EQ(ReasonName(Reason::kTooManyRequests), "TooManyRequests");
  EXPECT_EQ(ReasonFromName("Expired"), Reason::kExpired);
  EXPECT_EQ(ReasonFromName("NoSuchReason"), Reason::kUnknown);
}

TEST(Status, CodeOverrideWinsOverReason) {
  Status s(Reason::kTimeout, "too large");
  EXPECT_EQ(s.code(), 504);
  s.set_code(500);
  EXPECT_EQ(s.code(), 500);
}

TEST(Status, AnnotatePrefixesOnlyErrors) {
  Status ok;
  ok.Annotate("ctx");
  EXPECT_TRUE(ok.ok());
  Status err = NotFound("x");
  err.Annotate("ctx");
  EXPECT_EQ(err.message(), "ctx: x");
  EXPECT_EQ(err.ToString(), "NotFound: ctx: x");
}

Result<int> Half(int v) {
  if (v % 2) return BadRequest("odd");
  return v / 2;
}

Result<int> Quarter(int v) {
  KLUTCH_ASSIGN_OR_RETURN(int h, Half(v));
  KLUTCH_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(Result, PropagatesTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), Reason::kBadRequest);
  EXPECT_EQ(r.status().message(), "odd");
}

}  // namespace
}  // namespace klutch::core::status_test
