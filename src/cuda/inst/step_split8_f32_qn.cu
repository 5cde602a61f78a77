// Instantiation: Split/Wide step kernel, SPLIT = 8, f32 state, any q (verify).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(8, float, 0, true)
