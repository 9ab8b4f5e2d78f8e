#include "base/fs.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

namespace hipq {
namespace fs = std::filesystem;

namespace {
std::string os_error(std::string_view what, const fs::path& p, int err) {
  std::string m(what);
  m += " '";
  m += p.string();
  m += "': ";
  m += std::strerror(err);
  return m;
}

Status write_all(int fd, std::string_view bytes, const fs::path& p) {
  const char* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(os_error("cannot write", p, errno));
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

std::string temp_suffix() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char buf[32];
  std::snprintf(buf, sizeof buf, ".tmp.%d.%08llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(rng() & 0xffffffffull));
  return buf;
}
}  // namespace

// A directory removed while hipq creates or writes in it (a user deleting
// the output tree mid-batch) is no reason to fail: the walk or the write is
// redone, this many times at most.
constexpr int kVanishedRetries = 4;

Status ensure_directory(const fs::path& dir) {
  if (dir.empty()) return Status::Ok();
  for (int walk = 1;; ++walk) {
    std::error_code ec;
    if (fs::is_directory(dir, ec)) return Status::Ok();
    fs::path partial;
    bool vanished = false;
    for (const auto& part : dir) {
      partial /= part;
      // One look at the path: asking "a directory?" and then "there at all?"
      // let another process's mkdir between the two read as a file.
      const fs::file_status st = fs::status(partial, ec);
      if (fs::is_directory(st)) continue;
      if (fs::exists(st))
        return Status::IOError("cannot create directory '" + dir.string() + "': '" + partial.string() +
                               "' exists and is not a directory");
      if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        // ENOENT: a parent seen or made a moment ago is gone.
        if (errno == ENOENT) {
          vanished = true;
          break;
        }
        return Status::IOError(os_error("cannot create directory", partial, errno) +
                               " (while creating '" + dir.string() + "')");
      }
    }
    if (!vanished) return Status::Ok();
    if (walk == kVanishedRetries) {
      return Status::Unavailable("cannot create directory '" + dir.string() + "': the parent of '" +
                                 partial.string() + "' was removed while it was being created, " +
                                 std::to_string(kVanishedRetries) + " times; is something deleting it?");
    }
  }
}

Status check_writable_directory(const fs::path& dir) {
  for (int attempt = 1;; ++attempt) {
    HIPQ_RETURN_IF_ERROR(ensure_directory(dir));
    fs::path probe = dir / (".hipq-write-check" + temp_suffix());
    int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      ::unlink(probe.c_str());
      return Status::Ok();
    }
    if (errno != ENOENT) return Status::PermissionDenied(os_error("output directory is not writable:", dir, errno));
    if (attempt == kVanishedRetries) {
      return Status::Unavailable("output directory '" + dir.string() + "' was removed while it was being checked, " +
                                 std::to_string(kVanishedRetries) + " times; is something deleting it?");
    }
  }
}

Status write_file_atomic(const fs::path& path, std::string_view bytes) {
  fs::path parent = path.parent_path();
  for (int attempt = 1;; ++attempt) {
    HIPQ_RETURN_IF_ERROR(ensure_directory(parent));
    fs::path tmp = path;
    tmp += temp_suffix();
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      // ENOENT: the directory was removed after ensure_directory made it.
      if (errno == ENOENT && attempt < kVanishedRetries) continue;
      return Status::IOError(os_error("cannot create", tmp, errno));
    }
    Status s = write_all(fd, bytes, tmp);
    if (s.ok() && ::fsync(fd) != 0) s = Status::IOError(os_error("cannot fsync", tmp, errno));
    if (::close(fd) != 0 && s.ok()) s = Status::IOError(os_error("cannot close", tmp, errno));
    if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      // ENOENT: the temporary file or its directory was removed meanwhile.
      if (err == ENOENT && attempt < kVanishedRetries) continue;
      return Status::IOError(os_error("cannot rename temporary file onto", path, err));
    }
    if (!s.ok()) {
      ::unlink(tmp.c_str());
      return s;
    }
    int dfd = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
    return Status::Ok();
  }
}

Result<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(os_error("cannot open", path, errno));
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::IOError(os_error("cannot read", path, errno));
  return data;
}

Result<std::string> read_regular_file(const fs::path& path, int64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Status::NotFound(os_error("cannot open", path, errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::IOError(os_error("cannot stat", path, err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                                              : "a socket or other special file";
    std::string msg = "'";
    msg.append(path.string()).append("' is not a regular file (").append(kind).append("); give a plain file");
    return Status::InvalidArgument(std::move(msg));
  }
  auto too_big = [&](int64_t bytes) {
    std::string msg = "'";
    msg.append(path.string()).append("' is ").append(bytes > max_bytes ? "more than " : "");
    msg.append(std::to_string(max_bytes)).append(" bytes, the limit for this kind of file is ");
    msg.append(std::to_string(max_bytes)).append(" bytes; split it");
    return Status::InvalidArgument(std::move(msg));
  };
  if (st.st_size > max_bytes) {
    ::close(fd);
    return too_big(st.st_size);
  }
  std::string data;
  data.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  for (;;) {
    // One byte beyond the limit tells a file that grew while being read.
    if (got == data.size()) {
      if (static_cast<int64_t>(got) > max_bytes) {
        ::close(fd);
        return too_big(static_cast<int64_t>(got));
      }
      data.resize(std::min<size_t>(static_cast<size_t>(max_bytes) + 1, got + 65536));
      if (got == data.size()) break;
    }
    ssize_t r = ::read(fd, data.data() + got, data.size() - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return Status::IOError(os_error("cannot read", path, err));
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  if (static_cast<int64_t>(got) > max_bytes) return too_big(static_cast<int64_t>(got));
  data.resize(got);
  return data;
}

namespace {
std::string to_hex(const unsigned char* d, unsigned n) {
  static const char* kHex = "0123456789abcdef";
  std::string s(n * 2, '0');
  for (unsigned i = 0; i < n; ++i) {
    s[2 * i] = kHex[d[i] >> 4];
    s[2 * i + 1] = kHex[d[i] & 15];
  }
  return s;
}
}  // namespace

std::string sha256_hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
  return to_hex(md, n);
}

Result<std::string> sha256_file(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound(os_error("cannot open", path, errno));
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::string buf(1 << 20, '\0');
  Status s;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      s = Status::IOError(os_error("cannot read", path, errno));
      break;
    }
    if (n == 0) break;
    EVP_DigestUpdate(ctx, buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned mdn = 0;
  EVP_DigestFinal_ex(ctx, md, &mdn);
  EVP_MD_CTX_free(ctx);
  if (!s.ok()) return s;
  return to_hex(md, mdn);
}

}  // namespace hipq
