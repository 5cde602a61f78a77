// src/plan/counters.h — how often steps resolve a plan and how often the planner runs, for
// the tests that hold a step to one resolution and a new key to one planner call. Internal.
#pragma once

#include <atomic>
#include <cstdint>

namespace kda::counters {

inline std::atomic<int64_t> planner_calls{0};  ///< plan_step() calls (a fallback is part of its call)
inline std::atomic<int64_t> plan_lookups{0};   ///< PlanCache::resolve() calls (one per step, prepare key, plan_for)

}  // namespace kda::counters
