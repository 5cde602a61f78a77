// Instantiation: Wide step kernel, f32 state, q = 3 (offsets and token loops at compile time), gate
// modes 1 and 2 only; the small-grid verify form: compiled for two CTAs per SM
// (cuda_config::small_grid_verify).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_OCC(1, float, 3, false, 2)
