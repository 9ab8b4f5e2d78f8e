// Fuzz entry points: one function per input boundary, each fed arbitrary
// bytes. libFuzzer drives them (fuzz_main.cpp, clang, ASan + UBSan; see
// docs/reliability.md, "Fuzzing"), and corpus_replay_test.cpp feeds every
// committed corpus file to the same function in the normal test run.
// Each returns normally for any input; a crash, sanitizer report or failed
// HIPQ_CHECK is the finding. Each also checks what must hold for any input
// it accepts (an accepted manifest expands and serialises; a decoded
// envelope re-encodes to one that decodes).
#pragma once

#include <string_view>

namespace hipq::fuzz {

void manifest(std::string_view bytes);     // YAML manifest text (parse_manifest_text)
void prompts(std::string_view bytes);      // first byte picks TSV / JSONL / text; the rest is the file
void envelope(std::string_view bytes);     // one wire frame (proto::decode)
void safetensors(std::string_view bytes);  // a whole .safetensors file (SafetensorsFile::open)
void lora(std::string_view bytes);         // a LoRA .safetensors file (read_lora_file, merged into tiny-sdxl)
void init_image(std::string_view bytes);   // first byte picks the job's size; the rest is a PNG / JPEG file

}  // namespace hipq::fuzz
