// Instantiation: Split 2, bf16 state, q = 1, decode and per_token only (no records or fold:
// cuda_config::kStoringStepKinds), its 64 rows as one chunk, compiled for two CTAs per SM
// (cuda_config::split2_bf16_q1_one_chunk, split_q1_min_blocks).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_FORM(2, uint16_t, 1, true, 2, kda::cuda_config::kStoringStepKinds)
