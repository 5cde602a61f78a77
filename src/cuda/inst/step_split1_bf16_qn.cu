// Instantiation: Split/Wide step kernel, SPLIT = 1, bf16 state, any q (verify).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(1, uint16_t, 0, true)
