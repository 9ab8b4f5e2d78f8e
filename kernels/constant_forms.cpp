#include "kernels/constant_forms.h"

#include <map>
#include <utility>

namespace hipq::kernels {

struct ConstantForms::Impl {
  struct Derived {
    Shape shape{};
    Buffer buffer;
  };
  std::map<const void*, size_t> held;                    // block -> its bytes
  std::map<std::pair<const void*, int>, Derived> forms;  // (block, form) -> derived buffer
};

ConstantForms::ConstantForms() : impl_(std::make_unique<Impl>()) {}
ConstantForms::~ConstantForms() = default;

void ConstantForms::hold(const void* block, size_t bytes) { impl_->held[block] = bytes; }

bool ConstantForms::is_constant(const void* data, size_t bytes) const {
  auto it = impl_->held.find(data);
  return it != impl_->held.end() && bytes <= it->second;
}

const void* ConstantForms::find(const void* src, Form form, const Shape& shape) const {
  auto it = impl_->forms.find({src, form});
  return it == impl_->forms.end() || it->second.shape != shape ? nullptr : it->second.buffer.data();
}

void ConstantForms::put(const void* src, Form form, const Shape& shape, Buffer derived) {
  if (!impl_->held.contains(src)) return;
  impl_->forms[{src, form}] = Impl::Derived{shape, std::move(derived)};
}

std::vector<Buffer> ConstantForms::drop(const void* block) {
  if (impl_->held.erase(block) == 0) return {};
  return forget(block);
}

std::vector<Buffer> ConstantForms::drop_forms() {
  std::vector<Buffer> out;
  for (auto& [key, d] : impl_->forms) out.push_back(std::move(d.buffer));
  impl_->forms.clear();
  return out;
}

std::vector<Buffer> ConstantForms::forget(const void* block) {
  std::vector<Buffer> out;
  auto& forms = impl_->forms;
  for (auto it = forms.lower_bound({block, 0}); it != forms.end() && it->first.first == block;) {
    out.push_back(std::move(it->second.buffer));
    it = forms.erase(it);
  }
  return out;
}

std::vector<Buffer> ConstantForms::drop_all() {
  std::vector<Buffer> out;
  for (auto& [key, d] : impl_->forms) out.push_back(std::move(d.buffer));
  impl_->forms.clear();
  impl_->held.clear();
  return out;
}

}  // namespace hipq::kernels
