// Instantiation: Wide step kernel, fp32 state, q = 1, every step kind (append, record and fused
// run it: their instantiation for those kinds alone was slower, docs/PERFORMANCE.md "The step
// kinds at compile time"), gate modes 1 and 2 (no F_B path), four CTAs per SM.
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP(1, float, 1, false)
