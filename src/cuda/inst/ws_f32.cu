// Instantiation: warp-specialised persistent WS kernel, f32 state.
#include "../step_launch.cuh"
KDA_INSTANTIATE_WS(float)
