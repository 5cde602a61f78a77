// Instantiation: Split/Wide step kernel, SPLIT = 1, f32 state, any q (verify).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(1, float, 0, true)
