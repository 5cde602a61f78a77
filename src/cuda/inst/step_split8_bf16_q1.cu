// Instantiation: Split/Wide step kernel, SPLIT = 8, bf16 state, q = 1 (decode, append).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(8, uint16_t, 1, true)
