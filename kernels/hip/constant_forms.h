// Forms of constant device tensors derived once and kept: e.g. conv weights
// rearranged into the layout the matrix-unit conv reads ([O, kh, kw, C]),
// which would otherwise be rebuilt from [O, C, kh, kw] on every call.
//
// A block is constant from hold() (the caller promises its bytes do not
// change while it lives: Backend::hold_constant, called by the engine's
// weight loader) until the backend releases it; release() drops the block and
// every form derived from it, so a later block at the same address starts
// clean. No form is made while a graph is being captured (the kernel that
// fills it would only run on replay); ops then derive into scratch as before.
// One backend, one thread: no locking. Plain C++ (no HIP includes).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "kernels/backend.h"

namespace hipq::kernels {

class ConstantForms {
 public:
  // Form ids: what was derived, including the element size it was made for.
  enum Form : int { kTapsLast16 = 1 };
  using Shape = std::array<int64_t, 4>;

  void hold(const void* block, size_t bytes) { held_[block] = bytes; }

  // Whether [data, data + bytes) is the start of a held block, within it.
  bool is_constant(const void* data, size_t bytes) const {
    auto it = held_.find(data);
    return it != held_.end() && bytes <= it->second;
  }

  // The form of the tensor of `shape` at the start of held block `src`, or
  // null (two views of one block are told apart by their shapes).
  const void* find(const void* src, Form form, const Shape& shape) const {
    auto it = forms_.find({src, form});
    return it == forms_.end() || it->second.shape != shape ? nullptr : it->second.buffer.data();
  }

  // Keeps `derived` as `form` of the tensor of `shape` at held block `src`.
  void put(const void* src, Form form, const Shape& shape, Buffer derived) {
    forms_[{src, form}] = Derived{shape, std::move(derived)};
  }

  // The caller releases `block`: it stops being constant, and its forms are
  // handed back to be destroyed after the caller has finished its own
  // bookkeeping (their release re-enters the backend).
  std::vector<Buffer> drop(const void* block) {
    std::vector<Buffer> out;
    if (held_.erase(block) == 0) return out;
    for (auto it = forms_.lower_bound({block, 0}); it != forms_.end() && it->first.first == block;) {
      out.push_back(std::move(it->second.buffer));
      it = forms_.erase(it);
    }
    return out;
  }

  // Every form, for a backend about to free its memory.
  std::vector<Buffer> drop_all() {
    std::vector<Buffer> out;
    for (auto& [key, d] : forms_) out.push_back(std::move(d.buffer));
    forms_.clear();
    held_.clear();
    return out;
  }

  bool capturing = false;  // set by the backend around a graph capture

 private:
  struct Derived {
    Shape shape{};
    Buffer buffer;
  };
  std::map<const void*, size_t> held_;                   // block -> its bytes
  std::map<std::pair<const void*, int>, Derived> forms_;  // (block, form) -> derived buffer
};

}  // namespace hipq::kernels
