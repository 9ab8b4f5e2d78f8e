#include "kernels/hip/route_switches.h"

#include <cstdlib>
#include <string_view>

namespace hipq::kernels {

RouteSwitches route_switches(const std::function<const char*(const char*)>& lookup) {
  const auto value = [&lookup](const char* name) {
    const char* v = lookup(name);
    return v ? std::string_view(v) : std::string_view();
  };
  RouteSwitches s;
  s.wgmma = lookup("HIPQ_NO_WGMMA") == nullptr;
  const std::string_view tma = value("HIPQ_GEMM_TMA");
  s.gemm_tma = tma == "0"     ? 0
               : tma == "128" ? 128
               : tma == "160" ? 160
               : tma == "192" ? 192
               : tma == "256" ? 256
                              : -1;
  s.gemm_tma_fp8_n = value("HIPQ_GEMM_TMA_FP8") == "128" ? 128 : 160;
  s.fp32_wgmma = value("HIPQ_FP32_WGMMA") != "0";
  s.conv_nhwc = value("HIPQ_CONV_NHWC") != "0";
  const std::string_view attn = value("HIPQ_ATTN_WGMMA");
  s.attention_wgmma = attn != "0";
  s.attention_wgmma_consumers = attn == "3" ? 3 : attn == "auto" ? 0 : 2;
  s.attention_wgmma_key_tails = value("HIPQ_ATTN_WGMMA_KEYS") == "any";
  return s;
}

RouteSwitches route_switches_from_env() {
  return route_switches([](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace hipq::kernels
