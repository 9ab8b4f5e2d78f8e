// LoraKeyMap: which weight of which model a LoRA pair modifies.
//
// Built from the model's own weight names (the diffusers names every
// component's WeightSource speaks, whatever the file layout), so a name is
// matched against what the model binds and nothing else:
//   diffusers / PEFT  "unet.down_blocks.1.attentions.0.proj_in" -> unet
//                     "down_blocks.1.attentions.0.proj_in.weight" (dotted, exact);
//   kohya, diffusers-style names  "lora_unet_down_blocks_1_attentions_0_proj_in":
//                     the module path with '.' written '_' (each component's
//                     names so written are unique; a collision is refused);
//   kohya, SGM/LDM names  "lora_unet_input_blocks_4_1_proj_in",
//                     "lora_unet_middle_block_1_...", "lora_unet_output_blocks_...",
//                     ResBlock "in_layers_2"/"out_layers_3"/"emb_layers_1"/
//                     "skip_connection", "input_blocks_3_0_op", "..._conv":
//                     the block position goes through sgm_unet_name()
//                     (engine/checkpoint_keys.h, the single-file checkpoint
//                     mapping), the rest is matched underscored as above.
//   Text encoders: lora_te_ / lora_te1_ / text_encoder. -> text_encoder,
//                  lora_te2_ / text_encoder_2. -> text_encoder_2.
// Thread safety: immutable after for_model().
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "engine/lora/lora_file.h"
#include "engine/model_components.h"

namespace hipq::engine::lora {

struct LoraBinding {
  std::string component;  // "unet" | "text_encoder" | "text_encoder_2"
  std::string weight;     // the diffusers weight name, "...to_q.weight"
};

class LoraKeyMap {
 public:
  // `family`: "sdxl" | "sd1" | "sd2".
  static LoraKeyMap for_model(const ModelComponents& model, const std::string& family);
  // nullopt when the pair names no weight of the model.
  std::optional<LoraBinding> resolve(const LoraPair& pair) const;
  const std::string& family() const { return family_; }
  // The base weight source of a component (nullptr when absent).
  std::shared_ptr<WeightSource> source(const std::string& component) const;

 private:
  struct Names {
    std::shared_ptr<WeightSource> source;
    std::map<std::string, std::string> dotted;       // module path -> weight name
    std::map<std::string, std::string> underscored;  // module path with '_' -> weight name ("" = ambiguous)
  };
  std::optional<LoraBinding> lookup(const std::string& component, const std::string& module, bool underscored) const;
  std::string family_;
  std::map<std::string, Names> components_;
};

// The component a target reads ("unet", "text_encoder", "text_encoder_2").
const char* target_component(LoraTarget t);

// The family a LoRA was made for, when its keys or shapes say so: "sdxl",
// "sd1/sd2" (one CLIP text encoder: kohya lora_te_), or "" when they do not
// tell. `evidence` gets the key that told.
std::string lora_family_hint(const LoraFile& file, std::string* evidence);

}  // namespace hipq::engine::lora
