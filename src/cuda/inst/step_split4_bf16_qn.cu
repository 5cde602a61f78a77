// Instantiation: Split/Wide step kernel, SPLIT = 4, bf16 state, any q (verify).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(4, uint16_t, 0, true)
