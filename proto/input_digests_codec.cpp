#include "proto/input_digests_codec.h"

namespace hipq::proto {

InputDigests to_proto(const spec::InputDigests& d) {
  InputDigests p;
  for (const std::string& l : d.loras) p.add_loras(l);
  p.set_init_image(d.init_image);
  p.set_refiner_weights(d.refiner_weights);
  return p;
}

spec::InputDigests from_proto(const InputDigests& p) {
  spec::InputDigests d;
  d.loras.assign(p.loras().begin(), p.loras().end());
  d.init_image = p.init_image();
  d.refiner_weights = p.refiner_weights();
  return d;
}

}  // namespace hipq::proto
