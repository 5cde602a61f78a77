// src/api/plan_cache.cpp — the plan cache (plan_cache.h).
#include "api/plan_cache.h"

#include "plan/counters.h"

namespace kda::api {

const Plan& PlanCache::resolve(const StepKey& key, const LayerShape& facts, const DeviceInfo& dev) {
  ++counters::plan_lookups;
  if (!(facts == planned_for_)) {
    plans_.clear();  // other caches (dtype, window, alignment): plan again
    planned_for_ = facts;
  }
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  auto pit = policies_.find(key);
  const Policy& policy = pit != policies_.end() ? pit->second : default_policy_;
  return plans_.emplace(key, plan_step(key, policy, facts, dev)).first->second;
}

}  // namespace kda::api
