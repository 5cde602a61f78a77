// src/api/plan_cache.h — the plans of one PreparedKda: one per step key, made by plan_step
// from the key's policy (or the default policy) and the layer facts of the caches, and made
// again when those facts change (host work only). Internal.
#pragma once

#include <unordered_map>

#include "kda/plan.h"
#include "kda/types.h"

namespace kda::api {

class PlanCache {
 public:
  using Policies = std::unordered_map<StepKey, Policy, StepKeyHash>;
  PlanCache(Policies policies, Policy default_policy)
      : policies_(std::move(policies)), default_policy_(default_policy) {}

  /// The plan of `key` for caches with these facts: found, or planned once and kept.
  const Plan& resolve(const StepKey& key, const LayerShape& facts, const DeviceInfo& dev);
  /// Forgets every plan (prepare() plans the policy keys afresh).
  void clear() { plans_.clear(); }
  const Policies& policies() const { return policies_; }

 private:
  Policies policies_;
  Policy default_policy_;
  LayerShape planned_for_;  ///< the facts the kept plans were made with
  std::unordered_map<StepKey, Plan, StepKeyHash> plans_;
};

}  // namespace kda::api
