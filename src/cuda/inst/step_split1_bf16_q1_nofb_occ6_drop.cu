// Instantiation: Wide step kernel, bf16 state, q = 1, gate modes 1 and 2, registers cut for six
// CTAs per SM, append, record and fused (the row loop without the token's update:
// cuda_config::kRecordingStepKinds).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_FORM(1, uint16_t, 1, false, 6, kda::cuda_config::kRecordingStepKinds)
