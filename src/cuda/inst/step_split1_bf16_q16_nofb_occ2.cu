// Instantiation: Wide step kernel, bf16 state, q = 16 (offsets and token loops at compile time),
// gate modes 1 and 2 only; the small-grid verify form: compiled for two CTAs per SM
// (cuda_config::small_grid_verify).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_OCC(1, uint16_t, 16, false, 2)
