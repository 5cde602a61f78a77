// Instantiation: Wide step kernel, f32 state, q = 4, gate modes 1 and 2 only; the fold-warp
// twin of the small-grid verify form, for fused steps on a plan of one CTA per SM
// (cuda_config::fold_warps).
#include "../step_launch.cuh"
KDA_INSTANTIATE_STEP_FORM(1, float, 4, false, 1, kda::cuda_config::kFoldTwinStepKinds)
