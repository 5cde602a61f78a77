// Instantiation: Wide step kernel, fp32 state, q = 1 (append: its row loop without the token's
// update, cuda_config::kRecordingStepKinds), gate modes 1 and 2, registers cut for six CTAs per
// SM (heuristics::kStepF32AppendCtasPerSm).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_FORM(1, float, 1, false, 6, kda::cuda_config::kRecordingStepKinds)
