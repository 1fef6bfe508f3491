// A loaded model as the plan sees it (plan/plan.h PlanModel): its sizes, the
// KV cache's shape and the forward pass's scratch, so the planner needs no
// model types.
#pragma once

#include <cstdint>

#include "model/model.h"
#include "plan/plan.h"

namespace strata::model {

memory::PlanModel plan_model(const Model& m);

// Bytes of a slot for this expert: the sum of its gate/up/down O_DIRECT windows.
uint64_t expert_slot_bytes(const FfnMatrices& expert);

// Forward-pass scratch of a Context on the CPU for n_batch tokens (the CPU
// backend's buffers, backend/cpu/cpu_backend.cpp), over n_ctx positions and `threads` threads.
uint64_t activation_bytes(const ModelConfig& c, int64_t n_batch, int64_t n_ctx, int64_t threads);

}  // namespace strata::model
