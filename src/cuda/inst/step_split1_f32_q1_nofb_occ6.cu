// Instantiation: Wide step kernel, fp32 state, q = 1, every step kind (append runs it), gate modes
// 1 and 2, registers cut for six CTAs per SM (heuristics::kStepF32AppendCtasPerSm).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_OCC(1, float, 1, false, 6)
