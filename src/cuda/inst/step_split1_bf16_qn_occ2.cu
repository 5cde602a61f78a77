// Instantiation: Wide step kernel, bf16 state, any q (verify); the small-grid verify form: compiled
// for two CTAs per SM (cuda_config::small_grid_verify).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_OCC(1, uint16_t, 0, true, 2)
