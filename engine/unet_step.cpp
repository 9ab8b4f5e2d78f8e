#include "engine/unet_step.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace hipq::engine {

using kernels::DType;

Result<UNetStep> UNetStep::make(kernels::Backend& backend, const UNet& unet, const kernels::Tensor& hidden,
                                const kernels::Tensor* pooled, const std::vector<float>& time_ids, int batch,
                                int64_t lh, int64_t lw, const std::vector<float>& timesteps) {
  UNetStep s;
  s.be_ = &backend;
  s.unet_ = &unet;
  s.hidden_ = &hidden;
  s.pooled_ = pooled;
  s.batch_ = batch;
  const int64_t lc = unet.config().in_channels;
  HIPQ_ASSIGN_OR_RETURN(s.input_f32_, DeviceTensor::make(backend, DType::kF32, {batch, lc, lh, lw}));
  if (unet.precision() != DType::kF32) {
    HIPQ_ASSIGN_OR_RETURN(s.input_, DeviceTensor::make(backend, unet.precision(), {batch, lc, lh, lw}));
  }
  HIPQ_ASSIGN_OR_RETURN(s.timesteps_, DeviceTensor::make(backend, DType::kF32, {batch}));
  if (timesteps.empty()) return Status::InvalidArgument("unet step: no timesteps");
  std::vector<float> table;
  for (float t : timesteps) table.insert(table.end(), static_cast<size_t>(batch), t);
  s.steps_ = static_cast<int>(timesteps.size());
  HIPQ_ASSIGN_OR_RETURN(s.timestep_table_,
                        DeviceTensor::from_host(backend, table.data(), {s.steps_, batch}, DType::kF32));
  if (unet.precision() != DType::kF32) {
    HIPQ_ASSIGN_OR_RETURN(s.out_f32_, DeviceTensor::make(backend, DType::kF32, {batch, lc, lh, lw}));
  }
  if (!time_ids.empty()) {
    HIPQ_ASSIGN_OR_RETURN(s.time_ids_, DeviceTensor::from_host(backend, time_ids.data(),
                                                              {static_cast<int64_t>(time_ids.size())}, DType::kF32));
  }
  // The text context is the same in every step: its cross-attention
  // projections are made here, once, outside any captured graph.
  HIPQ_ASSIGN_OR_RETURN(ContextKV kv, unet.project_context(backend, hidden));
  s.context_kv_.emplace(std::move(kv));
  const char* env = std::getenv("HIPQ_STEP_GRAPHS");
  s.use_graph_ = !(env && std::strcmp(env, "0") == 0);
  return s;
}

Status UNetStep::forward_into_out() {
  const kernels::Tensor* sample = &input_f32_.t;
  if (input_.buffer.data() != nullptr) {
    HIPQ_RETURN_IF_ERROR(be_->copy(input_f32_.t, input_.t));
    sample = &input_.t;
  }
  UNetInputs in;
  in.sample = sample;
  in.timesteps_device = &timesteps_.t;
  in.encoder_hidden_states = hidden_;
  in.context_kv = context_kv_ ? &*context_kv_ : nullptr;
  if (pooled_ != nullptr) {
    in.text_embeds = pooled_;
    in.time_ids_device = &time_ids_.t;
  }
  out_.reset();
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor pred, unet_->forward(*be_, in));
  out_.emplace(std::move(pred));
  if (out_f32_.buffer.data() != nullptr) HIPQ_RETURN_IF_ERROR(be_->copy(out_->t, out_f32_.t));
  return Status::Ok();
}

Result<const kernels::Tensor*> UNetStep::run(const kernels::Tensor& latents, int step) {
  const int64_t all = input_f32_.t.numel(), one = all / batch_;
  const int64_t given = latents.numel() / one;  // latents given; each fills batch_ / given entries in a row
  if (latents.dtype != DType::kF32 || !latents.is_contiguous() || latents.numel() % one != 0 || given == 0 ||
      batch_ % given != 0)
    return Status::InvalidArgument("unet step: latents " + latents.describe() + " must be contiguous f32 of k * " +
                                   std::to_string(one) + " values, k dividing the batch of " +
                                   std::to_string(batch_));
  if (step < 0 || step >= steps_)
    return Status::InvalidArgument("unet step: step " + std::to_string(step) + " outside the " +
                                   std::to_string(steps_) + " timesteps of this generation");
  const int64_t repeat = batch_ / given;
  const size_t bytes = static_cast<size_t>(one) * sizeof(float);
  for (int64_t i = 0; i < given; ++i)
    for (int64_t r = 0; r < repeat; ++r)
      HIPQ_RETURN_IF_ERROR(be_->copy_device(static_cast<const float*>(latents.data) + i * one,
                                            static_cast<float*>(input_f32_.t.data) + (i * repeat + r) * one, bytes));
  HIPQ_RETURN_IF_ERROR(be_->copy_device(static_cast<const float*>(timestep_table_.t.data) + int64_t{step} * batch_,
                                        timesteps_.t.data, timesteps_.t.nbytes()));
  const int call = calls_++;
  if (graph_ >= 0) {
    HIPQ_RETURN_IF_ERROR(be_->replay_graph(graph_));
    ++replays_;
  } else if (call == 1 && use_graph_) {
    Status begun = be_->begin_capture();
    if (begun.code() == StatusCode::kUnimplemented) {
      use_graph_ = false;
      HIPQ_RETURN_IF_ERROR(forward_into_out());
    } else {
      HIPQ_RETURN_IF_ERROR(begun);
      Status captured = forward_into_out();
      auto id = be_->end_capture();
      if (!captured.ok()) return captured.WithContext("capturing the UNet step as a graph");
      if (!id.ok()) return id.status().WithContext("capturing the UNet step as a graph");
      graph_ = *id;
      HIPQ_RETURN_IF_ERROR(be_->replay_graph(graph_));
      ++replays_;
    }
  } else {
    HIPQ_RETURN_IF_ERROR(forward_into_out());
  }
  return out_f32_.buffer.data() != nullptr ? &out_f32_.t : &out_->t;
}

UNetStep::UNetStep(UNetStep&& o) noexcept { *this = std::move(o); }

UNetStep& UNetStep::operator=(UNetStep&& o) noexcept {
  if (this == &o) return *this;
  if (graph_ >= 0 && be_ != nullptr) be_->destroy_graph(graph_);
  be_ = o.be_;
  unet_ = o.unet_;
  hidden_ = o.hidden_;
  pooled_ = o.pooled_;
  batch_ = o.batch_;
  input_f32_ = std::move(o.input_f32_);
  input_ = std::move(o.input_);
  timesteps_ = std::move(o.timesteps_);
  timestep_table_ = std::move(o.timestep_table_);
  steps_ = o.steps_;
  out_f32_ = std::move(o.out_f32_);
  time_ids_ = std::move(o.time_ids_);
  context_kv_ = std::move(o.context_kv_);
  o.context_kv_.reset();
  out_ = std::move(o.out_);
  o.out_.reset();
  use_graph_ = o.use_graph_;
  graph_ = std::exchange(o.graph_, -1);
  calls_ = o.calls_;
  replays_ = o.replays_;
  return *this;
}

UNetStep::~UNetStep() {
  // The graph goes first: it reads the buffers below.
  if (graph_ >= 0 && be_ != nullptr) be_->destroy_graph(graph_);
}

}  // namespace hipq::engine
