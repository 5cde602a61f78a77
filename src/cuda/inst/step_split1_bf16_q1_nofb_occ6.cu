// Instantiation: Wide step kernel, bf16 state, q = 1 (decode, append), gate modes 1 and 2,
// registers cut for six CTAs per SM (heuristics::kStepBf16Q1CtasPerSm).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_OCC(1, uint16_t, 1, false, 6)
