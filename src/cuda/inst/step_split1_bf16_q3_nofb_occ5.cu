// Instantiation: Wide step kernel, bf16 state, q = 3 (offsets and token loops at compile time), gate
// modes 1 and 2 only; the dense verify form: compiled for five CTAs per SM
// (cuda_config::kDenseVerifyCtasPerSm, heuristics::wide_verify_ctas_per_sm).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_FORM(1, uint16_t, 3, false, 5, kda::cuda_config::kDenseVerifyStepKinds)
