// LoraFile: one LoRA adapter file read into its low-rank pairs, before any
// model is looked at. Formats (docs/adapters.md):
//   kohya / AUTOMATIC1111   lora_unet_<module>, lora_te_<module> (SD 1.x/2.x),
//                           lora_te1_ / lora_te2_ (SDXL); <key>.lora_down.weight,
//                           <key>.lora_up.weight, <key>.alpha. The module name
//                           has its dots written as '_' (diffusers-style or the
//                           original SGM/LDM UNet names; engine/lora/lora_keys.h
//                           maps both).
//   diffusers / PEFT        unet.<module>, text_encoder.<module>,
//                           text_encoder_2.<module> (also PEFT's
//                           base_model.model.<module> = unet); <key>.lora_A.weight
//                           / .lora_B.weight (older diffusers: .lora.down.weight /
//                           .lora.up.weight), optional <key>.alpha, else
//                           "lora_adapter_metadata" {"unet.lora_alpha": ...},
//                           else alpha = rank.
// Linear pairs are down [r, in], up [out, r]; conv ("LoCon") pairs are down
// [r, in, kh, kw], up [out, r, 1, 1].
//
// Bounded on hostile input: the safetensors reader validates the header and
// every byte range before anything is read (engine/safetensors.h); here each
// pair's shapes are checked (rank > 0 and equal on both sides, rank at most
// kMaxLoraRank, 2 or 4 dims) before any value is touched, and only alpha
// scalars are read. Errors name the file and the key:
//   InvalidArgument  not a safetensors file; a tensor of no known LoRA form
//                    (names the first few and the count); a pair missing a
//                    half; rank 0 or ranks that disagree; alpha not finite;
//   Unimplemented    LyCORIS kinds hipq does not apply (LoHa, LoKr, Tucker
//                    LoCon, DoRA, OFT, full diffs), named.
// Thread safety: a LoraFile is a value; its HostTensors share the mapping.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/safetensors.h"

namespace hipq::engine::lora {

inline constexpr int64_t kMaxLoraRank = 4096;

enum class LoraFormat { kKohya, kDiffusers };
const char* lora_format_name(LoraFormat f);  // "kohya" | "diffusers"

// Which model a pair modifies.
enum class LoraTarget { kUnet, kTextEncoder, kTextEncoder1, kTextEncoder2 };

// One low-rank pair: delta = (alpha / rank) * up @ down.
struct LoraPair {
  std::string key;      // the file's name of the module ("lora_unet_..._to_q", "unet.....to_q")
  LoraTarget target = LoraTarget::kUnet;
  // The module name after the target prefix: kohya "down_blocks_0_..._to_q"
  // (underscored), diffusers "down_blocks.0.....to_q" (dotted).
  std::string module;
  bool underscored = false;
  HostTensor down;      // [r, in] | [r, in, kh, kw]
  HostTensor up;        // [out, r] | [out, r, 1, 1]
  float alpha = 0;      // resolved: the file's, the metadata's, else rank
  int64_t rank = 0;
  // The delta as a [out, in * kh * kw] matrix product.
  int64_t out_features() const { return up.shape[0]; }
  int64_t in_features() const;  // in * kh * kw
};

struct LoraFile {
  std::filesystem::path path;
  std::string name;     // file stem: what <lora:NAME:SCALE> and "Lora hashes" say
  LoraFormat format = LoraFormat::kKohya;
  std::vector<LoraPair> pairs;  // in the file's (sorted) key order
  std::shared_ptr<const SafetensorsFile> file;
};

// Opens and parses `path`.
Result<LoraFile> read_lora_file(const std::filesystem::path& path);
// Parses an opened file.
Result<LoraFile> parse_lora(std::shared_ptr<const SafetensorsFile> file);

}  // namespace hipq::engine::lora
