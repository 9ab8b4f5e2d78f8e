// LoraSet: the LoRAs a job applies, opened, checked against one model and
// folded into its components — everything a pipeline needs before any GPU
// work. open_lora_set() reads each file (engine/lora/lora_file.h), maps every
// pair to the weight it modifies (lora_keys.h), checks every shape against the
// base weight's, and returns the model's components with the touched ones
// replaced by LoraMergedSource views over the same base sources
// (lora_merge.h). The untouched components are the base's own sources.
//
// Errors (each naming the file), in this order: the file's own (lora_file.h);
// a LoRA for another architecture (InvalidArgument naming the key that tells,
// e.g. kohya lora_te_ on SDXL); pairs that match no layer (InvalidArgument
// with the count and the first five); a pair's delta whose shape differs from
// its layer's (InvalidArgument naming the layer and both shapes); two pairs of
// one file on one layer. Scales are spec::LoraSpec::validate()d first.
// Thread safety: a value.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/lora/lora_file.h"
#include "engine/model_components.h"
#include "spec/lora_spec.h"

namespace hipq::engine::lora {

// One applied LoRA, as records name it.
struct AppliedLora {
  spec::LoraSpec spec;
  std::string name;          // file stem
  std::string sha256;        // of the whole file (golden keys, affinity)
  // AUTOMATIC1111's "Lora hashes" value: the first 12 hex digits of the
  // sha256 of the file after its safetensors header (the "addnet" hash the
  // web UI and Civitai (AutoV3) use for safetensors LoRAs).
  std::string a1111_hash;
  LoraFormat format = LoraFormat::kKohya;
  int pairs = 0;             // pairs applied
};

using WeightSignatures = std::map<std::string, std::map<std::string, std::string>>;

struct LoraSet {
  std::vector<AppliedLora> loras;
  ModelComponents components;  // the base's, touched components merged
  int merged_weights = 0;      // distinct weights a delta lands on
  // component -> the weights a delta lands on (sorted).
  std::map<std::string, std::vector<std::string>> targets;
  // component -> weight -> what lands on it: each pair's file (sha256), key
  // and coefficient bits, in order. Two sets giving a weight the same
  // signature merge it to the same bits (engine/lora/lora_rebind.h,
  // weights_to_rewrite).
  WeightSignatures signatures;
};

// `family`: the model's ("sdxl" | "sd1" | "sd2"). An empty `specs` returns
// the base components unchanged.
Result<LoraSet> open_lora_set(const ModelComponents& base, const std::string& family,
                              const std::vector<spec::LoraSpec>& specs);

// The sha256 of the whole file and AUTOMATIC1111's hash (above), one read;
// remembered for the process per file identity (absolute path, device,
// inode, size, mtime, ctime: a rewritten file is read again), so a switch
// back to files already hashed reads none of them for hashing.
struct LoraFileHashes {
  std::string sha256;
  std::string a1111_hash;
};
Result<LoraFileHashes> hash_lora_file(const std::filesystem::path& path);

}  // namespace hipq::engine::lora
