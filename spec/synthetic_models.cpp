#include "spec/synthetic_models.h"

namespace hipq::spec {

const std::vector<std::string>& synthetic_model_names() {
  static const std::vector<std::string> names = {"tiny-sdxl", "tiny-sd15", "tiny-sd2", "tiny-sdxl-refiner",
                                                 "sdxl",      "sd15",      "sd21",     "sdxl-refiner"};
  return names;
}

}  // namespace hipq::spec
