// Instantiation: Split/Wide step kernel, SPLIT = 1, f32 state, q = 3 (offsets and token loops
// at compile time), gate modes 1 and 2 only.
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(1, float, 3, false)
