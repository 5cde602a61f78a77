// Instantiation: Wide step kernel, bf16 state, q = 1, gate modes 1 and 2, registers cut for six
// CTAs per SM (heuristics::kStepBf16Q1CtasPerSm), decode and per_token (the row loop with the
// token's update, no records or fold: cuda_config::kStoringStepKinds).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_FORM(1, uint16_t, 1, false, 6, kda::cuda_config::kStoringStepKinds)
