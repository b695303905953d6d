// Step: what one named step of a reconcile answers (README.md, "One reconciler idiom").
//
// A reconcile reads as a list of steps (`EnsureFinalizer`, `EnsureComposite`,
// `PropagateStatus`), each a member function of a screen or less. A step that cannot end the
// pass returns core::Status; one that may end it returns a Step: Continue() (or an OK
// Status) to go on, a Result to end the pass with it (Done, RequeueAfter, ...), an error to
// end it with that error (retried with backoff). KLUTCH_RUN_STEP(step) returns from the
// reconcile unless the step goes on. A value type.
#pragma once

#include <optional>
#include <utility>

#include "core/status.h"
#include "reconcile/controller.h"

namespace klutch::reconcile {

class [[nodiscard]] Step {
 public:
  // Ends the pass with `result`.
  Step(Result result) : end_(std::move(result)) {}  // NOLINT(google-explicit-constructor)
  // Ends the pass with `outcome` (a Result or an error).
  Step(core::Result<Result> outcome)  // NOLINT(google-explicit-constructor)
      : end_(std::move(outcome)) {}
  // An error ends the pass with it; OK goes on.
  Step(core::Status status) {  // NOLINT(google-explicit-constructor)
    if (!status.ok()) end_ = core::Result<Result>(std::move(status));
  }
  static Step Continue() { return Step(core::Status::Ok()); }

  bool ends() const { return end_.has_value(); }
  // What the reconcile answers when ends().
  core::Result<Result> outcome() && { return *std::move(end_); }

 private:
  std::optional<core::Result<Result>> end_;
};

inline Step Continue() { return Step::Continue(); }

}  // namespace klutch::reconcile

// Runs a step inside a function returning core::Result<reconcile::Result> or a Step: returns
// the step's outcome when it ends the pass, else goes on.
#define KLUTCH_RUN_STEP(step)                                          \
  do {                                                                 \
    ::klutch::reconcile::Step klutch_step_ = (step);                   \
    if (klutch_step_.ends()) return std::move(klutch_step_).outcome(); \
  } while (false)
