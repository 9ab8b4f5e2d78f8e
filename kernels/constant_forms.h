// Forms of constant tensors derived once and kept by a backend: e.g. conv
// weights rearranged into the layout the hip backend's matrix-unit conv
// reads ([O, kh, kw, C]), which would otherwise be rebuilt from
// [O, C, kh, kw] on every call.
//
// A block is constant from hold() (the caller promises its bytes do not
// change while it lives: Backend::hold_constant, called by the engine's
// weight loader) until its backend releases it; drop() then forgets the block
// and hands back every form derived from it, so a later block at the same
// address starts clean. Forms are told apart by id and by the shape of the
// tensor they were made from. The op that derives a form does not keep it
// while its stream is being captured into a graph (the kernel that fills it
// would only run on replay). One backend, one thread: no locking.
//
// The maps live in constant_forms.cpp, compiled by the host compiler only:
// GPU translation units (which include this header through hip_ops.h) see
// declarations and no container instantiations.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.h"

namespace hipq::kernels {

class ConstantForms {
 public:
  // Form ids: what was derived, including the element size it was made for.
  enum Form : int { kTapsLast16 = 1 };
  using Shape = std::array<int64_t, 4>;

  ConstantForms();
  ~ConstantForms();
  ConstantForms(const ConstantForms&) = delete;
  ConstantForms& operator=(const ConstantForms&) = delete;

  void hold(const void* block, size_t bytes);
  // Whether `data` is the start of a held block and `bytes` lie within it.
  bool is_constant(const void* data, size_t bytes) const;
  // The form of the tensor of `shape` at held block `src`, or null.
  const void* find(const void* src, Form form, const Shape& shape) const;
  // Keeps `derived` as `form` of the tensor of `shape` at held block `src`
  // (ignored when `src` is not held).
  void put(const void* src, Form form, const Shape& shape, Buffer derived);
  // `block` is being released: it stops being constant, and its forms are
  // handed back, to be destroyed after the caller's own bookkeeping (their
  // release re-enters the backend).
  std::vector<Buffer> drop(const void* block);
  // `block`'s bytes changed: its forms are handed back (as drop's), and it
  // stays held.
  std::vector<Buffer> forget(const void* block);
  // Every form handed back; the held blocks stay held (their forms are made
  // again on next use).
  std::vector<Buffer> drop_forms();
  // Every form, for a backend about to free its memory.
  std::vector<Buffer> drop_all();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hipq::kernels
