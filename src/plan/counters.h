// src/plan/counters.h — how often steps resolve a plan and how often the planner runs, for
// the tests that hold a step to one resolution and a new key to one planner call; and which
// Split/Wide kernel the CUDA backend launched last, for the tests that hold a plan to the kernel
// form it names. Internal.
#pragma once

#include <atomic>
#include <cstdint>

namespace kda::counters {

inline std::atomic<int64_t> planner_calls{0};  ///< plan_step() calls (a fallback is part of its call)
inline std::atomic<int64_t> plan_lookups{0};   ///< PlanCache::resolve() calls (one per step, prepare key, plan_for)
/// The last Split/Wide step kernel launched (CUDA backend): its compile-time q (0: run-time q)
/// and the CTAs per SM it was compiled for (cuda_config::step_kernel_ctas_per_sm).
inline std::atomic<int> last_step_kernel_q{-1};
inline std::atomic<int> last_step_kernel_ctas_per_sm{0};
/// ... and the chunks per pass the step ran its chunk loop with (cuda_config::step_chunks_per_pass).
inline std::atomic<int> last_step_chunks_per_pass{0};
/// ... and the fold warps it was launched with (cuda_config::fold_warps, launches_fold_twins).
inline std::atomic<int> last_step_fold_warps{0};
/// ... and whether it has the F_B gate path (StepTraits' GATE_FB: 1, else 0).
inline std::atomic<int> last_step_kernel_gate_fb{-1};
/// ... and the step kinds it was compiled for (StepTraits' KINDS: cuda_config::step_kind bits).
inline std::atomic<int> last_step_kernel_kinds{-1};

}  // namespace kda::counters
