// Instantiation: Split/Wide step kernel, SPLIT = 2, f32 state, any q (verify).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(2, float, 0, true)
