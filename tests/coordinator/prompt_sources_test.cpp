#include "coordinator/prompt_sources.h"

#include <gtest/gtest.h>

#include <map>

#include "tests/coordinator/manifest_test_util.h"

namespace hipq::coordinator {
namespace {

using testing::ManifestDir;

TEST(PromptSourcesTest, PartiPromptsLoadsAsIsWithTags) {
  auto tsv = testing::parti_prompts_tsv();
  if (testing::source_dir().empty()) GTEST_SKIP() << "HIPQ_SOURCE_DIR not set (run through ctest)";
  ASSERT_TRUE(std::filesystem::exists(tsv)) << tsv;
  PromptFile f = load_prompt_file(tsv, {});
  ASSERT_TRUE(f.problems.empty()) << f.problems.front().line << ": " << f.problems.front().message;
  ASSERT_EQ(f.prompts.size(), 1632u);
  EXPECT_EQ(f.prompts[0].text, "bond");
  EXPECT_EQ(f.prompts[0].line, 2);
  EXPECT_EQ(f.prompts[0].tags, (std::vector<std::string>{"Category:Abstract", "Challenge:Basic",
                                                          "Note:Biology-inspired concepts with multiple meanings"}));
  std::map<std::string, int> categories;
  for (const auto& p : f.prompts) {
    ASSERT_GE(p.tags.size(), 2u) << "line " << p.line;
    EXPECT_EQ(p.tags[0].rfind("Category:", 0), 0u) << "line " << p.line;
    categories[p.tags[0]]++;
  }
  EXPECT_EQ(categories.size(), 12u);
  EXPECT_EQ(categories["Category:Animals"], 314);
  // Quotes inside fields are text, not CSV quoting.
  bool found_quote = false;
  for (const auto& p : f.prompts) found_quote |= p.text.find("\"Fly an airplane\"") != std::string::npos;
  EXPECT_TRUE(found_quote);
}

std::map<std::string, int> category_counts(const std::vector<PromptRecord>& prompts) {
  std::map<std::string, int> out;
  for (const auto& p : prompts) out[p.tags.at(0)]++;
  return out;
}

TEST(PromptSourcesTest, StratifiedSampleOfPartiPromptsCoversEveryCategoryReproducibly) {
  if (testing::source_dir().empty()) GTEST_SKIP() << "HIPQ_SOURCE_DIR not set (run through ctest)";
  PromptFile f = load_prompt_file(testing::parti_prompts_tsv(), {});
  ASSERT_TRUE(f.problems.empty());
  const auto all = f.prompts;

  auto a = all;
  ASSERT_TRUE(sample_prompts(a, {24, 7, "category"}).ok());  // tag name matched case-insensitively
  ASSERT_EQ(a.size(), 24u);
  auto cats = category_counts(a);
  EXPECT_EQ(cats.size(), 12u) << "every category is in the sample";
  EXPECT_GE(cats["Category:Animals"], 4) << "the largest category (314 of 1632) gets the most";
  for (size_t i = 1; i < a.size(); ++i) EXPECT_LT(a[i - 1].line, a[i].line) << "file order is kept";

  auto again = all;
  ASSERT_TRUE(sample_prompts(again, {24, 7, "Category"}).ok());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].line, again[i].line) << "same seed, same sample";
  auto other = all;
  ASSERT_TRUE(sample_prompts(other, {24, 8, "Category"}).ok());
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) differs |= a[i].line != other[i].line;
  EXPECT_TRUE(differs) << "another seed draws another sample";

  // Unstratified, a sample is still spread over the file, unlike the first rows
  // (the first 24 PartiPrompts rows are all Category:Abstract).
  auto plain = all;
  ASSERT_TRUE(sample_prompts(plain, {24, 0, ""}).ok());
  EXPECT_GT(category_counts(plain).size(), 4u);
  std::vector<PromptRecord> first(all.begin(), all.begin() + 24);
  EXPECT_EQ(category_counts(first).size(), 1u);

  // Sampling everything keeps everything, in order.
  auto whole = all;
  ASSERT_TRUE(sample_prompts(whole, {static_cast<int64_t>(all.size()), 3, "Category"}).ok());
  ASSERT_EQ(whole.size(), all.size());
  EXPECT_EQ(whole.back().line, all.back().line);
}

TEST(PromptSourcesTest, SampleProblemsNameTheCountAndTheTagNames) {
  std::vector<PromptRecord> prompts(5);
  for (int i = 0; i < 5; ++i) prompts[i] = {"p" + std::to_string(i), {}, {"Style:" + std::string(i % 2 ? "a" : "b")}, {}, i + 2};
  auto too_many = prompts;
  Status s = sample_prompts(too_many, {6, 0, ""});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sample 6 is more than the 5 prompts"), std::string::npos) << s.message();
  auto no_tag = prompts;
  s = sample_prompts(no_tag, {2, 0, "Category"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tag names: Style"), std::string::npos) << s.message();
  auto ok = prompts;
  ASSERT_TRUE(sample_prompts(ok, {2, 0, "Style"}).ok());
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_NE(ok[0].tags[0], ok[1].tags[0]) << "one of each style";
}

TEST(PromptSourcesTest, OffsetSkipsTheFirstPromptsBeforeTheLimit) {
  ManifestDir dir;
  auto path = dir.write("p.txt", "a\nb\n\n# c\nd\ne\nf\n");
  PromptFileOptions o;
  o.offset = 2;
  o.limit = 2;
  PromptFile f = load_prompt_file(path, o);
  ASSERT_TRUE(f.problems.empty()) << f.problems.front().message;
  ASSERT_EQ(f.prompts.size(), 2u);
  EXPECT_EQ(f.prompts[0].text, "d");
  EXPECT_EQ(f.prompts[0].line, 5);
  EXPECT_EQ(f.prompts[1].text, "e");
  o.limit = 0;
  o.offset = 5;
  f = load_prompt_file(path, o);
  ASSERT_EQ(f.problems.size(), 1u);
  EXPECT_NE(f.problems[0].message.find("offset 5 skips every prompt (the file holds 5)"), std::string::npos)
      << f.problems[0].message;
}

TEST(PromptSourcesTest, TsvLimitColumnNegativeSeedsAndCrlf) {
  ManifestDir dir;
  auto p = dir.write("p.tsv",
                     "\xEF\xBB\xBFid\ttext\tNegative\tseeds\tstyle\r\n"
                     "1\ta cat\tblurry\t1, 2\toil\r\n"
                     "\r\n"
                     "2\ta dog\t\t\t\r\n"
                     "3\ta cow\t\t\twatercolor\r\n");
  PromptFileOptions o;
  o.column = "Text";
  o.limit = 2;
  PromptFile f = load_prompt_file(p, o);
  ASSERT_TRUE(f.problems.empty()) << f.problems.front().message;
  ASSERT_EQ(f.prompts.size(), 2u);
  EXPECT_EQ(f.prompts[0].text, "a cat");
  EXPECT_EQ(f.prompts[0].negative, "blurry");
  EXPECT_EQ(f.prompts[0].seeds, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(f.prompts[0].tags, (std::vector<std::string>{"id:1", "style:oil"}));
  EXPECT_EQ(f.prompts[1].text, "a dog");
  EXPECT_EQ(f.prompts[1].line, 4);
  EXPECT_FALSE(f.prompts[1].negative.has_value());
}

TEST(PromptSourcesTest, TsvProblemsCarryLineAndColumn) {
  ManifestDir dir;
  auto p = dir.write("bad.tsv",
                     "Prompt\tseed\n"
                     "ok\t1\n"
                     "\t2\n"
                     "fine\tseven\n"
                     "a\tb\tc\n");
  PromptFile f = load_prompt_file(p, {});
  ASSERT_EQ(f.problems.size(), 3u);
  EXPECT_EQ(f.problems[0].line, 3);
  EXPECT_NE(f.problems[0].message.find("empty prompt"), std::string::npos);
  EXPECT_EQ(f.problems[1].line, 4);
  EXPECT_EQ(f.problems[1].column, 6);
  EXPECT_NE(f.problems[1].message.find("seven"), std::string::npos);
  EXPECT_EQ(f.problems[2].line, 5);
  EXPECT_NE(f.problems[2].message.find("3 tab-separated fields"), std::string::npos);
}

TEST(PromptSourcesTest, TsvWithoutPromptColumnNamesTheColumns) {
  ManifestDir dir;
  auto p = dir.write("x.tsv", "caption\tcategory\nhello\tx\n");
  PromptFile f = load_prompt_file(p, {});
  ASSERT_EQ(f.problems.size(), 1u);
  EXPECT_EQ(f.problems[0].line, 1);
  EXPECT_NE(f.problems[0].message.find("caption, category"), std::string::npos) << f.problems[0].message;
  // A single-column file needs no header name match.
  auto one = dir.write("one.tsv", "caption\nhello\n");
  PromptFile g = load_prompt_file(one, {});
  ASSERT_TRUE(g.problems.empty());
  ASSERT_EQ(g.prompts.size(), 1u);
  EXPECT_EQ(g.prompts[0].text, "hello");
}

TEST(PromptSourcesTest, JsonlAllForms) {
  ManifestDir dir;
  auto p = dir.write("p.jsonl",
                     "{\"prompt\": \"a\", \"tags\": [\"x\", \"y\"]}\n"
                     "# comment\n"
                     "\n"
                     "{\"text\": \"b\", \"negative\": \"n\", \"tags\": {\"k\": \"v\"}, \"seeds\": [4, 5]}\n"
                     "{\"prompt\": \"c\", \"seed\": 9}\n");
  PromptFile f = load_prompt_file(p, {});
  ASSERT_TRUE(f.problems.empty()) << f.problems.front().message;
  ASSERT_EQ(f.prompts.size(), 3u);
  EXPECT_EQ(f.prompts[0].tags, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(f.prompts[1].text, "b");
  EXPECT_EQ(f.prompts[1].line, 4);
  EXPECT_EQ(f.prompts[1].negative, "n");
  EXPECT_EQ(f.prompts[1].tags, (std::vector<std::string>{"k:v"}));
  EXPECT_EQ(f.prompts[1].seeds, (std::vector<uint64_t>{4, 5}));
  EXPECT_EQ(f.prompts[2].seeds, (std::vector<uint64_t>{9}));
}

TEST(PromptSourcesTest, JsonlEveryBadLineReported) {
  ManifestDir dir;
  auto p = dir.write("bad.jsonl",
                     "{\"prompt\": \"ok\"}\n"
                     "{\"prompt\": \"broken\",}\n"
                     "[1, 2]\n"
                     "{\"promt\": \"typo\"}\n"
                     "{\"prompt\": \"neg seed\", \"seeds\": [-1]}\n");
  PromptFile f = load_prompt_file(p, {});
  std::vector<int> lines;
  for (const auto& pr : f.problems) lines.push_back(pr.line);
  EXPECT_EQ(lines, (std::vector<int>{2, 3, 4, 4, 5}));  // line 4: unknown key + missing prompt
  EXPECT_GT(f.problems[0].column, 1);
  EXPECT_NE(f.problems[2].message.find("promt"), std::string::npos);
  ASSERT_EQ(f.prompts.size(), 1u);
}

TEST(PromptSourcesTest, PlainTextSkipsBlanksAndComments) {
  ManifestDir dir;
  auto p = dir.write("p.txt", "# header\n  first prompt  \n\nsecond\n#third\n");
  PromptFile f = load_prompt_file(p, {});
  ASSERT_TRUE(f.problems.empty());
  ASSERT_EQ(f.prompts.size(), 2u);
  EXPECT_EQ(f.prompts[0].text, "first prompt");
  EXPECT_EQ(f.prompts[0].line, 2);
  EXPECT_EQ(f.prompts[1].line, 4);
}

TEST(PromptSourcesTest, UnreadableUnknownAndEmptyFiles) {
  ManifestDir dir;
  EXPECT_EQ(load_prompt_file(dir.path() / "missing.txt", {}).problems.size(), 1u);
  auto csv = dir.write("p.csv", "a,b\n");
  PromptFile f = load_prompt_file(csv, {});
  ASSERT_EQ(f.problems.size(), 1u);
  EXPECT_NE(f.problems[0].message.find(".tsv, .jsonl or .txt"), std::string::npos);
  PromptFileOptions as_text;
  as_text.format = PromptFormat::kText;
  EXPECT_TRUE(load_prompt_file(csv, as_text).problems.empty());
  auto empty = dir.write("e.txt", "# nothing\n");
  PromptFile e = load_prompt_file(empty, {});
  ASSERT_EQ(e.problems.size(), 1u);
  EXPECT_NE(e.problems[0].message.find("no prompts"), std::string::npos);
}

TEST(PromptSourcesTest, FormatNames) {
  EXPECT_EQ(parse_prompt_format("jsonl"), PromptFormat::kJsonl);
  EXPECT_EQ(parse_prompt_format("txt"), PromptFormat::kText);
  EXPECT_FALSE(parse_prompt_format("csv").has_value());
  EXPECT_EQ(prompt_format_name(PromptFormat::kTsv), "tsv");
}

}  // namespace
}  // namespace hipq::coordinator
