// Phase names: what a job's timings are recorded under, in the one order
// every table, report and listing shows them (the pipeline's order).
//
//   load, text_encode, image_encode, denoise, decode,   one row each per attempt
//   write, parity                                        (image_encode: img2img jobs only)
//   step                                                 one row per denoising step
//   total                                                the sum of the job phases
//
// The engine and worker time the job phases under these names
// (phase_timings.phase), `hipq runs` / `hipq run` print them in this order,
// the statistics accept them (plus "step" and "total") as --phase.
// Thread safety: constants and pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hipq::spec {

inline constexpr std::string_view kPhaseLoad = "load";
inline constexpr std::string_view kPhaseTextEncode = "text_encode";
// img2img: the init image read, encoded by the VAE and noised (engine/img2img.h).
inline constexpr std::string_view kPhaseImageEncode = "image_encode";
inline constexpr std::string_view kPhaseDenoise = "denoise";
inline constexpr std::string_view kPhaseDecode = "decode";
inline constexpr std::string_view kPhaseWrite = "write";
inline constexpr std::string_view kPhaseParity = "parity";
// Per-step timings (step_timings) and the per-image total.
inline constexpr std::string_view kPhaseStep = "step";
inline constexpr std::string_view kPhaseTotal = "total";

// load, text_encode, image_encode, denoise, decode, write, parity.
const std::vector<std::string>& job_phases();
// What statistics may be asked for, in display order: the job phases with
// "step" after "denoise", then "total" (load, text_encode, image_encode,
// denoise, step, decode, write, parity, total).
const std::vector<std::string>& statistics_phases();
// Position of `phase` in job_phases(); job_phases().size() for any other name
// (so unknown phases sort after the known ones).
size_t phase_rank(std::string_view phase);
// Orders names by phase_rank, then by name: the one order phases are read in.
bool phase_before(std::string_view a, std::string_view b);

}  // namespace hipq::spec
