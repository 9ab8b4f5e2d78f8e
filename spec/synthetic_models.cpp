#include "spec/synthetic_models.h"

namespace hipq::spec {

const std::vector<std::string>& synthetic_model_names() {
  static const std::vector<std::string> names = {"tiny-sdxl", "tiny-sd15", "tiny-sd2",
                                                 "sdxl",      "sd15",      "sd21"};
  return names;
}

}  // namespace hipq::spec
