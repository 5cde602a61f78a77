// Instantiation: Split/Wide step kernel, SPLIT = 2, f32 state, any q, gate modes 1 and 2 only.
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(2, float, 0, false)
