// Files: atomic writes and hashing, used for every output hipq produces.
//
// write_file_atomic creates missing parent directories, writes to a temporary
// file beside the target, fsyncs it, renames it over the target and fsyncs the
// directory, so a reader sees the old file or the whole new one, never half.
// Every error names the path and the OS reason. A directory removed while
// these functions create or write in it (someone deleting the tree) makes
// them redo the walk or the write a few times; when it keeps vanishing the
// error is Unavailable (transient: try again later), never a refusal.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/status.h"

namespace hipq {

// mkdir -p; IOError naming the first component that could not be created,
// Unavailable when a parent kept being removed while the walk ran.
Status ensure_directory(const std::filesystem::path& dir);
// Checks, without writing anything permanent, that files can be created in
// `dir` (creating it if missing): the check to run before hours of GPU work.
// PermissionDenied (or IOError) when they cannot; Unavailable when `dir`
// kept being removed while it was checked.
Status check_writable_directory(const std::filesystem::path& dir);
Status write_file_atomic(const std::filesystem::path& path, std::string_view bytes);
Result<std::string> read_file(const std::filesystem::path& path);
// Reads input a user names (manifests, prompt lists): only a regular file
// (InvalidArgument naming what it is otherwise: directory, device, FIFO), and
// at most `max_bytes` (InvalidArgument naming the limit); never blocks on a
// FIFO and never reads more than max_bytes + 1 bytes, so /dev/zero or a file
// growing while read costs bounded memory.
Result<std::string> read_regular_file(const std::filesystem::path& path, int64_t max_bytes);

// Lower-case hex SHA-256.
std::string sha256_hex(std::string_view bytes);
Result<std::string> sha256_file(const std::filesystem::path& path);

}  // namespace hipq
