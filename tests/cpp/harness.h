// tests/cpp/harness.h — everything the C++ suite shares, for tests that use all of it:
//   data.h   random layers, pools, inputs, outputs and index tensors (and their float64 mirror)
//   api.h    one step / commit / flush through kda::PreparedKda, refused-call messages
//   check.h  a step's results against the float64 reference (SPEC §8 / §9), untouched bytes
// A test that needs only part of it includes that header alone.
#pragma once

#include "api.h"
#include "check.h"
#include "data.h"
