// Unit tests of the byte-level BPE tokenizer on tiny hand-written
// tokenizer.json fixtures: each pins one rule of the Hugging Face format.
// Whole-tokenizer agreement with real files is checked by test_tokenizer_npm.py.
#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tern/core/error.h"
#include "tern/tokenizer/byte_level.h"
#include "tern/tokenizer/pre_tokenizer.h"
#include "tern/tokenizer/regex.h"
#include "tern/tokenizer/stream_decoder.h"
#include "tern/tokenizer/synthetic.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;

// A tokenizer.json with the 256 byte tokens (ids 0..255 = byte values),
// `extra` tokens after them, the given merges and added tokens.
json fixture(const std::vector<std::string>& extra, const json& merges,
             const json& added = json::array()) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b)
    vocab[bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = b;
  int id = 256;
  for (const auto& t : extra) vocab[t] = id++;
  return {
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
  };
}

Tokenizer load(const json& config) {
  return Tokenizer::from_json_text(config.dump());
}

json added_token(int id, const std::string& content, bool special, json fields = json::object()) {
  json t = {{"id", id},        {"content", content},   {"special", special}, {"lstrip", false},
            {"rstrip", false}, {"single_word", false}, {"normalized", false}};
  t.update(fields);
  return t;
}

std::string error_of(const json& config) {
  try {
    load(config);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Tokenizer, MergesByRankLowestFirst) {
  // "abc" can become [a, bc] or [ab, c]; the lower-ranked merge decides.
  Tokenizer bc_first = load(fixture({"ab", "bc"}, {"b c", "a b"}));
  EXPECT_EQ(bc_first.encode("abc"), (Ids{'a', 257}));
  Tokenizer ab_first = load(fixture({"ab", "bc"}, {"a b", "b c"}));
  EXPECT_EQ(ab_first.encode("abc"), (Ids{256, 'c'}));
}

TEST(Tokenizer, MergesChainThroughMergedTokens) {
  Tokenizer tok = load(fixture({"bc", "abc"}, {"b c", "a bc"}));
  EXPECT_EQ(tok.encode("abc"), (Ids{257}));
  EXPECT_EQ(tok.encode("abcbc"), (Ids{257, 256}));
}

TEST(Tokenizer, SamePairMergesLeftmostFirst) {
  Tokenizer tok = load(fixture({"aa"}, {"a a"}));
  EXPECT_EQ(tok.encode("aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(tok.encode("aaaa"), (Ids{256, 256}));
}

TEST(Tokenizer, AcceptsArrayFormMerges) {
  Tokenizer tok =
      load(fixture({"ab", "bc"}, json::array({json::array({"b", "c"}), json::array({"a", "b"})})));
  EXPECT_EQ(tok.encode("abc"), (Ids{'a', 257}));
}

TEST(Tokenizer, LongRunOfOneCharacterMergesCompletely) {
  Tokenizer tok = load(fixture({"aa", "aaaa"}, {"a a", "aa aa"}));
  Ids ids = tok.encode(std::string(100001, 'a'));
  ASSERT_EQ(ids.size(), 25001u);
  EXPECT_EQ(ids.front(), 257);
  EXPECT_EQ(ids.back(), 'a');
}

TEST(Tokenizer, IgnoreMergesEmitsWholeWordInVocab) {
  // "abc" is in the vocab but no merge chain reaches it.
  json config = fixture({"ab", "abc"}, {"a b"});
  EXPECT_EQ(load(config).encode("abc"), (Ids{256, 'c'}));
  config["model"]["ignore_merges"] = true;
  EXPECT_EQ(load(config).encode("abc"), (Ids{257}));
}

TEST(Tokenizer, PreTokenizerSplitsBeforeMerging) {
  // The GPT-2 regex puts the space with the following word, so "a b" never merges across it.
  Tokenizer tok = load(fixture({"Ġb", "a Ġ"}, {"Ġ b"}));
  EXPECT_EQ(tok.encode("a b"), (Ids{'a', 256}));
}

TEST(Tokenizer, ByteLevelAddPrefixSpace) {
  json config = fixture({"Ġa"}, {"Ġ a"});
  config["pre_tokenizer"]["add_prefix_space"] = true;
  EXPECT_EQ(load(config).encode("a"), (Ids{256}));
  EXPECT_EQ(load(config).encode(" a"), (Ids{256}));
}

TEST(Tokenizer, ByteLevelAlphabetMatchesGpt2) {
  // Known entries of GPT-2's bytes_to_unicode table.
  EXPECT_EQ(byte_to_unicode(' '), U'\u0120');   // Ġ
  EXPECT_EQ(byte_to_unicode('\n'), U'\u010A');  // Ċ
  EXPECT_EQ(byte_to_unicode('A'), U'A');
  EXPECT_EQ(byte_to_unicode(0x00), U'\u0100');
  EXPECT_EQ(byte_to_unicode(0xAD), U'\u0143');
  EXPECT_EQ(byte_to_unicode(0xFF), U'\u00FF');
  for (int b = 0; b < 256; ++b)
    EXPECT_EQ(unicode_to_byte(byte_to_unicode(static_cast<uint8_t>(b))), b);
}

TEST(Tokenizer, RoundTripsArbitraryTextThroughBytes) {
  Tokenizer tok = load(fixture({"ab"}, {"a b"}));
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      // Any code point except surrogates, controls included (NUL too).
      char32_t cp = rng() % 0x110000;
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x41;
      if (cp < 0x80)
        text += static_cast<char>(cp);
      else if (cp < 0x800)
        text += {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
      else if (cp < 0x10000)
        text += {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                 static_cast<char>(0x80 | (cp & 0x3F))};
      else
        text +=
            {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
             static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
    EXPECT_EQ(tok.decode(tok.encode(text)), text);
  }
}

TEST(Tokenizer, EmptyTextGivesNoIds) {
  EXPECT_TRUE(load(fixture({}, json::array())).encode("").empty());
}

TEST(Tokenizer, InvalidUtf8ThrowsNamingTheByte) {
  Tokenizer tok = load(fixture({}, json::array()));
  for (const auto& [text, offset] : std::vector<std::pair<std::string, int>>{
           {"ab\xFF", 2}, {"\xC3", 0}, {"ok\xE2\x82", 2}, {"\xED\xA0\x80", 0}, {"x\xC0\xAF", 1}}) {
    try {
      tok.encode(text);
      ADD_FAILURE() << "no error for offset " << offset;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not valid UTF-8 at byte " + std::to_string(offset)),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Tokenizer, AddedTokensMatchInRawTextLongestFirst) {
  json added = json::array({added_token(300, "<|im|>", true), added_token(301, "<|im|>x", true)});
  Tokenizer tok = load(fixture({"ab"}, {"a b"}, added));
  EXPECT_EQ(tok.encode("ab<|im|>ab"), (Ids{256, 300, 256}));
  EXPECT_EQ(tok.encode("<|im|>x<|im|>"), (Ids{301, 300}));
  EXPECT_EQ(tok.vocab_size(), 302);
  EXPECT_TRUE(tok.is_special(300));
}

TEST(Tokenizer, DisabledSpecialTokensAreTokenizedAsText) {
  json added = json::array({added_token(300, "<s>", true), added_token(301, "<think>", false)});
  Tokenizer tok = load(fixture({}, json::array(), added));
  EncodeOptions plain;
  plain.allow_special = false;
  EXPECT_EQ(tok.encode("<s>", plain), (Ids{'<', 's', '>'}));
  EXPECT_EQ(tok.encode("<s>"), (Ids{300}));
  // Non-special added tokens still match, as in Hugging Face tokenizers.
  EXPECT_EQ(tok.encode("<think>", plain), (Ids{301}));
}

TEST(Tokenizer, AddedTokenStripAndSingleWord) {
  json added = json::array({added_token(300, "<m>", true, {{"lstrip", true}, {"rstrip", true}}),
                            added_token(301, "cat", false, {{"single_word", true}})});
  Tokenizer tok = load(fixture({}, json::array(), added));
  // lstrip/rstrip swallow the surrounding whitespace into the token.
  EXPECT_EQ(tok.encode("a  <m> \nb"), (Ids{'a', 300, 'b'}));
  EXPECT_EQ(tok.encode("cat"), (Ids{301}));
  EXPECT_EQ(tok.encode("a cat."), (Ids{'a', ' ', 301, '.'}));
  EXPECT_EQ(tok.encode("cats"), (Ids{'c', 'a', 't', 's'}));
}

TEST(Tokenizer, NfcNormalizesBeforeSplitting) {
  json config = fixture({}, json::array());
  config["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}})}};
  Tokenizer tok = load(config);
  EXPECT_EQ(tok.encode("cafe\xCC\x81"), tok.encode("caf\xC3\xA9"));
  EXPECT_EQ(tok.decode(tok.encode("cafe\xCC\x81")), "caf\xC3\xA9");
}

TEST(Tokenizer, SplitRegexIsolatesMatches) {
  json config = fixture({"12"}, {"1 2"});
  config["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"},
                     {"pattern", {{"Regex", "\\p{N}"}}},
                     {"behavior", "Isolated"},
                     {"invert", false}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  // Every digit is its own pre-token, so "12" cannot merge.
  EXPECT_EQ(load(config).encode("x12"), (Ids{'x', '1', '2'}));
}

TEST(PreTokenizer, SplitBehaviorsFollowTokenizers) {
  auto pieces = [](const std::string& behavior, std::string text) {
    json config = {{"type", "Split"},
                   {"pattern", {{"String", "-"}}},
                   {"behavior", behavior},
                   {"invert", false}};
    PreTokenizer pre = PreTokenizer::from_json(config);
    std::vector<ByteRange> ranges;
    pre.split(text, ranges);
    std::vector<std::string> out;
    for (auto r : ranges) out.push_back(text.substr(r.begin, r.end - r.begin));
    return out;
  };
  using S = std::vector<std::string>;
  EXPECT_EQ(pieces("Isolated", "a-b--c"), (S{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(pieces("Removed", "a-b--c"), (S{"a", "b", "c"}));
  EXPECT_EQ(pieces("MergedWithPrevious", "a-b--c"), (S{"a-", "b-", "-", "c"}));
  EXPECT_EQ(pieces("MergedWithNext", "a-b--c"), (S{"a", "-b", "-", "-c"}));
  EXPECT_EQ(pieces("Contiguous", "a-b--c"), (S{"a", "-", "b", "--", "c"}));
}

TEST(Regex, WhiteSpaceIsUnicodeWhiteSpaceAsInOniguruma) {
  // Oniguruma's \s includes U+0085 (NEL); PCRE2's does not unless translated.
  Regex re("\\s+");
  std::vector<ByteRange> m;
  re.find_all(
      "a\xC2\x85\xC2\xA0"
      "b",
      m);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].begin, 1u);
  EXPECT_EQ(m[0].end, 5u);
  Regex not_space("\\S+");
  m.clear();
  not_space.find_all("\xC2\x85x", m);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].begin, 2u);
}

TEST(Tokenizer, UnsupportedComponentsNameTheirType) {
  json c = fixture({}, json::array());
  c["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_NE(error_of(c).find("\"Lowercase\""), std::string::npos) << error_of(c);
  c = fixture({}, json::array());
  c["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_NE(error_of(c).find("\"Whitespace\""), std::string::npos) << error_of(c);
  c = fixture({}, json::array());
  c["model"]["type"] = "WordPiece";
  EXPECT_NE(error_of(c).find("\"WordPiece\""), std::string::npos) << error_of(c);
  c = fixture({}, json::array());
  c["decoder"] = {{"type", "Metaspace"}};
  EXPECT_NE(error_of(c).find("\"Metaspace\""), std::string::npos) << error_of(c);
  c = fixture({}, json::array());
  c["post_processor"] = {{"type", "BertProcessing"}};
  EXPECT_NE(error_of(c).find("\"BertProcessing\""), std::string::npos) << error_of(c);
  c = fixture({}, json::array());
  c["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Sideways"}};
  EXPECT_NE(error_of(c).find("\"Sideways\""), std::string::npos) << error_of(c);
  c = fixture({}, {"a zz"});
  EXPECT_NE(error_of(c).find("\"zz\""), std::string::npos) << error_of(c);
}

// from_json_text takes model.vocab's entries out while parsing; the result
// must be what the JSON object would have given.
TEST(Tokenizer, VocabTakenOutWhileParsingKeepsObjectSemantics) {
  const std::string text = fixture({"ab"}, {"a b"}).dump();
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  const auto error_in = [](const std::string& t) -> std::string {
    try {
      Tokenizer::from_json_text(t);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(Tokenizer::from_json_text(text).encode("ab"), Ids{256});
  // A repeated key: the last one wins, as in the object.
  EXPECT_EQ(Tokenizer::from_json_text(with("\"ab\":256", "\"ab\":7,\"ab\":256")).encode("ab"), Ids{256});
  EXPECT_EQ(Tokenizer::from_json_text(with("\"ab\":256", "\"ab\":256,\"ab\":300")).encode("ab"), Ids{300});
  // A "vocab" anywhere but in "model" is not the vocab.
  EXPECT_EQ(Tokenizer::from_json_text(with("{\"added_tokens\"", "{\"x\":{\"vocab\":{\"ab\":-5}},\"added_tokens\""))
                .encode("ab"),
            Ids{256});
  // An object or array as an id is refused naming the entry; so is a vocab that is not an object.
  EXPECT_NE(error_in(with("\"ab\":256", "\"ab\":{\"id\":256}")).find("vocab entry \"ab\" has an invalid id {}"),
            std::string::npos)
      << error_in(with("\"ab\":256", "\"ab\":{\"id\":256}"));
  EXPECT_NE(error_in(with("\"ab\":256", "\"ab\":[256]")).find("vocab entry \"ab\" has an invalid id []"),
            std::string::npos);
  EXPECT_NE(error_in(with("\"vocab\":{", "\"vocab\":\"none\",\"vocab2\":{")).find("vocab must be an object"),
            std::string::npos);
}

// Hostile tokenizer.json files (issue 16): ids that would size the id table
// from a corrupt value, floats where ids belong (an undefined conversion),
// and nesting deep enough to exhaust the stack are clean errors.
TEST(Tokenizer, TokenIdsOutsideTheIdRangeAreRefused) {
  for (const json& bad : {json(2147483647), json(-1), json(1e20), json(4194304), json("7")}) {
    json c = fixture({}, json::array(), json::array({added_token(300, "<x>", true, {{"id", bad}})}));
    EXPECT_NE(error_of(c).find("added token has an invalid id"), std::string::npos) << error_of(c);
  }
  json c = fixture({"ab"}, json::array());
  c["model"]["vocab"]["ab"] = 5000000;
  EXPECT_NE(error_of(c).find("vocab entry \"ab\" has an invalid id 5000000"), std::string::npos) << error_of(c);
  c = fixture({}, json::array(), json::array({added_token(300, "<s>", true)}));
  c["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}})},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1e30}}, {"tokens", {"<s>"}}}}}}};
  EXPECT_NE(error_of(c).find("post_processor special token has an invalid id"), std::string::npos) << error_of(c);
}

TEST(Tokenizer, MostlyEmptyIdSpaceIsRefused) {
  json c = fixture({}, json::array(), json::array({added_token(1000000, "<x>", true)}));
  EXPECT_NE(error_of(c).find("token id 1000000 is far beyond the 257 tokens defined"), std::string::npos)
      << error_of(c);
  // Gaps of real tokenizers (Qwen3 pads to vocab_size; added tokens after the vocabulary) are fine.
  c = fixture({}, json::array(), json::array({added_token(4000, "<x>", true)}));
  EXPECT_EQ(load(c).vocab_size(), 4001);
}

TEST(Tokenizer, DeeplyNestedComponentsAreRefused) {
  json nested = {{"type", "NFC"}};
  for (int i = 0; i < 200; ++i) nested = {{"type", "Sequence"}, {"normalizers", json::array({nested})}};
  json c = fixture({}, json::array());
  c["normalizer"] = nested;
  EXPECT_NE(error_of(c).find("nested deeper than 128 levels"), std::string::npos) << error_of(c);
}

TEST(Tokenizer, TemplateProcessingExposesBos) {
  json added = json::array({added_token(300, "<|begin_of_text|>", true)});
  json config = fixture({}, json::array(), added);
  EXPECT_EQ(load(config).bos_id(), -1);
  config["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       json::array({{{"type", "ByteLevel"}},
                    {{"type", "TemplateProcessing"},
                     {"single", json::array({{{"SpecialToken",
                                               {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                                             {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                     {"special_tokens",
                      {{"<|begin_of_text|>",
                        {{"id", "<|begin_of_text|>"},
                         {"ids", {300}},
                         {"tokens", {"<|begin_of_text|>"}}}}}}}})}};
  Tokenizer tok = load(config);
  EXPECT_EQ(tok.bos_id(), 300);
  EXPECT_TRUE(tok.post_processor_adds_bos());
  EXPECT_EQ(tok.encode("a"), (Ids{'a'}));
  EncodeOptions with_bos;
  with_bos.add_bos = true;
  EXPECT_EQ(tok.encode("a", with_bos), (Ids{300, 'a'}));
}

TEST(Tokenizer, LooksUpPiecesAndSpecialTokens) {
  json added = json::array({added_token(300, "<|end|>", true)});
  Tokenizer tok = load(fixture({"Ġh", "Ġhi"}, {"Ġ h", "Ġh i"}, added));
  EXPECT_EQ(tok.token_id("<|end|>"), 300);
  EXPECT_EQ(tok.token_id("\xC4\xA0hi"), 257);  // "Ġhi" as spelled in the vocab
  EXPECT_EQ(tok.token_id(" hi"), 257);         // or as raw bytes
  EXPECT_EQ(tok.token_id("nope"), -1);
  EXPECT_EQ(tok.token_piece(257), " hi");
  EXPECT_EQ(tok.token_string(257), "\xC4\xA0hi");
  EXPECT_EQ(tok.vocab_size(), 301);
  EXPECT_FALSE(tok.has_token(299));  // a gap in the ids
  EXPECT_THROW(tok.decode(Ids{299}), Error);
  EXPECT_THROW(tok.decode(Ids{-1}), Error);
  EXPECT_EQ(tok.encode(" hi"), (Ids{257}));
  EXPECT_EQ(tok.decode(Ids{257, 300}), " hi<|end|>");
}

TEST(StreamDecoder, HoldsBackIncompleteUtf8) {
  Tokenizer tok = load(fixture({}, json::array()));
  const std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600, one byte token per byte here
  Ids ids = tok.encode("a" + emoji + "b");
  ASSERT_EQ(ids.size(), 6u);
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.push(ids[0]), "a");
  EXPECT_EQ(stream.push(ids[1]), "");
  EXPECT_EQ(stream.push(ids[2]), "");
  EXPECT_EQ(stream.push(ids[3]), "");
  EXPECT_EQ(stream.pending_bytes(), 3u);
  EXPECT_EQ(stream.push(ids[4]), emoji);
  EXPECT_EQ(stream.push(ids[5]), "b");
  EXPECT_EQ(stream.flush(), "");
}

TEST(StreamDecoder, ReplacesBytesThatCanNeverComplete) {
  Tokenizer tok = load(fixture({}, json::array()));
  const std::string fffd = "\xEF\xBF\xBD";
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.push(0x80), fffd);  // stray continuation byte: invalid at once
  EXPECT_EQ(stream.push(0xF0), "");
  EXPECT_EQ(stream.push(0x9F), "");
  EXPECT_EQ(stream.push('a'), fffd + "a");  // the prefix F0 9F cannot continue with 'a'
  EXPECT_EQ(stream.push(0xE0), "");
  EXPECT_EQ(stream.push(0x80), fffd + fffd);  // E0 80 would be overlong: both bytes invalid
  EXPECT_EQ(stream.push(0xFF), fffd);
  EXPECT_EQ(stream.push(0xE2), "");
  EXPECT_EQ(stream.push(0x82), "");
  EXPECT_EQ(stream.flush(), fffd);  // the stream ended mid-character
  EXPECT_EQ(stream.pending_bytes(), 0u);
}

TEST(SyntheticTokenizer, IsDeterministic) {
  SyntheticTokenizer a = build_synthetic_tokenizer();
  SyntheticTokenizer b = build_synthetic_tokenizer();
  EXPECT_EQ(a.tokenizer_json, b.tokenizer_json);
  EXPECT_EQ(a.tokenizer_config_json, b.tokenizer_config_json);
  SyntheticTokenizerOptions fewer;
  fewer.merges = 100;
  EXPECT_LT(build_synthetic_tokenizer(fewer).vocab_size, a.vocab_size);
}

TEST(SyntheticTokenizer, HasQwen3LayoutAndSpecialTokens) {
  SyntheticTokenizer synthetic = build_synthetic_tokenizer();
  EXPECT_GE(synthetic.vocab_size, 1000);
  EXPECT_LE(synthetic.vocab_size, 2000);
  Tokenizer tok = Tokenizer::from_json_text(synthetic.tokenizer_json);
  EXPECT_EQ(tok.vocab_size(), synthetic.vocab_size);
  EXPECT_EQ(tok.token_id("<|im_end|>"), synthetic.eos_id);
  EXPECT_EQ(tok.token_id("<|endoftext|>"), synthetic.pad_id);
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
    EXPECT_TRUE(tok.is_special(tok.token_id(special))) << special;
  for (const char* added : {"<think>", "</think>", "<tool_call>", "</tool_call>"}) {
    EXPECT_TRUE(tok.is_added(tok.token_id(added))) << added;
    EXPECT_FALSE(tok.is_special(tok.token_id(added))) << added;
  }
  json config = json::parse(synthetic.tokenizer_config_json);
  EXPECT_EQ(config["eos_token"], "<|im_end|>");
  EXPECT_EQ(config["pad_token"], "<|endoftext|>");
  EXPECT_TRUE(config["bos_token"].is_null());
  EXPECT_NE(config["chat_template"].get<std::string>().find("<think>"), std::string::npos);
  EXPECT_EQ(config["added_tokens_decoder"].size(), tok.added_tokens().size());
}

// DeepSeek-V3's layout: its sentence tokens at ids 0..2 in the vocabulary
// too, its chat and tool tokens (normalized, mostly not special) after it, a
// Sequence of Splits before ByteLevel, the real file's tokenizer_config.json
// fields. That Tern and the JS reference agree on it: test_tokenizer_npm.py.
TEST(SyntheticTokenizer, HasDeepseekV3Layout) {
  SyntheticTokenizer synthetic = build_synthetic_tokenizer({.specials = SyntheticSpecials::DeepseekV3});
  EXPECT_EQ(synthetic.tokenizer_json, build_synthetic_tokenizer({.specials = SyntheticSpecials::DeepseekV3}).tokenizer_json);
  EXPECT_GE(synthetic.vocab_size, 1000);
  EXPECT_LE(synthetic.vocab_size, 2000);
  Tokenizer tok = Tokenizer::from_json_text(synthetic.tokenizer_json);
  EXPECT_EQ(tok.vocab_size(), synthetic.vocab_size);
  EXPECT_EQ(tok.token_id("<｜begin▁of▁sentence｜>"), 0);
  EXPECT_EQ(tok.token_id("<｜end▁of▁sentence｜>"), 1);
  EXPECT_EQ(tok.token_id("<｜▁pad▁｜>"), 2);
  EXPECT_EQ(synthetic.eos_id, 1);
  EXPECT_EQ(synthetic.pad_id, 1);
  for (int32_t id : {0, 1, 2}) EXPECT_TRUE(tok.is_special(id)) << id;
  EXPECT_EQ(tok.token_id("<｜tool▁sep｜>"), synthetic.vocab_size - 1);
  EXPECT_EQ(tok.token_id("<｜fim▁hole｜>"), synthetic.vocab_size - 15);
  EXPECT_TRUE(tok.is_special(tok.token_id("<|EOT|>")));
  for (const char* added : {"<｜User｜>", "<｜Assistant｜>", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",
                            "<｜tool▁outputs▁end｜>"}) {
    EXPECT_TRUE(tok.is_added(tok.token_id(added))) << added;
    EXPECT_FALSE(tok.is_special(tok.token_id(added))) << added;
  }
  EXPECT_LT(tok.token_id("<think>"), 0);

  json file = json::parse(synthetic.tokenizer_json);
  EXPECT_EQ(file["model"]["vocab"]["<｜▁pad▁｜>"], 2);
  EXPECT_EQ(file["model"]["vocab"].size(), static_cast<size_t>(synthetic.vocab_size - 15));
  EXPECT_TRUE(file["model"]["merges"][0].is_string());
  EXPECT_EQ(file["normalizer"], json({{"type", "Sequence"}, {"normalizers", json::array()}}));
  const json& pre = file["pre_tokenizer"]["pretokenizers"];
  ASSERT_EQ(pre.size(), 4u);
  EXPECT_EQ(pre[0]["pattern"]["Regex"], "\\p{N}{1,3}");
  EXPECT_EQ(pre[3]["type"], "ByteLevel");
  EXPECT_EQ(file["decoder"]["add_prefix_space"], true);

  json config = json::parse(synthetic.tokenizer_config_json);
  EXPECT_EQ(config["bos_token"]["content"], "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(config["eos_token"]["content"], "<｜end▁of▁sentence｜>");
  EXPECT_EQ(config["pad_token"]["content"], "<｜end▁of▁sentence｜>");
  EXPECT_EQ(config["bos_token"]["__type"], "AddedToken");
  EXPECT_EQ(config["tokenizer_class"], "LlamaTokenizerFast");
  EXPECT_EQ(config["add_bos_token"], true);
  EXPECT_NE(config["chat_template"].get<std::string>().find("<｜tool▁outputs▁begin｜>"), std::string::npos);

  // Corpus-style text, numbers and CJK round-trip; the chat tokens are one id each.
  for (const std::string text : {"The quick brown fox: 1234567 or 3.14159?", "你好，世界！こんにちは カタカナ",
                                 "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜>",
                                 "  spaces\n\n\tand tabs\r\n"})
    EXPECT_EQ(tok.decode(tok.encode(text)), text);
  EXPECT_EQ(tok.encode("<｜User｜>Hi<｜Assistant｜>").front(), tok.token_id("<｜User｜>"));
  EXPECT_EQ(tok.encode("<｜tool▁call▁begin｜>").size(), 1u);
  EXPECT_LT(tok.encode("The quick brown fox jumps over the lazy dog.").size(), 44u * 6 / 10);
}

// GLM-4.5's layout: GLM-4's Split before ByteLevel, its 36 added tokens
// after the learned vocabulary in the real order (the first 18 special),
// tokenizer_config.json with eos = pad = <|endoftext|> and its chat template.
// That Tern and the JS reference agree on it: test_tokenizer_npm.py.
TEST(SyntheticTokenizer, HasGlm45Layout) {
  SyntheticTokenizer synthetic = build_synthetic_tokenizer({.specials = SyntheticSpecials::Glm45});
  EXPECT_EQ(synthetic.tokenizer_json, build_synthetic_tokenizer({.specials = SyntheticSpecials::Glm45}).tokenizer_json);
  EXPECT_GE(synthetic.vocab_size, 1000);
  EXPECT_LE(synthetic.vocab_size, 2000);
  Tokenizer tok = Tokenizer::from_json_text(synthetic.tokenizer_json);
  EXPECT_EQ(tok.vocab_size(), synthetic.vocab_size);
  const int32_t first = synthetic.vocab_size - 36;  // <|endoftext|>, real id 151329
  const char* order[] = {"<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>",
                         "<|user|>", "<|assistant|>", "<|observation|>"};
  for (int32_t k = 0; k < 10; ++k) EXPECT_EQ(tok.token_id(order[k]), first + k) << order[k];
  EXPECT_EQ(tok.token_id("<|code_prefix|>"), first + 18);  // 151347
  EXPECT_EQ(tok.token_id("<think>"), first + 21);          // 151350
  EXPECT_EQ(tok.token_id("<tool_call>"), first + 23);      // 151352
  EXPECT_EQ(tok.token_id("<arg_key>"), first + 27);        // 151356
  EXPECT_EQ(tok.token_id("/nothink"), first + 31);         // 151360
  EXPECT_EQ(tok.token_id("<|video|>"), first + 35);        // 151364
  EXPECT_EQ(synthetic.eos_id, first);
  EXPECT_EQ(synthetic.pad_id, first);
  for (int32_t id = first; id < first + 18; ++id) EXPECT_TRUE(tok.is_special(id)) << id;
  for (int32_t id = first + 18; id < first + 36; ++id) {
    EXPECT_TRUE(tok.is_added(id)) << id;
    EXPECT_FALSE(tok.is_special(id)) << id;
  }

  json file = json::parse(synthetic.tokenizer_json);
  EXPECT_EQ(file["model"]["vocab"].size(), static_cast<size_t>(first));
  EXPECT_TRUE(file["model"]["merges"][0].is_array());
  EXPECT_EQ(file["model"]["ignore_merges"], true);
  EXPECT_TRUE(file["normalizer"].is_null());
  const json& pre = file["pre_tokenizer"]["pretokenizers"];
  ASSERT_EQ(pre.size(), 2u);
  EXPECT_NE(pre[0]["pattern"]["Regex"].get<std::string>().find("\\p{N}{1,3}"), std::string::npos);
  EXPECT_EQ(pre[1]["type"], "ByteLevel");
  EXPECT_EQ(file["post_processor"]["add_prefix_space"], true);
  EXPECT_EQ(file["decoder"]["type"], "ByteLevel");

  json config = json::parse(synthetic.tokenizer_config_json);
  EXPECT_EQ(config["eos_token"], "<|endoftext|>");
  EXPECT_EQ(config["pad_token"], "<|endoftext|>");
  EXPECT_FALSE(config.contains("bos_token"));
  EXPECT_EQ(config["tokenizer_class"], "PreTrainedTokenizer");
  EXPECT_EQ(config["additional_special_tokens"].size(), 18u);
  EXPECT_EQ(config["added_tokens_decoder"][std::to_string(first + 2)]["content"], "[gMASK]");
  EXPECT_EQ(config["chat_template"].get<std::string>().rfind("[gMASK]<sop>", 0), 0u);

  // Text round-trips (the post-processor adds nothing); the chat tokens are one id each.
  for (const std::string text : {"The quick brown fox: 1234567 or 3.14159?", "你好，世界！こんにちは",
                                 "[gMASK]<sop><|user|>\nHi<|assistant|>\n<think></think>\nHello!",
                                 "  spaces\n\n\tand tabs\r\n"})
    EXPECT_EQ(tok.decode(tok.encode(text)), text);
  EXPECT_EQ(tok.encode("[gMASK]<sop><|user|>").size(), 3u);
  EXPECT_EQ(tok.encode("<tool_call>f\n<arg_key>a</arg_key>").front(), tok.token_id("<tool_call>"));
  EXPECT_LT(tok.encode("The quick brown fox jumps over the lazy dog.").size(), 44u * 6 / 10);
}

TEST(SyntheticTokenizer, RoundTripsVariedText) {
  Tokenizer tok = Tokenizer::from_json_text(build_synthetic_tokenizer().tokenizer_json);
  const std::vector<std::string> texts = {
      "The quick brown fox jumps over the lazy dog.",
      "def f(x):\n\treturn x ** 2  # comment\n",
      "It's 12:30, they'LL see 3.14159 and 1e-5.",
      "你好，世界！こんにちは 안녕하세요 Привет",
      "emoji \xF0\x9F\x98\x80 "
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
      "   spaces\n\n\nnewlines\r\n\ttabs",
      "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</"
      "think>\n\nHello!<|im_end|>",
      std::string("nul\0byte", 8),
  };
  for (const std::string& text : texts) {
    Ids ids = tok.encode(text);
    EXPECT_EQ(tok.decode(ids), text);
    // Streaming one id at a time yields the same text (the vocabulary has
    // tokens that end mid-character, e.g. the first bytes of CJK and emoji).
    StreamDecoder stream(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    EXPECT_EQ(streamed, text);
  }
  // Merges were learned: common English takes far fewer tokens than bytes.
  EXPECT_LT(tok.encode(texts[0]).size(), texts[0].size() * 6 / 10);
  EXPECT_EQ(tok.encode("<|im_start|>").size(), 1u);
}

TEST(Tokenizer, EncodesConcurrentlyFromManyThreads) {
  Tokenizer tok = Tokenizer::from_json_text(build_synthetic_tokenizer().tokenizer_json);
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i)
    texts.push_back("thread " + std::to_string(i) +
                    ": the experts are read from the disk, 你好 \xF0\x9F\x98\x80 " +
                    std::string(static_cast<size_t>(i), 'x'));
  std::vector<Ids> expected;
  for (const auto& t : texts) expected.push_back(tok.encode(t));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int rep = 0; rep < 20; ++rep)
        for (size_t i = 0; i < texts.size(); ++i)
          if (tok.encode(texts[i]) != expected[i]) ++mismatches;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace tern
