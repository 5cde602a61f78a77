// Instantiation: Wide step kernel, fp32 state, q = 1 (decode, per_token: its row loop with the
// token's update, cuda_config::kStoringStepKinds), gate modes 1 and 2 (no F_B path), four CTAs per SM.
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_FORM(1, float, 1, false, 4, kda::cuda_config::kStoringStepKinds)
