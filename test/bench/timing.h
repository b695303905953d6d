// Timing helper shared by the in-process benchmarks: the median time per call over batches,
// so one scheduler hiccup on the shared 2-core machine does not move the result.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace klutch::bench {

// Median over `samples` batches of `n` calls of `f`, in nanoseconds per call.
inline double MedianNsPerCall(int samples, int n, const std::function<void()>& f) {
  std::vector<double> per_call;
  for (int s = 0; s < samples; ++s) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) f();
    per_call.push_back(
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
        n);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace klutch::bench
