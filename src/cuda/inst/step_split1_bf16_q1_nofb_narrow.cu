// Instantiation: Wide step kernel, bf16 state, q = 1, gate modes 1 and 2, the narrow form (128 threads a CTA,
// cuda_config::kNarrowCtasPerSm CTAs per SM), decode and per_token (cuda_config::kStoringStepKinds).
#include "../step_launch.cuh"
#if KDA_STEP_NARROW_CTAS_PER_SM > 0
KDA_INSTANTIATE_STEP_FORM(1, uint16_t, 1, false, kda::cuda_config::kNarrowCtasPerSm,
                          kda::cuda_config::kStoringStepKinds)
#endif
