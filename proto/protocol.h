// Protocol constants: every number both ends must agree on, in one place
// (zguide MDP style). docs/protocol.md explains each.
#pragma once

#include <chrono>
#include <cstdint>

namespace hipq::proto {

// Envelope.version; bump on an incompatible change (docs/protocol.md,
// "Versions"). 2: JobAssignment carries typed GenerationSettings (field 15)
// instead of the settings_json string (field 5). 3: it carries a typed
// ParityGate (field 16) instead of the parity_gate_json string (field 10).
// 4: GenerationSettings carries timestep_spacing and guidance_rescale, which
// an older worker would ignore and so draw another image than asked for.
// 5: GenerationSettings carries loras, init_image, strength and the refiner's
// settings, JobAssignment the input files' sha256 (InputDigests), WorkerHello
// and Ready the LoRA set of each held model (affinity); an older worker would
// ignore the settings and draw a text-to-image base-model image instead.
// 6: a report carries the worker's next ask (JobResult.next, JobError.next:
// no Ready follows it) and an assignment the acks of the turn's reports
// (JobAssignment.acks: no ReportAck beside it). A version-5 coordinator
// would ignore the ask and never serve the worker again, a version-5 worker
// the acks and re-send every report.
// 7: batching across jobs: WorkerHello and Heartbeat name every job the
// worker runs (`running`), WorkerHello says the batch it can run
// (`max_batch`) and the coordinator lets it hold that many leases; a
// version-6 coordinator would see one running job of a batch, give back or
// expire the others' leases and run them twice.
// 8: GenerationSettings carries vae_precision (the decode's dtype); a
// version-7 worker would ignore it and decode in the precision's dtype: an
// image and a golden key other than the job's.
// 9: ParityGate carries cosine_min_set (an unset cosine bound is the job's
// precision's default: 0.995 for fp8); a version-8 worker would read an
// unset bound as 0.999 and fail fp8 jobs the gate passes.
inline constexpr uint32_t kProtocolVersion = 9;

// Jobs a worker holds at once: the one it runs and, with a credit of 2, the
// next one, leased to it while the first runs so the hand-off round trip
// hides behind work (docs/protocol.md, "Credit and prefetch"). The worker's
// default (`hipq worker --credit`) and the most the coordinator grants.
inline constexpr int kMaxCredit = 2;
inline constexpr int kDefaultCredit = 2;

// Jobs a worker runs at once as one batch at most (WorkerHello.max_batch,
// `hipq worker --batch`; docs/protocol.md, "Batching"). It bounds what a
// hello or heartbeat may list (`running`), so checking one costs little, and
// the leases one worker may hold: max(kMaxCredit, its max_batch).
inline constexpr int kMaxBatch = 16;

// Heartbeats every interval in both directions; a peer that sent nothing for
// kHeartbeatLiveness intervals is dead (Paranoid Pirate).
inline constexpr std::chrono::milliseconds kHeartbeatInterval{1000};
inline constexpr int kHeartbeatLiveness = 3;
// A lease lasts this long past the last heartbeat of the worker holding it.
inline constexpr double kLeaseSeconds = 3.0;

// Worker reconnect backoff after the coordinator went silent: doubles from
// the initial value up to the maximum.
inline constexpr std::chrono::milliseconds kReconnectInitial{1000};
inline constexpr std::chrono::milliseconds kReconnectMax{32000};

// ZMQ_MAXMSGSIZE on every socket: no legitimate message comes near it.
inline constexpr int64_t kMaxMessageBytes = 16 * 1024 * 1024;

// SubmitRequest.manifest_text at most (coordinator/manifest.h uses the same).
inline constexpr int64_t kMaxManifestBytes = 8 * 1024 * 1024;

// Default coordinator endpoint for clients and workers on the same machine.
inline constexpr const char* kDefaultEndpoint = "tcp://127.0.0.1:5555";

}  // namespace hipq::proto
