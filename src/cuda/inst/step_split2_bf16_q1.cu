// Instantiation: Split 2, bf16 state, q = 1 (append, record, fused; decode and per_token run the
// form below), its 64 rows as one chunk, compiled for two CTAs per SM
// (cuda_config::split2_bf16_q1_one_chunk, split_q1_min_blocks).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_OCC(2, uint16_t, 1, true, 2)
