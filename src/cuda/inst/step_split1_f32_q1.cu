// Instantiation: Split/Wide step kernel, SPLIT = 1, f32 state, q = 1 (decode, append).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(1, float, 1, true)
