#include "providers/anynines/pacer.h"

#include <algorithm>

namespace klutch::providers::anynines {

std::chrono::milliseconds Pacer::Next(const std::string& key) {
  core::MutexLock lock(mu_);
  auto [it, inserted] = next_.try_emplace(key, min_);
  std::chrono::milliseconds d = it->second;
  it->second = std::min(max_, d * 2);
  return d;
}

void Pacer::Reset(const std::string& key) {
  core::MutexLock lock(mu_);
  next_.erase(key);
}

}  // namespace klutch::providers::anynines
