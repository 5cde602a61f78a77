// Instantiation: Split/Wide step kernel, SPLIT = 8, bf16 state, any q, gate modes 1 and 2 only.
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(8, uint16_t, 0, false)
