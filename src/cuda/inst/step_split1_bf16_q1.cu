// Instantiation: Split/Wide step kernel, SPLIT = 1, bf16 state, q = 1 (decode, append).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(1, uint16_t, 1, true)
