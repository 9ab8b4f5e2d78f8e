#include "coordinator/manifest_files.h"

#include <array>
#include <cstdint>
#include <fstream>
#include <string_view>
#include <system_error>

#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "spec/init_image.h"

namespace hipq::coordinator {
namespace {

namespace fs = std::filesystem;

constexpr std::array<std::string_view, 8> kPairSuffixes = {".lora_down.weight", ".lora_up.weight",
                                                           ".lora_A.weight",    ".lora_B.weight",
                                                           ".lora.down.weight", ".lora.up.weight",
                                                           "_lora.down.weight", "_lora.up.weight"};

struct Unsupported {
  std::string_view marker;
  std::string_view kind;
};
// engine/lora/lora_file.cpp refuses the same kinds with the same words.
constexpr std::array<Unsupported, 6> kUnsupported = {{
    {".hada_", "LoHa (LyCORIS Hadamard product)"},
    {".lokr_", "LoKr (LyCORIS Kronecker product)"},
    {".lora_mid.", "LoCon with a Tucker core (LyCORIS lora_mid)"},
    {".dora_scale", "DoRA (weight-decomposed LoRA)"},
    {".oft_", "OFT (LyCORIS orthogonal fine-tuning)"},
    {".lora_magnitude_vector", "DoRA (PEFT lora_magnitude_vector)"},
}};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

Status check_regular_file(const fs::path& path, const std::string& what) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) return Status::NotFound(what + " " + path.string() + " does not exist");
  if (!fs::is_regular_file(status)) return Status::InvalidArgument(what + " " + path.string() + " is not a file");
  return Status::Ok();
}

}  // namespace

Result<std::string> check_lora_file(const fs::path& path) {
  const std::string name = "LoRA file " + path.string();
  HIPQ_RETURN_IF_ERROR(check_regular_file(path, "LoRA file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::PermissionDenied(name + " cannot be read");
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return Status::IOError(name + ": " + ec.message());
  unsigned char len_bytes[8] = {};
  if (size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8))
    return Status::InvalidArgument(name + " is not a safetensors file (shorter than its 8-byte header length)");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len < 2 || header_len > kMaxLoraHeaderBytes || header_len > size - 8)
    return Status::InvalidArgument(name + " is not a safetensors file (header length " + std::to_string(header_len) +
                                   " for a file of " + std::to_string(size) + " bytes)");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_len)))
    return Status::IOError(name + ": the header could not be read");
  const nlohmann::json j = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::InvalidArgument(name + " is not a safetensors file (its header is not a JSON object)");
  const uint64_t data_bytes = size - 8 - header_len;
  int pairs = 0;
  for (const auto& [key, t] : j.items()) {
    if (key == "__metadata__") continue;
    for (const Unsupported& u : kUnsupported) {
      if (key.find(u.marker) != std::string::npos)
        return Status::Unimplemented(name + ": " + std::string(u.kind) + " (tensor " + key +
                                     ") is not supported; hipq applies LoRA and LoCon pairs (docs/adapters.md)");
    }
    const bool valid = t.is_object() && t.contains("dtype") && t.contains("shape") && t.contains("data_offsets") &&
                       t.at("data_offsets").is_array() && t.at("data_offsets").size() == 2 &&
                       t.at("data_offsets")[0].is_number_unsigned() && t.at("data_offsets")[1].is_number_unsigned() &&
                       t.at("data_offsets")[0].get<uint64_t>() <= t.at("data_offsets")[1].get<uint64_t>() &&
                       t.at("data_offsets")[1].get<uint64_t>() <= data_bytes;
    if (!valid)
      return Status::InvalidArgument(name + ": tensor " + key +
                                     " has no valid dtype, shape and data_offsets inside the file (damaged?)");
    for (std::string_view suffix : kPairSuffixes)
      if (ends_with(key, suffix)) ++pairs;
  }
  if (pairs == 0)
    return Status::InvalidArgument(name + " holds no LoRA pairs (no .lora_down/.lora_up or .lora_A/.lora_B "
                                          "tensors): is it a LoRA? (docs/adapters.md)");
  in.close();
  return sha256_file(path);
}

Result<std::string> check_init_image_file(const fs::path& path, int width, int height) {
  HIPQ_RETURN_IF_ERROR(check_regular_file(path, "init image"));
  HIPQ_RETURN_IF_ERROR(spec::read_init_image(path, {width, height}).status());
  return sha256_file(path);
}

}  // namespace hipq::coordinator
