#include "proto/curve_keys.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace hipq::proto {
namespace {

namespace fs = std::filesystem;

class CurveKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("hipq-keys-" + std::to_string(getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  fs::path dir;
};

TEST_F(CurveKeysTest, KeygenWritesASecretFileOnlyTheOwnerCanRead) {
  auto keys = generate_curve_key_pair();
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_TRUE(write_curve_key_files(dir / "k", *keys, false).ok());
  EXPECT_EQ(fs::status(dir / "k").permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  auto back = read_curve_key_file(dir / "k");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->public_key, keys->public_key);
  EXPECT_EQ(back->secret_key, keys->secret_key);
  auto pub = read_curve_key_file(dir / "k.pub");
  ASSERT_TRUE(pub.ok());
  EXPECT_TRUE(pub->secret_key.empty());
  EXPECT_EQ(*read_public_key((dir / "k.pub").string()), keys->public_key);
  EXPECT_EQ(*read_public_key(keys->public_key), keys->public_key);
  EXPECT_EQ(write_curve_key_files(dir / "k", *keys, false).code(), StatusCode::kAlreadyExists);
}

TEST_F(CurveKeysTest, ASecretKeyFileReadableByOthersIsRefused) {
  auto keys = generate_curve_key_pair();
  ASSERT_TRUE(write_curve_key_files(dir / "k", *keys, false).ok());
  fs::permissions(dir / "k", fs::perms::group_read, fs::perm_options::add);
  EXPECT_EQ(read_curve_key_file(dir / "k").status().code(), StatusCode::kPermissionDenied);
}

TEST_F(CurveKeysTest, AuthorizedKeysReportEveryBadLineWithItsNumber) {
  auto a = generate_curve_key_pair();
  std::ofstream(dir / "ok") << "# comment\n\n" << a->public_key << " alice worker\n";
  auto ok = read_authorized_keys(dir / "ok");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->count(a->public_key), 1u);
  EXPECT_EQ(ok->at(a->public_key).name, "alice");
  EXPECT_EQ(ok->at(a->public_key).roles, (std::set<std::string>{"worker"}));

  std::ofstream(dir / "bad") << "notakey bob\n" << a->public_key << "\n" << a->public_key << " carol admin\n";
  Status s = read_authorized_keys(dir / "bad").status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bad:1:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("bad:2:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("bad:3: unknown role"), std::string::npos) << s.message();
}

// Roles belong to keys: a second key under a name already used would make
// the name (the ZAP user id) stand for two keys with different roles.
TEST_F(CurveKeysTest, AuthorizedKeysRefuseANameGivenToTwoKeysWithBothLines) {
  auto a = generate_curve_key_pair();
  auto b = generate_curve_key_pair();
  std::ofstream(dir / "dup") << "# two keys, one name\n"
                             << a->public_key << " shared client\n"
                             << b->public_key << " shared worker\n";
  Status s = read_authorized_keys(dir / "dup").status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("dup:3: name \"shared\" already names another key on line 2"), std::string::npos)
      << s.message();
}

TEST(Z85, RecognisesFortyCharacterKeys) {
  EXPECT_TRUE(is_z85_key("rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"));
  EXPECT_FALSE(is_z85_key("short"));
  EXPECT_FALSE(is_z85_key(std::string(40, ' ')));
}

}  // namespace
}  // namespace hipq::proto
