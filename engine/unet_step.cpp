#include "engine/unet_step.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace hipq::engine {

using kernels::DType;

Result<UNetStep> UNetStep::make(kernels::Backend& backend, const UNet& unet, const kernels::Tensor& hidden,
                                const kernels::Tensor* pooled, const std::vector<float>& time_ids, int batch,
                                int64_t lh, int64_t lw) {
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
  if (!time_ids.empty()) {
    HIPQ_ASSIGN_OR_RETURN(s.time_ids_, DeviceTensor::from_host(backend, time_ids.data(),
                                                              {static_cast<int64_t>(time_ids.size())}, DType::kF32));
  }
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
  if (pooled_ != nullptr) {
    in.text_embeds = pooled_;
    in.time_ids_device = &time_ids_.t;
  }
  out_.reset();
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor pred, unet_->forward(*be_, in));
  out_.emplace(std::move(pred));
  return Status::Ok();
}

Result<std::vector<float>> UNetStep::run(const std::vector<float>& input, float timestep) {
  if (static_cast<int64_t>(input.size()) != input_f32_.t.numel())
    return Status::InvalidArgument("unet input holds " + std::to_string(input.size()) + " values, expected " +
                                   std::to_string(input_f32_.t.numel()));
  HIPQ_RETURN_IF_ERROR(be_->copy_to_device(input.data(), input_f32_.t.data, input_f32_.t.nbytes()));
  const std::vector<float> ts(static_cast<size_t>(batch_), timestep);
  HIPQ_RETURN_IF_ERROR(be_->copy_to_device(ts.data(), timesteps_.t.data, timesteps_.t.nbytes()));
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
  return to_host_f32(*be_, out_->t);
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
  time_ids_ = std::move(o.time_ids_);
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
