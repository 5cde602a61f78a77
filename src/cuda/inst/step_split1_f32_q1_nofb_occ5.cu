// Instantiation: Wide step kernel, fp32 state, q = 1, every step kind (append at Qr = 12–16 runs it), gate modes 1
// and 2, registers for five CTAs per SM (heuristics::kStepF32AppendCtasPerSm: where six CTAs' records do not fit).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_OCC(1, float, 1, false, 5)
