// Instantiation: Split/Wide step kernel, SPLIT = 2, f32 state, q = 1 (decode, append).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(2, float, 1, true)
