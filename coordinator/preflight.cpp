#include "coordinator/preflight.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace hipq::coordinator {
namespace fs = std::filesystem;

namespace {

// Creates and removes a file in `dir`; FailedPrecondition when that fails.
Status probe_write(const fs::path& dir, const std::string& what) {
  std::string probe = (dir / ".hipq-preflight-XXXXXX").string();
  int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    int err = errno;
    return Status::FailedPrecondition(what + ": cannot create files in '" + dir.string() + "': " + std::strerror(err));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::Ok();
}

}  // namespace

Status check_output_root(const fs::path& root) {
  std::error_code ec;
  if (fs::is_directory(root, ec)) return probe_write(root, "output root '" + root.string() + "' is not writable");
  fs::path ancestor = root;
  while (!fs::exists(ancestor, ec)) {
    if (ancestor == ancestor.root_path() || !ancestor.has_parent_path()) break;
    ancestor = ancestor.parent_path();
  }
  if (!fs::is_directory(ancestor, ec)) {
    return Status::FailedPrecondition("output root '" + root.string() + "' cannot be created: '" +
                                      ancestor.string() + "' exists and is not a directory");
  }
  return probe_write(ancestor, "output root '" + root.string() + "' cannot be created");
}

Status preflight(const Manifest& manifest) { return check_output_root(manifest.outputs.root); }

}  // namespace hipq::coordinator
