// Instantiation: Wide step kernel, fp32 state, q = 1 (decode, append), gate modes 1 and 2 (no F_B
// path), four CTAs per SM.
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(1, float, 1, false)
