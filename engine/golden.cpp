#include "engine/golden.h"

#include <cstring>
#include <map>

#include "base/fs.h"
#include "engine/safetensors.h"

namespace hipq::engine {
namespace {

constexpr const char* kLatent = spec::kGoldenLatentTensor.data();
constexpr const char* kImage = spec::kGoldenImageTensor.data();

}  // namespace

std::string golden_content_sha256(const Golden& g) {
  std::string bytes;
  bytes.reserve(g.latent.size() * sizeof(float) + g.image.size());
  bytes.append(reinterpret_cast<const char*>(g.latent.data()), g.latent.size() * sizeof(float));
  bytes.append(reinterpret_cast<const char*>(g.image.data()), g.image.size());
  return sha256_hex(bytes);
}

Status write_golden(const std::filesystem::path& path, Golden g) {
  int64_t numel = 1;
  for (int64_t d : g.latent_shape) numel *= d;
  if (g.latent_shape.empty() || numel != static_cast<int64_t>(g.latent.size()))
    return Status::InvalidArgument(path.string() + ": golden latent holds " + std::to_string(g.latent.size()) +
                                   " values, its shape says " + std::to_string(numel));
  if (g.has_image() &&
      static_cast<size_t>(g.image_width) * static_cast<size_t>(g.image_height) * 3 != g.image.size())
    return Status::InvalidArgument(path.string() + ": golden image holds " + std::to_string(g.image.size()) +
                                   " bytes, not " + std::to_string(g.image_width) + "x" +
                                   std::to_string(g.image_height) + "x3");
  g.key = spec::golden_key(g.weights_sha256, g.settings, g.inputs);
  g.content_sha256 = golden_content_sha256(g);

  std::vector<std::pair<std::string, HostTensor>> tensors;
  tensors.emplace_back(kLatent, HostTensor::from_f32(g.latent, g.latent_shape));
  if (g.has_image()) {
    HostTensor img = HostTensor::owned(kernels::DType::kU8, {g.image_height, g.image_width, 3});
    std::memcpy(img.mutable_data(), g.image.data(), g.image.size());
    tensors.emplace_back(kImage, std::move(img));
  }
  return write_safetensors(path, tensors, spec::golden_metadata(g));
}

Result<Golden> read_golden(const std::filesystem::path& path, const GoldenReadOptions& options) {
  const std::string file = path.string();
  auto opened = SafetensorsFile::open(path);
  if (!opened.ok()) return opened.status().WithContext("golden");
  const auto& st = *opened;

  auto header = spec::read_golden_metadata(st->metadata(), file);
  if (!header.ok()) return header.status();
  Golden g;
  static_cast<spec::GoldenHeader&>(g) = std::move(*header);

  // Tensors and content hash first: a damaged file is refused whatever its provenance says.
  auto latent = st->get(kLatent);
  if (!latent.ok()) return Status::Corruption(file + ": golden has no \"latent\" tensor");
  if (latent->dtype != kernels::DType::kF32 || latent->shape.size() != 4)
    return Status::Corruption(file + ": golden \"latent\" must be f32 with 4 dims, is " + latent->describe());
  std::string bytes(static_cast<const char*>(latent->data), latent->nbytes);
  if (st->contains(kImage)) {
    auto image = st->get(kImage);
    if (!image.ok()) return image.status();
    if (image->dtype != kernels::DType::kU8 || image->shape.size() != 3 || image->shape[2] != 3)
      return Status::Corruption(file + ": golden \"image\" must be u8 [H, W, 3], is " + image->describe());
    bytes.append(static_cast<const char*>(image->data), image->nbytes);
    if (options.load_tensors) {
      g.image_height = static_cast<int>(image->shape[0]);
      g.image_width = static_cast<int>(image->shape[1]);
      const auto* p = static_cast<const uint8_t*>(image->data);
      g.image.assign(p, p + image->nbytes);
    }
  }
  std::string actual = sha256_hex(bytes);
  if (g.content_sha256.empty())
    return Status::Corruption(file + ": golden metadata has no \"content_sha256\"");
  if (actual != g.content_sha256)
    return Status::Corruption(file + ": content hash mismatch: metadata says " + g.content_sha256 +
                              ", tensors hash to " + actual + " (the file was modified or damaged)");
  if (options.load_tensors) {
    g.latent_shape = latent->shape;
    g.latent.resize(latent->nbytes / sizeof(float));
    std::memcpy(g.latent.data(), latent->data, latent->nbytes);
  }

  HIPQ_ASSIGN_OR_RETURN(g.pinned, spec::check_golden_header(g, file, options.allow_unpinned));
  return g;
}

}  // namespace hipq::engine
