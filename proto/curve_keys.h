// CURVE keys: generation, key files and the allow-list of client keys.
//
// Key pair file (written by `hipq keygen`, mode 0600, JSON):
//   {"format": "hipq-curve-key/1", "public_key": "<Z85>", "secret_key": "<Z85>"}
// Public key file (mode 0644, safe to copy to the coordinator):
//   {"format": "hipq-curve-key/1", "public_key": "<Z85>"}
// Authorized keys file (the coordinator's allow-list), one client per line:
//   <Z85 public key> <name> [roles]     roles: comma list of worker,client
//   (default both); a line starting with '#' is a comment; blank lines ignored.
// The name is the ZAP user id: the identity the coordinator authorises by.
// Names are unique (a second key under a name already used is refused with
// both line numbers), so a name stands for exactly one key and its roles.
// Keys are 40-character Z85 strings (32-byte Curve25519 keys).
// Errors: IOError / NotFound naming the file; InvalidArgument naming
// file:line and what is wrong. Thread safety: pure functions.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/status.h"

namespace hipq::proto {

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 chars
  std::string secret_key;  // Z85, 40 chars; empty in a public-only file
};

Result<CurveKeyPair> generate_curve_key_pair();
// Writes <path> (secret, 0600) and <path>.pub (public). Refuses to overwrite
// an existing key file (AlreadyExists) unless `overwrite`.
Status write_curve_key_files(const std::filesystem::path& path, const CurveKeyPair& keys, bool overwrite);
// Reads a key pair file (secret_key required) or a public key file
// (secret_key empty). A key may also be given literally as 40 Z85 chars.
Result<CurveKeyPair> read_curve_key_file(const std::filesystem::path& path);
Result<std::string> read_public_key(std::string_view file_or_key);
bool is_z85_key(std::string_view key);

struct AuthorizedKey {
  std::string name;
  std::set<std::string> roles;  // "worker", "client"
};
// Public key (Z85) -> who it is.
using AuthorizedKeys = std::map<std::string, AuthorizedKey>;
Result<AuthorizedKeys> read_authorized_keys(const std::filesystem::path& path);

}  // namespace hipq::proto
