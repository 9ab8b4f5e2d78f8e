#include "proto/settings_codec.h"

namespace hipq::proto {

GenerationSettings to_proto(const spec::GenerationSettings& s) {
  GenerationSettings p;
  p.set_prompt(s.prompt);
  p.set_negative_prompt(s.negative_prompt);
  p.set_seed(s.seed);
  p.set_width(s.width);
  p.set_height(s.height);
  p.set_steps(s.steps);
  p.set_guidance(s.guidance);
  p.set_sampler(s.sampler);
  p.set_precision(s.precision);
  p.set_rng(s.rng);
  p.set_timestep_spacing(s.timestep_spacing);
  p.set_guidance_rescale(s.guidance_rescale);
  for (const spec::LoraSpec& l : s.loras) {
    LoraSetting* out = p.add_loras();
    out->set_path(l.path);
    out->set_scale(l.scale);
  }
  p.set_init_image(s.init_image);
  p.set_strength(s.strength);
  p.set_refiner(s.refiner);
  p.set_refiner_switch_at(s.refiner_switch_at);
  p.set_aesthetic_score(s.aesthetic_score);
  p.set_negative_aesthetic_score(s.negative_aesthetic_score);
  p.set_vae_precision(s.vae_precision);
  return p;
}

spec::GenerationSettings from_proto(const GenerationSettings& p) {
  spec::GenerationSettings s;
  s.prompt = p.prompt();
  s.negative_prompt = p.negative_prompt();
  s.seed = p.seed();
  s.width = p.width();
  s.height = p.height();
  s.steps = p.steps();
  s.guidance = p.guidance();
  s.sampler = p.sampler();
  s.precision = p.precision();
  s.rng = p.rng();
  s.timestep_spacing = p.timestep_spacing();
  s.guidance_rescale = p.guidance_rescale();
  for (const LoraSetting& l : p.loras()) s.loras.push_back(spec::LoraSpec{l.path(), l.scale()});
  s.init_image = p.init_image();
  s.strength = p.strength();
  s.refiner = p.refiner();
  s.refiner_switch_at = p.refiner_switch_at();
  s.aesthetic_score = p.aesthetic_score();
  s.negative_aesthetic_score = p.negative_aesthetic_score();
  s.vae_precision = p.vae_precision();
  return s;
}

}  // namespace hipq::proto
