// Instantiation: warp-specialised persistent WS kernel, bf16 state.
#include "../step_launch.cuh"
KDA_INSTANTIATE_WS(uint16_t)
