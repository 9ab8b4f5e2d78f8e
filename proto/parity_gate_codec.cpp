#include "proto/parity_gate_codec.h"

namespace hipq::proto {

ParityGate to_proto(const spec::ParityGate& g) {
  ParityGate p;
  if (g.cosine_min_set && g.cosine_min) p.set_cosine_min(*g.cosine_min);
  p.set_cosine_min_set(g.cosine_min_set);
  if (g.max_abs_max) p.set_max_abs_max(*g.max_abs_max);
  if (g.rel_l2_max) p.set_rel_l2_max(*g.rel_l2_max);
  if (g.psnr_min) p.set_psnr_min(*g.psnr_min);
  p.set_psnr_min_set(g.psnr_min_set);
  return p;
}

spec::ParityGate from_proto(const ParityGate& p) {
  spec::ParityGate g;
  g.cosine_min_set = p.cosine_min_set();
  // Unset: the general default held for display, whatever the message says.
  g.cosine_min = !g.cosine_min_set    ? std::optional<double>(spec::kDefaultCosineMin)
                 : p.has_cosine_min() ? std::optional<double>(p.cosine_min())
                                      : std::nullopt;
  if (p.has_max_abs_max()) g.max_abs_max = p.max_abs_max();
  if (p.has_rel_l2_max()) g.rel_l2_max = p.rel_l2_max();
  if (p.has_psnr_min()) g.psnr_min = p.psnr_min();
  g.psnr_min_set = p.psnr_min_set();
  return g;
}

}  // namespace hipq::proto
