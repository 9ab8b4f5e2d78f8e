#include "engine/synthetic.h"

#include <charconv>

#include "base/fs.h"
#include "engine/export.h"
#include "engine/tokenizer.h"
#include "spec/synthetic_models.h"

namespace hipq::engine {

Result<ModelComponents> make_synthetic_model(std::string_view full_name) {
  std::string_view name = full_name;
  if (name.starts_with(spec::kSyntheticModelPrefix)) name.remove_prefix(spec::kSyntheticModelPrefix.size());
  uint64_t seed = 0;
  if (size_t at = name.find('@'); at != std::string_view::npos) {
    std::string_view s = name.substr(at + 1);
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), seed);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty())
      return Status::InvalidArgument("synthetic model '" + std::string(full_name) +
                                     "': the seed after '@' must be a non-negative integer");
    name = name.substr(0, at);
  }
  HIPQ_ASSIGN_OR_RETURN(SyntheticArchitecture arch, synthetic_architecture(name));
  ModelComponents m;
  m.spec = std::string(spec::kSyntheticModelPrefix) + std::string(name) + "@" + std::to_string(seed);
  m.family = arch.family;
  const std::string label = m.spec;
  auto add = [&](const std::string& key, std::vector<ParamSpec> specs, nlohmann::json config) {
    m.weights[key] = std::make_shared<SyntheticWeightSource>(key + " weights of " + label, key, seed, std::move(specs));
    m.configs[key] = std::move(config);
  };
  if (arch.has_text_encoder_1) {
    HIPQ_ASSIGN_OR_RETURN(std::vector<ParamSpec> te1, ClipTextModel::parameters(arch.text_encoder));
    add("text_encoder", std::move(te1), arch.text_encoder.to_json());
  }
  if (arch.has_text_encoder_2) {
    HIPQ_ASSIGN_OR_RETURN(std::vector<ParamSpec> te2, ClipTextModel::parameters(arch.text_encoder_2));
    add("text_encoder_2", std::move(te2), arch.text_encoder_2.to_json());
  }
  HIPQ_ASSIGN_OR_RETURN(std::vector<ParamSpec> unet, UNet::parameters(arch.unet));
  add("unet", std::move(unet), arch.unet.to_json());
  HIPQ_ASSIGN_OR_RETURN(std::vector<ParamSpec> vae, VaeDecoder::parameters(arch.vae));
  add("vae", std::move(vae), arch.vae.to_json());
  m.configs["scheduler"] = default_scheduler_config(arch.family);
  m.configs["model_index"] = diffusers_model_index(arch.family, /*refiner=*/!arch.has_text_encoder_1);

  std::string identity = "hipq synthetic weights v1\n" + std::string(name) + "\n" + std::to_string(seed) + "\n";
  for (const auto& [key, cfg] : m.configs) identity += key + "\n" + cfg.dump() + "\n";
  m.weights_sha256 = sha256_hex(identity);

  HIPQ_ASSIGN_OR_RETURN(m.vocab, find_default_clip_vocab());
  return m;
}

}  // namespace hipq::engine
