#include "db/golden_store.h"

#include <gtest/gtest.h>

#include "base/fs.h"
#include "db/schema.h"
#include "db/statement.h"
#include "tests/db/test_util.h"

namespace hipq::db {
namespace {

std::unique_ptr<Database> fresh_db() {
  auto db = Database::open_in_memory();
  HIPQ_CHECK(db.ok());
  HIPQ_CHECK(migrate(**db).ok());
  return std::move(db).value();
}

GoldenRecord record(const std::string& key, const std::string& sha) {
  GoldenRecord r;
  r.key = key;
  r.path = "/goldens/" + key + ".safetensors";
  r.sha256 = sha;
  r.provenance = {{"reference", "diffusers"}, {"reference_version", "0.31.0"}};
  r.reference = "diffusers";
  r.created_at = 1700000000.5;
  r.imported_at = 1700000100.0;
  return r;
}

GoldenFileFacts facts(const std::string& key) {
  GoldenFileFacts f;
  f.header.key = key;
  f.header.model = "synthetic:tiny-sdxl";
  f.header.weights_sha256 = std::string(64, 'a');
  f.header.settings.prompt = "a kite";
  f.header.settings.seed = 11;
  f.header.provenance.reference = "hipq";
  f.header.provenance.created_at = "2026-01-02T03:04:05Z";
  f.latent_shape = {1, 4, 8, 8};
  f.has_image = true;
  return f;
}

TEST(GoldenStoreTest, ImportFileKeepsTheFileUnderItsKeyAndRecordsIt) {
  auto db = fresh_db();
  GoldenStore store(*db);
  testing::TempDir tmp;
  const auto dir = tmp.path() / "goldens";
  const auto src = tmp.path() / "incoming.safetensors";
  ASSERT_TRUE(write_file_atomic(src, "golden bytes").ok());
  const std::string key(64, 'k');
  auto first = store.import_file(dir, src, facts(key), false, 1000.0);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(*first) << "new";
  const auto kept = dir / spec::golden_file_name(key);
  EXPECT_EQ(*read_file(kept), "golden bytes");
  auto row = store.find_by_prefix(key.substr(0, 8));
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  EXPECT_EQ(row->path, kept.string());
  EXPECT_EQ(row->sha256, sha256_hex("golden bytes"));
  EXPECT_EQ(row->reference, "hipq");
  EXPECT_DOUBLE_EQ(*row->created_at, 1767323045.0);
  EXPECT_DOUBLE_EQ(row->imported_at, 1000.0);
  EXPECT_EQ(row->provenance["settings"]["prompt"], "a kite");
  EXPECT_EQ(row->provenance["latent_shape"], nlohmann::json({1, 4, 8, 8}));
  EXPECT_EQ(row->provenance["has_image"], true);

  auto again = store.import_file(dir, src, facts(key), false, 2000.0);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again) << "same bytes: unchanged";
  ASSERT_TRUE(write_file_atomic(src, "other bytes").ok());
  auto clash = store.import_file(dir, src, facts(key), false, 3000.0);
  EXPECT_EQ(clash.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(clash.status().message().find("--replace"), std::string::npos);
  ASSERT_TRUE(store.import_file(dir, src, facts(key), true, 3000.0).ok());
  EXPECT_EQ(*read_file(kept), "other bytes");

  EXPECT_EQ(store.find_by_prefix("zz").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store.import_file(dir, src, facts(std::string(63, 'k') + "x"), false, 4000.0).ok());
  EXPECT_EQ(store.find_by_prefix("kkkk").status().code(), StatusCode::kInvalidArgument) << "two keys match";
}

TEST(GoldenStoreTest, PutFindListRemove) {
  auto db = fresh_db();
  GoldenStore store(*db);
  ASSERT_TRUE(store.put(record("bbbb", "s2")).ok());
  GoldenRecord unpinned = record("aaaa", "s1");
  unpinned.pinned = false;
  unpinned.created_at.reset();
  ASSERT_TRUE(store.put(unpinned).ok());
  auto found = store.find("bbbb");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->path, "/goldens/bbbb.safetensors");
  EXPECT_EQ((*found)->provenance["reference_version"], "0.31.0");
  EXPECT_TRUE((*found)->pinned);
  EXPECT_DOUBLE_EQ(*(*found)->created_at, 1700000000.5);
  auto none = store.find("cccc");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto all = store.list();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].key, "aaaa");
  EXPECT_FALSE((*all)[0].pinned);
  EXPECT_FALSE((*all)[0].created_at.has_value());
  auto removed = store.remove("aaaa");
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(*removed);
  EXPECT_FALSE(*store.remove("aaaa"));
  EXPECT_EQ(store.list()->size(), 1u);
}

TEST(GoldenStoreTest, SameFileTwiceIsIdempotentOtherFileIsRefusedUnlessReplace) {
  auto db = fresh_db();
  GoldenStore store(*db);
  ASSERT_TRUE(store.put(record("k1", "sha-a")).ok());
  ASSERT_TRUE(store.put(record("k1", "sha-a")).ok());
  Status st = store.put(record("k1", "sha-b"));
  EXPECT_EQ(st.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(st.message().find("sha-a"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--replace"), std::string::npos);
  ASSERT_TRUE(store.put(record("k1", "sha-b"), /*replace=*/true).ok());
  EXPECT_EQ((*store.find("k1"))->sha256, "sha-b");
}

TEST(GoldenStoreTest, UpdateProvenance) {
  auto db = fresh_db();
  GoldenStore store(*db);
  ASSERT_TRUE(store.put(record("k", "s")).ok());
  nlohmann::json p = (*store.find("k"))->provenance;
  p["floor"] = {{"cosine", 0.99999}};
  ASSERT_TRUE(store.update_provenance("k", p).ok());
  EXPECT_EQ((*store.find("k"))->provenance["floor"]["cosine"], 0.99999);
  EXPECT_EQ(store.update_provenance("nope", p).code(), StatusCode::kNotFound);
}

TEST(GoldenStoreTest, BadReferenceIsRejected) {
  auto db = fresh_db();
  GoldenStore store(*db);
  GoldenRecord r = record("k", "s");
  r.reference = "comfy";
  EXPECT_EQ(store.put(r).code(), StatusCode::kInvalidArgument);
}

TEST(GoldenStoreTest, KeysWithPrefix) {
  auto db = fresh_db();
  GoldenStore store(*db);
  for (const char* k : {"ab12", "ab34", "cd56"}) ASSERT_TRUE(store.put(record(k, "s")).ok());
  auto ab = store.keys_with_prefix("ab");
  ASSERT_TRUE(ab.ok());
  EXPECT_EQ(*ab, (std::vector<std::string>{"ab12", "ab34"}));
  EXPECT_TRUE(store.keys_with_prefix("a%")->empty());
}

TEST(GoldenStoreTest, PromotableJobsAreDoneJobsWithResults) {
  auto db = fresh_db();
  ASSERT_TRUE(db->execute(R"sql(
    INSERT INTO manifests (id, sha256, path, text, created_at) VALUES (1, 'm', 'm.yaml', 'x', 0);
    INSERT INTO batches (id, manifest_id, name, state, max_attempts, output_root, job_count, created_at)
      VALUES (7, 1, 'b', 'done', 3, '/out', 3, 0);
    INSERT INTO jobs (id, batch_id, ordinal, model, prompt, seed, width, height, steps, guidance, sampler,
                      precision, rng, output_dir, state, created_at, updated_at)
      VALUES (1, 7, 0, 'synthetic:tiny-sdxl', 'p', 1, 64, 64, 2, 5, 'euler', 'fp32', 'torch-cuda', 'job-1', 'done', 0, 0),
             (2, 7, 1, 'synthetic:tiny-sdxl', 'p', 2, 64, 64, 2, 5, 'euler', 'fp32', 'torch-cpu', 'job-2', 'done', 0, 0),
             (3, 7, 2, 'synthetic:tiny-sdxl', 'p', 3, 64, 64, 2, 5, 'euler', 'fp32', 'torch-cpu', 'job-3', 'failed', 0, 0);
    INSERT INTO attempts (id, job_id, attempt, worker_id, started_at, state) VALUES (11, 1, 1, 'w', 0, 'done'),
             (12, 2, 1, 'w', 0, 'done');
    INSERT INTO results (job_id, attempt_id, worker_id, verdict, outputs, recorded_at)
      VALUES (1, 11, 'w', 'NO_GOLDEN', '[{"kind":"latent","path":"job-1/latent.safetensors"}]', 0),
             (2, 12, 'w', 'PASS', '[]', 0);
  )sql").ok());
  GoldenStore store(*db);
  auto batch = store.promotable_jobs(std::nullopt, 7);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_EQ(batch->size(), 2u);
  EXPECT_EQ((*batch)[0].job_id, 1);
  EXPECT_EQ((*batch)[0].output_root, "/out");
  EXPECT_EQ((*batch)[0].output_dir, "job-1");
  EXPECT_EQ((*batch)[0].settings.seed, 1u);
  EXPECT_EQ((*batch)[0].settings.width, 64);
  EXPECT_EQ((*batch)[0].settings.rng, "torch-cuda");
  EXPECT_TRUE((*batch)[0].settings.validate().ok());
  EXPECT_EQ((*batch)[1].verdict, "PASS");
  auto one = store.promotable_jobs(2, std::nullopt);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].job_id, 2);
  EXPECT_TRUE(store.promotable_jobs(3, std::nullopt)->empty()) << "failed jobs are not promotable";
  EXPECT_FALSE(store.promotable_jobs(std::nullopt, std::nullopt).ok());
}

}  // namespace
}  // namespace hipq::db
