// Instantiation: persistent Stream kernel, bf16 state.
#include "../step_launch.cuh"
KDA_INSTANTIATE_STREAM(uint16_t)
