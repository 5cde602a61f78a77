// Instantiation: Split/Wide step kernel, SPLIT = 4, f32 state, any q (verify).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(4, float, 0, true)
