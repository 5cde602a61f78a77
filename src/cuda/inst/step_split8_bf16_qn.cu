// Instantiation: Split/Wide step kernel, SPLIT = 8, bf16 state, any q (verify).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(8, uint16_t, 0, true)
