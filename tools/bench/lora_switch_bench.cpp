// hipq_bench_lora_switch: what switching LoRA sets between jobs costs against
// a cold load of the model (docs/adapters.md, "Switching"; issue target: a
// switch under a tenth of a cold load). Not a test.
//
// Loads the model without LoRAs (timed: "cold load ms"), writes two LoRA
// files of the shape people share (PEFT names, f16 pairs of rank --rank on
// every Linear of the UNet's transformer blocks and, with --text-encoders,
// on the text encoders' attention and MLP projections: kohya's default
// targets), then switches none -> A, A -> B and back --repeats times, and
// B -> none, each timed to the end of its device work ("switch ms"), with
// its split ("split ms": reading, hashing and checking the files; handing
// the base bits to the merge; the merges on the backend; the writes: cast,
// layout, fp8 codes) and the base bits then on the device. The first switch
// onto a weight reads its base bits once (kept on the device when the
// memory plan has room, else on the host); the later ones read no
// checkpoint byte.
//   hipq_bench_lora_switch [--model SPEC] [--backend cpu|hip] [--precision fp32|fp16|bf16|fp8]
//                          [--rank N] [--repeats N] [--text-encoders] [--dir DIR]
// Defaults: synthetic:tiny-sdxl, cpu, fp32, rank 32, 3 repeats, files in the
// temporary folder (removed at the end).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/lora/lora_set.h"
#include "engine/model_components.h"
#include "engine/model_files.h"
#include "engine/pipeline.h"
#include "engine/safetensors.h"
#include "kernels/backend.h"
#include "kernels/dtype.h"

namespace {

using namespace hipq;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool unet_target(const std::string& n) {
  // Every Linear of a Transformer2DModel: proj_in/out (linear in SDXL),
  // attn1/attn2 q, k, v, out, the feed-forward's GEGLU and output.
  if (n.find("attentions.") == std::string::npos || !n.ends_with(".weight")) return false;
  for (const char* s : {"proj_in.weight", "proj_out.weight", "to_q.weight", "to_k.weight", "to_v.weight",
                        "to_out.0.weight", "ff.net.0.proj.weight", "ff.net.2.weight"})
    if (n.ends_with(s)) return true;
  return false;
}

bool text_target(const std::string& n) {
  for (const char* s : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                        "self_attn.out_proj.weight", "mlp.fc1.weight", "mlp.fc2.weight"})
    if (n.ends_with(s)) return true;
  return false;
}

// Deterministic values in [-range, range), stored f16.
engine::HostTensor f16_values(std::vector<int64_t> shape, uint32_t& state, float range) {
  engine::HostTensor t = engine::HostTensor::owned(kernels::DType::kF16, std::move(shape));
  auto* p = static_cast<uint16_t*>(t.mutable_data());
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    const float u = static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
    p[i] = kernels::f32_to_f16((2.0f * u - 1.0f) * range);
  }
  return t;
}

struct Written {
  fs::path path;
  int64_t bytes = 0;
  int weights = 0;
  int64_t weight_params = 0;  // elements of the weights the file modifies
};

Result<Written> write_lora(const engine::ModelComponents& model, const fs::path& path, int64_t rank, uint32_t seed,
                           bool text_encoders) {
  std::vector<std::pair<std::string, engine::HostTensor>> tensors;
  Written w;
  w.path = path;
  uint32_t state = seed;
  for (const char* key : {"unet", "text_encoder", "text_encoder_2"}) {
    auto it = model.weights.find(key);
    if (it == model.weights.end() || it->second == nullptr) continue;
    if (std::string(key) != "unet" && !text_encoders) continue;
    for (const std::string& n : it->second->names()) {
      if (std::string(key) == "unet" ? !unet_target(n) : !text_target(n)) continue;
      HIPQ_ASSIGN_OR_RETURN(engine::TensorMeta m, it->second->meta(n));
      if (m.shape.size() != 2) continue;
      const int64_t out = m.shape[0], in = m.shape[1];
      const std::string module = std::string(key) + "." + n.substr(0, n.size() - 7);
      tensors.emplace_back(module + ".lora_A.weight", f16_values({rank, in}, state, 1.0f / std::sqrt(float(in))));
      tensors.emplace_back(module + ".lora_B.weight", f16_values({out, rank}, state, 0.02f));
      ++w.weights;
      w.weight_params += out * in;
    }
  }
  const std::string alpha = std::to_string(rank / 2);
  std::map<std::string, std::string> meta = {
      {"lora_adapter_metadata", "{\"unet.r\": " + std::to_string(rank) + ", \"unet.lora_alpha\": " + alpha +
                                    ", \"text_encoder.lora_alpha\": " + alpha +
                                    ", \"text_encoder_2.lora_alpha\": " + alpha + "}"}};
  HIPQ_RETURN_IF_ERROR(engine::write_safetensors(path, tensors, meta));
  w.bytes = static_cast<int64_t>(fs::file_size(path));
  return w;
}

int fail(const Status& st) {
  std::fprintf(stderr, "hipq_bench_lora_switch: %s\n", st.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_spec = "synthetic:tiny-sdxl", backend_name = "cpu", precision = "fp32";
  int64_t rank = 32;
  int repeats = 3;
  bool text_encoders = false;
  fs::path dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--model" && has_value) model_spec = argv[++i];
    else if (a == "--backend" && has_value) backend_name = argv[++i];
    else if (a == "--precision" && has_value) precision = argv[++i];
    else if (a == "--rank" && has_value) rank = std::max<int64_t>(1, std::atoll(argv[++i]));
    else if (a == "--repeats" && has_value) repeats = std::max(1, std::atoi(argv[++i]));
    else if (a == "--dir" && has_value) dir = argv[++i];
    else if (a == "--text-encoders") text_encoders = true;
    else {
      std::fprintf(stderr,
                   "usage: hipq_bench_lora_switch [--model SPEC] [--backend cpu|hip] [--precision P] [--rank N] "
                   "[--repeats N] [--text-encoders] [--dir DIR]\n");
      return 2;
    }
  }
  const bool own_dir = dir.empty();
  if (own_dir) dir = fs::temp_directory_path() / ("hipq_lora_switch_" + std::to_string(::getpid()));
  std::error_code ec;
  fs::create_directories(dir, ec);

  auto backend = kernels::make_backend(backend_name);
  if (!backend.ok()) return fail(backend.status());
  kernels::Backend& be = **backend;
  engine::LoadOptions options;
  options.precision = precision;

  // Cold load: the model opened and every weight uploaded.
  auto t0 = Clock::now();
  auto model = engine::open_model(model_spec);
  if (!model.ok()) return fail(model.status());
  auto pipe = engine::Pipeline::load(*model, be, options);
  if (!pipe.ok()) return fail(pipe.status());
  const double cold_ms = ms_since(t0);
  std::printf("model %s, backend %s (%s), precision %s, rank %lld%s\n", model_spec.c_str(),
              be.info().name.c_str(), be.info().device_name.c_str(), precision.c_str(), static_cast<long long>(rank),
              text_encoders ? ", UNet + text encoders" : ", UNet");
  std::printf("cold load ms %.1f (open + load; the models' load alone %.1f)\n", cold_ms, (*pipe)->load_ms());

  t0 = Clock::now();
  auto a = write_lora(*model, dir / "switch_a.safetensors", rank, 1, text_encoders);
  if (!a.ok()) return fail(a.status());
  auto b = write_lora(*model, dir / "switch_b.safetensors", rank, 2, text_encoders);
  if (!b.ok()) return fail(b.status());
  std::printf("lora files: 2 x %.1f MB, %d weights each (%.1f M weight elements), written in %.0f ms\n",
              static_cast<double>(a->bytes) / 1e6, a->weights, static_cast<double>(a->weight_params) / 1e6,
              ms_since(t0));
  const std::vector<spec::LoraSpec> set_a = {{a->path.string(), 0.8f}};
  const std::vector<spec::LoraSpec> set_b = {{b->path.string(), 0.6f}};

  // What reading and checking a set costs alone (files, hashes, key mapping).
  t0 = Clock::now();
  auto opened = engine::lora::open_lora_set(*model, (*pipe)->family(), set_a);
  if (!opened.ok()) return fail(opened.status());
  std::printf("open set ms %.1f (read, hash and check one file; part of every switch)\n", ms_since(t0));

  auto timed_switch = [&](const std::vector<spec::LoraSpec>& set, const char* what) -> Result<double> {
    HIPQ_RETURN_IF_ERROR(be.synchronize());
    const auto s0 = Clock::now();
    HIPQ_RETURN_IF_ERROR((*pipe)->set_loras(set));
    HIPQ_RETURN_IF_ERROR(be.synchronize());
    const double ms = ms_since(s0);
    std::printf("switch ms %.1f (%s)\n", ms, what);
    const engine::LoraSwitchSplit& sp = (*pipe)->last_lora_switch();
    std::printf("  split ms: files (read, hash, check) %.1f, base bits %.1f, merge %.1f, rewrite %.1f, other %.1f; "
                "%d weights; base bits on the device %.1f MB\n",
                sp.files_ms, sp.base_ms, sp.merge_ms, sp.rewrite_ms,
                ms - sp.files_ms - sp.base_ms - sp.merge_ms - sp.rewrite_ms, sp.weights,
                static_cast<double>(sp.device_base_bytes) / 1e6);
    return ms;
  };
  std::vector<double> warm;
  auto first = timed_switch(set_a, "none -> A, first use: base bits read once and kept");
  if (!first.ok()) return fail(first.status());
  for (int r = 0; r < repeats; ++r) {
    auto ab = timed_switch(set_b, "A -> B");
    if (!ab.ok()) return fail(ab.status());
    auto ba = timed_switch(set_a, "B -> A");
    if (!ba.ok()) return fail(ba.status());
    warm.push_back(*ab);
    warm.push_back(*ba);
  }
  auto none = timed_switch({}, "A -> none");
  if (!none.ok()) return fail(none.status());
  std::sort(warm.begin(), warm.end());
  const double median = warm[warm.size() / 2];
  std::printf("switch ms median %.1f over %zu A <-> B switches; cold load ms %.1f; cold load / switch = %.1fx\n",
              median, warm.size(), cold_ms, cold_ms / median);
  if (own_dir) fs::remove_all(dir, ec);
  return 0;
}
