// Instantiation: persistent Stream kernel, f32 state.
#include "../step_launch.cuh"
KDA_INSTANTIATE_STREAM(float)
