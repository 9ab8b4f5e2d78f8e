#include "proto/curve_keys.h"

#include <map>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include <nlohmann/json.hpp>
#include <zmq.h>

#include "base/fs.h"

namespace hipq::proto {
namespace {

constexpr std::string_view kKeyFormat = "hipq-curve-key/1";

// Creates `path` with `mode` from the first byte (no window where a secret is
// world-readable), then renames it into place.
Status write_private_file(const std::filesystem::path& path, std::string_view bytes, mode_t mode, bool overwrite) {
  std::error_code ec;
  if (!overwrite && std::filesystem::exists(path, ec)) {
    return Status::AlreadyExists(path.string() + ": exists; pass --force to replace it");
  }
  if (path.has_parent_path()) HIPQ_RETURN_IF_ERROR(ensure_directory(path.parent_path()));
  std::filesystem::path tmp = path;
  tmp += ".tmp" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::IOError(tmp.string() + ": " + std::strerror(errno));
  ::fchmod(fd, mode);  // the umask may have removed bits we want exactly
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::IOError(tmp.string() + ": " + std::strerror(err));
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Status::IOError(tmp.string() + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Status::IOError(path.string() + ": " + std::strerror(err));
  }
  return Status::Ok();
}

}  // namespace

bool is_z85_key(std::string_view key) {
  if (key.size() != 40) return false;
  static constexpr std::string_view kZ85 =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  for (char c : key) {
    if (kZ85.find(c) == std::string_view::npos) return false;
  }
  return true;
}

Result<CurveKeyPair> generate_curve_key_pair() {
  char pub[41];
  char sec[41];
  if (zmq_curve_keypair(pub, sec) != 0) {
    return Status::Unimplemented(std::string("this libzmq cannot make CURVE keys (built without libsodium?): ") +
                                 zmq_strerror(zmq_errno()));
  }
  return CurveKeyPair{pub, sec};
}

Status write_curve_key_files(const std::filesystem::path& path, const CurveKeyPair& keys, bool overwrite) {
  if (!is_z85_key(keys.public_key) || !is_z85_key(keys.secret_key)) {
    return Status::InvalidArgument("key pair is not two 40-character Z85 keys");
  }
  nlohmann::json secret = {{"format", kKeyFormat}, {"public_key", keys.public_key}, {"secret_key", keys.secret_key}};
  nlohmann::json pub = {{"format", kKeyFormat}, {"public_key", keys.public_key}};
  std::filesystem::path pub_path = path;
  pub_path += ".pub";
  HIPQ_RETURN_IF_ERROR(write_private_file(path, secret.dump(2) + "\n", 0600, overwrite));
  return write_private_file(pub_path, pub.dump(2) + "\n", 0644, overwrite);
}

Result<CurveKeyPair> read_curve_key_file(const std::filesystem::path& path) {
  HIPQ_ASSIGN_OR_RETURN(std::string text, read_file(path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(path.string() + ": not a hipq key file (JSON): " + e.what());
  }
  if (!j.is_object() || j.value("format", "") != kKeyFormat || !j.contains("public_key") ||
      !j["public_key"].is_string()) {
    return Status::InvalidArgument(path.string() + ": not a hipq key file (want format \"" +
                                   std::string(kKeyFormat) + "\" and public_key); make one with `hipq keygen`");
  }
  CurveKeyPair keys;
  keys.public_key = j["public_key"].get<std::string>();
  if (j.contains("secret_key") && j["secret_key"].is_string()) keys.secret_key = j["secret_key"].get<std::string>();
  if (!is_z85_key(keys.public_key) || (!keys.secret_key.empty() && !is_z85_key(keys.secret_key))) {
    return Status::InvalidArgument(path.string() + ": keys must be 40-character Z85 strings");
  }
  if (!keys.secret_key.empty()) {
    struct stat st{};
    if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
      return Status::PermissionDenied(path.string() + ": secret key file is readable by others; chmod 600 it");
    }
  }
  return keys;
}

Result<std::string> read_public_key(std::string_view file_or_key) {
  if (is_z85_key(file_or_key) && !std::filesystem::exists(std::filesystem::path(file_or_key))) {
    return std::string(file_or_key);
  }
  HIPQ_ASSIGN_OR_RETURN(CurveKeyPair keys, read_curve_key_file(std::filesystem::path(file_or_key)));
  return keys.public_key;
}

Result<AuthorizedKeys> read_authorized_keys(const std::filesystem::path& path) {
  HIPQ_ASSIGN_OR_RETURN(std::string text, read_file(path));
  AuthorizedKeys keys;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  std::string problems;
  // Roles belong to keys, and the name is what a connection is known by:
  // two keys under one name would let one borrow the other's roles.
  std::map<std::string, int> name_line;
  while (std::getline(in, line)) {
    ++lineno;
    // Z85 keys may contain '#': only a line starting with it is a comment.
    if (auto first = line.find_first_not_of(" \t"); first != std::string::npos && line[first] == '#') continue;
    std::istringstream fields(line);
    std::string key, name, roles;
    if (!(fields >> key)) continue;
    std::string where = path.string() + ":" + std::to_string(lineno) + ": ";
    if (!is_z85_key(key)) {
      problems += where + "not a 40-character Z85 public key\n";
      continue;
    }
    if (!(fields >> name)) {
      problems += where + "missing the client's name after the key\n";
      continue;
    }
    AuthorizedKey entry{name, {}};
    if (fields >> roles) {
      std::istringstream rs(roles);
      std::string role;
      while (std::getline(rs, role, ',')) {
        if (role != "worker" && role != "client") {
          problems += where + "unknown role \"" + role + "\" (known: worker, client)\n";
          continue;
        }
        entry.roles.insert(role);
      }
    } else {
      entry.roles = {"worker", "client"};
    }
    if (keys.count(key)) {
      problems += where + "key listed twice\n";
      continue;
    }
    if (auto [it, fresh] = name_line.emplace(name, lineno); !fresh) {
      problems += where + "name \"" + name + "\" already names another key on line " + std::to_string(it->second) +
                  "; give each key its own name\n";
      continue;
    }
    keys.emplace(key, std::move(entry));
  }
  if (!problems.empty()) {
    problems.pop_back();
    return Status::InvalidArgument(problems);
  }
  return keys;
}

}  // namespace hipq::proto
