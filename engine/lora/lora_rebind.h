// Rebinding a loaded model's weights in place for another LoRA set: the
// weights either set modifies are written again on the device, each from the
// new set's view of the component (engine/lora/lora_merge.h: the merged f32
// weight made on the device by Backend::lora_merge, or the base's own bits for
// a weight the new set leaves alone), through the path the model's load took
// (WeightLoader::rewrite: the same cast on the backend, the same layout, the
// same fp8 codes), so the device holds the bits a fresh load with the new set
// would. No other tensor is touched; beyond the base bits the sources keep on
// the device (engine/lora/lora_base_bits.h), nothing allocated stays: one
// weight's merge at a time; the forms a backend derived from a rewritten
// block are dropped (Backend::constant_changed). Design and cost:
// docs/adapters.md, "Switching".
//
// Errors: NotFound naming the first weight no parameter of the model holds,
// before anything is written; then the loader's (WeightLoader::rewrite) and
// the merge's (lora_merge.h). A failure after the first write leaves the model
// between the two sets: the caller loads it afresh.
// Thread safety: the backend's thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/lora/lora_set.h"
#include "engine/models/weight_binder.h"
#include "engine/weight_source.h"
#include "kernels/backend.h"

namespace hipq::engine::lora {

struct RebindStats {
  int weights = 0;          // weights written again
  int64_t device_bytes = 0; // their bytes on the device
  // Host clock, ms: the base bits handed over (device copies, or reads and
  // uploads), the merges issued (LoraMergedSource::merge_ms), the writes
  // (cast, layout, fp8 codes) and the one wait for all the device work.
  double base_ms = 0;
  double merge_ms = 0;
  double write_ms = 0;
};

// The weights a switch from the set of signatures `from` to `to` writes
// again (LoraSet::signatures): those either set modifies, except the ones
// both give the same signature (the same pairs of the same files at the same
// coefficients, in the same order: the same merged bits).
// component -> names, sorted.
std::map<std::string, std::vector<std::string>> weights_to_rewrite(const WeightSignatures& from,
                                                                   const WeightSignatures& to);

// `params`: the model's (UNet::bound_params, ClipTextModel::bound_params),
// bound at `dtype` (with `fp8` as the load had it); `names`: the
// weights to write again, from `source`.
Result<RebindStats> rebind_weights(const std::vector<BoundParam>& params, const std::vector<std::string>& names,
                                   const WeightSource& source, kernels::Backend& backend, kernels::DType dtype,
                                   Fp8Weights fp8);

}  // namespace hipq::engine::lora
