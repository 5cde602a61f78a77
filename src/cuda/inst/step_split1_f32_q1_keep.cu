// Instantiation: Wide step kernel, fp32 state, q = 1, gate mode 0 (F_B path), decode and per_token
// only (the row loop with the token's update, no records or fold: cuda_config::kStoringStepKinds).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_FORM(1, float, 1, true, 4, kda::cuda_config::kStoringStepKinds)
