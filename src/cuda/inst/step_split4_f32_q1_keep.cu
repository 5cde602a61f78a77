// Instantiation: Split 4, f32 state, q = 1, decode and per_token only (no records or fold:
// cuda_config::kStoringStepKinds).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_FORM(4, float, 1, true, 4, kda::cuda_config::kStoringStepKinds)
