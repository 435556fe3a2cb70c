// Unit tests of the SentencePiece-style BPE tokenizer (Mistral, Mixtral,
// Llama 2): the Prepend/Replace normalizer, the Metaspace pre-tokenizer,
// byte fallback and unk in BPE, the Replace/ByteFallback/Fuse/Strip and
// Metaspace decoders, streaming, and the synthetic Mistral tokenizer. Each
// expectation follows the Rust `tokenizers` crate's semantics. Agreement
// with the real Llama 2 / Mistral tokenizer.json is checked by
// test_tokenizer_npm.py.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tern/core/error.h"
#include "tern/tokenizer/mixtral_chat_template.h"
#include "tern/tokenizer/normalizer.h"
#include "tern/tokenizer/pre_tokenizer.h"
#include "tern/tokenizer/stream_decoder.h"
#include "tern/tokenizer/synthetic.h"
#include "tern/tokenizer/synthetic_corpus.h"
#include "tern/tokenizer/tokenizer.h"
#include "tern/tokenizer/utf8.h"

namespace tern {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;

const std::string kMeta = "\xE2\x96\x81";  // ▁
const std::string kFffd = "\xEF\xBF\xBD";  // U+FFFD

// Ids of the SentencePiece fixture: <unk> <s> </s>, the byte tokens, then these.
constexpr int32_t kUnk = 0, kBos = 1, kEos = 2;
int32_t byte_token(uint8_t b) {
  return 3 + b;
}
const std::vector<std::string> kPieces = {"▁",   "a",  "b",  "h", "i", "▁a", "▁h",
                                          "▁hi", "ab", "▁▁", "[", "]", "I",  "N"};
int32_t piece_id(const std::string& piece) {
  for (size_t i = 0; i < kPieces.size(); ++i)
    if (kPieces[i] == piece) return 259 + static_cast<int32_t>(i);
  ADD_FAILURE() << "no piece " << piece;
  return -1;
}

json legacy_normalizer() {
  return {{"type", "Sequence"},
          {"normalizers",
           json::array({{{"type", "Prepend"}, {"prepend", "▁"}},
                        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}})}};
}

json legacy_decoder() {
  return {{"type", "Sequence"},
          {"decoders",
           json::array({{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                        {{"type", "ByteFallback"}},
                        {{"type", "Fuse"}},
                        {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
}

json metaspace(const std::string& scheme, bool split) {
  return {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", scheme}, {"split", split}};
}

// A legacy Mistral-style tokenizer.json (normalizer Prepend + Replace, no
// pre-tokenizer), small enough to reason about by hand.
json sp_fixture() {
  json vocab = json::object();
  vocab["<unk>"] = kUnk;
  vocab["<s>"] = kBos;
  vocab["</s>"] = kEos;
  for (int b = 0; b < 256; ++b)
    vocab[fmt::format("<0x{:02X}>", b)] = byte_token(static_cast<uint8_t>(b));
  int32_t id = 259;
  for (const std::string& p : kPieces) vocab[p] = id++;
  json added = json::array();
  for (int i = 0; i < 3; ++i)
    added.push_back({{"id", i},
                     {"content", std::vector<std::string>{"<unk>", "<s>", "</s>"}[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  return {
      {"added_tokens", added},
      {"normalizer", legacy_normalizer()},
      {"pre_tokenizer", nullptr},
      {"post_processor", nullptr},
      {"decoder", legacy_decoder()},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"vocab", vocab},
        {"merges", {"▁ a", "▁ h", "▁h i", "a b", "▁ ▁"}}}},
  };
}

// The same vocabulary in the non-legacy form: Metaspace instead of the normalizer.
json sp_metaspace_fixture(const std::string& scheme, bool split) {
  json c = sp_fixture();
  c["normalizer"] = nullptr;
  c["pre_tokenizer"] = metaspace(scheme, split);
  return c;
}

Tokenizer sp_load(const json& config) {
  return Tokenizer::from_json_text(config.dump());
}

std::string sp_error_of(const json& config) {
  try {
    sp_load(config);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::string> pieces_of(const PreTokenizer& pre, const std::string& text,
                                   bool at_text_start = true) {
  std::string buffer = text;
  std::vector<ByteRange> ranges;
  pre.split(buffer, ranges, at_text_start);
  std::vector<std::string> out;
  for (const ByteRange& r : ranges) out.push_back(buffer.substr(r.begin, r.end - r.begin));
  return out;
}

std::string streamed(const Tokenizer& tok, const Ids& ids) {
  StreamDecoder stream(tok);
  std::string out;
  for (int32_t id : ids) out += stream.push(id);
  return out + stream.flush();
}

using Strings = std::vector<std::string>;

TEST(SentencePieceNormalizer, PrependsToNonEmptyTextAndReplacesSpaces) {
  Normalizer n = Normalizer::from_json(legacy_normalizer());
  std::string out;
  n.apply("hi  a", out);
  EXPECT_EQ(out, kMeta + "hi" + kMeta + kMeta + "a");
  n.apply(" x ", out);
  EXPECT_EQ(out, kMeta + kMeta + "x" + kMeta);
  n.apply("", out);
  EXPECT_EQ(out, "");  // Prepend leaves empty text empty
  Normalizer regex = Normalizer::from_json(
      {{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", "_"}});
  regex.apply("a   b c", out);
  EXPECT_EQ(out, "a_b_c");
}

TEST(SentencePieceTokenizer, LegacyFormPrependsToEachPieceBetweenAddedTokens) {
  Tokenizer tok = sp_load(sp_fixture());
  EXPECT_EQ(tok.encode("hi"), (Ids{piece_id("▁hi")}));
  EXPECT_EQ(tok.encode(""), Ids{});
  // No pre-tokenizer: the whole piece is one BPE word, so merges may span "▁".
  EXPECT_EQ(tok.encode("a b"), (Ids{piece_id("▁a"), piece_id("▁"), piece_id("b")}));
  EXPECT_EQ(tok.encode("  a"), (Ids{piece_id("▁▁"), piece_id("▁a")}));
  // "<s>hi</s>hi": each piece between the added tokens gets its own "▁".
  EXPECT_EQ(tok.encode("<s>hi</s>hi"), (Ids{kBos, piece_id("▁hi"), kEos, piece_id("▁hi")}));
  EXPECT_EQ(tok.encode("<s>[IN"),
            (Ids{kBos, piece_id("▁"), piece_id("["), piece_id("I"), piece_id("N")}));
  // Special tokens disabled: "<s>" is text, "<", "s", ">" are not in the vocab: byte fallback.
  EncodeOptions plain;
  plain.allow_special = false;
  EXPECT_EQ(tok.encode("<s>hi", plain), (Ids{piece_id("▁"), byte_token('<'), byte_token('s'),
                                             byte_token('>'), piece_id("h"), piece_id("i")}));
  EXPECT_EQ(tok.encode(" ", plain), (Ids{piece_id("▁▁")}));
}

TEST(SentencePieceTokenizer, MetaspacePreTokenizerSchemesAndSplit) {
  auto pre = [](const std::string& scheme, bool split) {
    return PreTokenizer::from_json(metaspace(scheme, split));
  };
  const std::string m = kMeta;
  EXPECT_EQ(pieces_of(pre("always", true), "hi a"), (Strings{m + "hi", m + "a"}));
  EXPECT_EQ(pieces_of(pre("always", true), "a  b"), (Strings{m + "a", m, m + "b"}));
  EXPECT_EQ(pieces_of(pre("always", true), " hi"),
            (Strings{m + "hi"}));  // starts with a space: no second "▁"
  EXPECT_EQ(pieces_of(pre("always", true), "hi", /*at_text_start=*/false), (Strings{m + "hi"}));
  EXPECT_EQ(pieces_of(pre("always", false), "hi a"), (Strings{m + "hi" + m + "a"}));
  EXPECT_EQ(pieces_of(pre("first", true), "hi a"), (Strings{m + "hi", m + "a"}));
  EXPECT_EQ(pieces_of(pre("first", true), "hi a", false),
            (Strings{"hi", m + "a"}));  // not the input's start
  EXPECT_EQ(pieces_of(pre("first", false), "hi a", false), (Strings{"hi" + m + "a"}));
  EXPECT_EQ(pieces_of(pre("never", true), "hi a"), (Strings{"hi", m + "a"}));
  EXPECT_EQ(pieces_of(pre("never", false), "a  b"), (Strings{"a" + m + m + "b"}));
  // Older files say add_prefix_space; false needs prepend_scheme "never".
  json old = {{"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", true}};
  EXPECT_EQ(pieces_of(PreTokenizer::from_json(old), "hi"), (Strings{m + "hi"}));
  old["add_prefix_space"] = false;
  EXPECT_THROW(PreTokenizer::from_json(old), Error);
  old["prepend_scheme"] = "never";
  EXPECT_EQ(pieces_of(PreTokenizer::from_json(old), "hi"), (Strings{"hi"}));
}

TEST(SentencePieceTokenizer, MetaspaceFirstPrependsOnlyAtTheInputStart) {
  Tokenizer first = sp_load(sp_metaspace_fixture("first", false));
  Tokenizer always = sp_load(sp_metaspace_fixture("always", false));
  Tokenizer legacy = sp_load(sp_fixture());
  EXPECT_EQ(first.encode("hi"), (Ids{piece_id("▁hi")}));
  // The text after <s> is not the start of the input: no "▁" for "first".
  EXPECT_EQ(first.encode("<s>hi"), (Ids{kBos, piece_id("h"), piece_id("i")}));
  EXPECT_EQ(always.encode("<s>hi"), (Ids{kBos, piece_id("▁hi")}));
  EXPECT_EQ(legacy.encode("<s>hi"), (Ids{kBos, piece_id("▁hi")}));
  EXPECT_EQ(first.encode("hi<s>hi"), (Ids{piece_id("▁hi"), kBos, piece_id("h"), piece_id("i")}));
  // split: "a  b" is cut before each "▁" so "▁▁" cannot form.
  Tokenizer split = sp_load(sp_metaspace_fixture("always", true));
  EXPECT_EQ(split.encode("a  b"),
            (Ids{piece_id("▁a"), piece_id("▁"), piece_id("▁"), piece_id("b")}));
  EXPECT_EQ(always.encode("a  b"), (Ids{piece_id("▁a"), piece_id("▁▁"), piece_id("b")}));
}

TEST(SentencePieceTokenizer, MissingCharactersFallBackToBytes) {
  Tokenizer tok = sp_load(sp_fixture());
  // "é" (C3 A9) and the emoji are not in the vocabulary.
  EXPECT_EQ(tok.encode("hé"), (Ids{piece_id("▁h"), byte_token(0xC3), byte_token(0xA9)}));
  EXPECT_EQ(tok.encode("\xF0\x9F\x98\x80"), (Ids{piece_id("▁"), byte_token(0xF0), byte_token(0x9F),
                                                 byte_token(0x98), byte_token(0x80)}));
  EXPECT_EQ(tok.encode(std::string("a\nb\0", 4)),
            (Ids{piece_id("▁a"), byte_token('\n'), piece_id("b"), byte_token(0)}));
}

TEST(SentencePieceTokenizer, UnkWithoutByteFallbackAndFuseUnk) {
  json config = sp_fixture();
  config["model"]["byte_fallback"] = false;
  Tokenizer fused = sp_load(config);
  EXPECT_EQ(fused.encode("héé"), (Ids{piece_id("▁h"), kUnk}));  // one unk for the run
  EXPECT_EQ(fused.encode("éaé"),
            (Ids{piece_id("▁"), kUnk, piece_id("a"), kUnk}));  // runs split by a known char
  config["model"]["fuse_unk"] = false;
  EXPECT_EQ(sp_load(config).encode("héé"), (Ids{piece_id("▁h"), kUnk, kUnk}));
  config["model"]["unk_token"] = nullptr;
  EXPECT_EQ(sp_load(config).encode("héé"), (Ids{piece_id("▁h")}));  // dropped
  config["model"]["unk_token"] = "<nope>";
  EXPECT_NE(sp_error_of(config).find("\"<nope>\""), std::string::npos) << sp_error_of(config);
}

TEST(SentencePieceTokenizer, PiecesAreRawBytesOfOneToken) {
  Tokenizer tok = sp_load(sp_fixture());
  EXPECT_EQ(tok.token_piece(piece_id("▁hi")), " hi");
  EXPECT_EQ(tok.token_piece(byte_token(0x41)), "A");
  EXPECT_EQ(tok.token_piece(byte_token(0xC3)), "\xC3");
  EXPECT_EQ(tok.token_piece(kBos), "<s>");
  EXPECT_EQ(tok.token_string(piece_id("▁hi")), "▁hi");
  EXPECT_EQ(tok.token_id(" hi"), piece_id("▁hi"));
  EXPECT_EQ(tok.token_id("▁hi"), piece_id("▁hi"));
  EXPECT_EQ(tok.token_id("\n"), byte_token('\n'));
  EXPECT_EQ(tok.token_id("</s>"), kEos);
  EXPECT_FALSE(tok.is_byte_level());
}

TEST(SentencePieceDecoder, LegacyChainReplacesFusesAndStripsOneLeadingSpace) {
  Tokenizer tok = sp_load(sp_fixture());
  EXPECT_EQ(tok.decode(Ids{piece_id("▁hi"), piece_id("▁a")}), "hi a");
  EXPECT_EQ(tok.decode(Ids{piece_id("▁▁"), piece_id("▁a")}), "  a");  // only one space stripped
  EXPECT_EQ(tok.decode(Ids{kBos, piece_id("▁hi")}), "<s> hi");  // the strip only at the very start
  EXPECT_EQ(tok.decode(Ids{byte_token(' '), piece_id("a")}), "a");  // a byte " " is a space too
  EXPECT_EQ(tok.decode(Ids{}), "");
  for (const std::string text : {"hi a", "  a b ", "h\xC3\xA9\n\tab\xF0\x9F\x98\x80", " ", ""})
    EXPECT_EQ(tok.decode(tok.encode(text)), text) << text;
}

TEST(SentencePieceDecoder, ByteRunsDecodeAsUtf8OrOneReplacementPerByte) {
  Tokenizer tok = sp_load(sp_fixture());
  EXPECT_EQ(tok.decode(Ids{piece_id("a"), byte_token(0xC3), byte_token(0xA9), piece_id("b")}),
            "a\xC3\xA9"
            "b");
  // tokenizers decodes a run as a whole: not valid UTF-8 -> U+FFFD for each of its bytes.
  EXPECT_EQ(tok.decode(Ids{byte_token(0xF0), byte_token(0x9F), byte_token(0x98)}),
            kFffd + kFffd + kFffd);
  EXPECT_EQ(tok.decode(Ids{byte_token(0xC3), byte_token(0xA9), byte_token(0xFF)}),
            kFffd + kFffd + kFffd);
  // A token that is not a byte ends the run.
  EXPECT_EQ(tok.decode(Ids{byte_token(0xC3), piece_id("a"), byte_token(0xA9)}),
            kFffd + "a" + kFffd);
}

TEST(SentencePieceDecoder, MetaspaceDecoderDropsTheFirstTokensReplacement) {
  json config = sp_metaspace_fixture("always", true);
  config["decoder"] = metaspace("always", true);
  Tokenizer always = sp_load(config);
  EXPECT_EQ(always.decode(Ids{piece_id("▁hi"), piece_id("▁a")}), "hi a");
  // tokenizers drops every "▁" of the first token, not just one.
  EXPECT_EQ(always.decode(Ids{piece_id("▁▁"), piece_id("▁a")}), " a");
  // Without ByteFallback in the chain a byte token stays as it is spelled.
  EXPECT_EQ(always.decode(Ids{piece_id("a"), byte_token(0x41)}), "a<0x41>");
  config["decoder"] = metaspace("never", true);
  EXPECT_EQ(sp_load(config).decode(Ids{piece_id("▁hi"), piece_id("▁a")}), " hi a");
}

TEST(SentencePieceDecoder, StripAndReplaceAndNoDecoder) {
  json config = sp_fixture();
  config["decoder"] = {
      {"type", "Sequence"},
      {"decoders",
       json::array({{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", " "}, {"start", 0}, {"stop", 2}}})}};
  Tokenizer tail = sp_load(config);
  EXPECT_EQ(tail.decode(Ids{piece_id("▁a"), piece_id("▁"), piece_id("▁"), piece_id("▁")}), " a ");
  EXPECT_EQ(streamed(tail, Ids{piece_id("▁a"), piece_id("▁"), piece_id("▁"), piece_id("▁")}),
            " a ");
  EXPECT_EQ(tail.decode(Ids{piece_id("▁a"), piece_id("▁"), piece_id("b")}), " a b");
  // Strip before Fuse works on each token.
  config["decoder"]["decoders"] =
      json::array({{{"type", "Strip"}, {"content", "▁"}, {"start", 1}, {"stop", 0}}});
  EXPECT_EQ(sp_load(config).decode(Ids{piece_id("▁a"), piece_id("▁▁"), piece_id("b")}), "a▁b");
  // No decoder: tokenizers joins the token strings with spaces.
  config["decoder"] = nullptr;
  Tokenizer joined = sp_load(config);
  EXPECT_EQ(joined.decode(Ids{piece_id("▁a"), byte_token(0x41), kEos}), "▁a <0x41> </s>");
  EXPECT_EQ(streamed(joined, Ids{piece_id("▁a"), byte_token(0x41), kEos}), "▁a <0x41> </s>");
}

// Random id sequences over the whole fixture vocabulary (valid and invalid
// byte runs, "▁" tokens, added tokens): streaming equals decode.
TEST(SentencePieceDecoder, StreamingGivesTheTextOfTheWholeSequence) {
  std::vector<json> decoders = {legacy_decoder(), metaspace("always", true),
                                metaspace("never", true), nullptr};
  decoders.push_back(
      {{"type", "Sequence"},
       {"decoders",
        json::array({{{"type", "ByteFallback"}},
                     {{"type", "Metaspace"}, {"replacement", "▁"}},
                     {{"type", "Fuse"}},
                     {{"type", "Strip"}, {"content", " "}, {"start", 2}, {"stop", 1}}})}});
  std::mt19937 rng(11);
  for (const json& decoder : decoders) {
    json config = sp_fixture();
    config["decoder"] = decoder;
    Tokenizer tok = sp_load(config);
    const std::vector<int32_t> favourites = {piece_id("▁"),    piece_id("▁▁"),   piece_id("▁a"),
                                             piece_id("a"),    byte_token(0xC3), byte_token(0xA9),
                                             byte_token(0xF0), byte_token(0x9F), byte_token(0x98),
                                             byte_token(0x80), byte_token(' '),  kBos};
    for (int trial = 0; trial < 300; ++trial) {
      Ids ids(rng() % 12);
      for (int32_t& id : ids)
        id = rng() % 3 ? favourites[rng() % favourites.size()]
                       : static_cast<int32_t>(rng() % tok.vocab_size());
      const std::string whole = tok.decode(ids);
      EXPECT_EQ(streamed(tok, ids), whole)
          << decoder.dump() << " " << ::testing::PrintToString(ids);
    }
  }
  // Text arrives as soon as it is certain; a byte run waits for its end.
  Tokenizer tok = sp_load(sp_fixture());
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.push(piece_id("▁hi")), "hi");  // the leading space dropped once
  EXPECT_EQ(stream.push(piece_id("▁a")), " a");
  EXPECT_EQ(stream.push(byte_token(0xC3)), "");
  EXPECT_EQ(stream.pending_bytes(), 1u);
  EXPECT_EQ(stream.push(byte_token(0xA9)), "");
  EXPECT_EQ(stream.push(piece_id("b")),
            "\xC3\xA9"
            "b");
  EXPECT_EQ(stream.push(byte_token(0xF0)), "");
  EXPECT_EQ(stream.flush(), kFffd);
}

TEST(SentencePieceTokenizer, MalformedComponentsAreClearErrors) {
  auto with = [](const char* field, json value) {
    json c = sp_fixture();
    c[field] = std::move(value);
    return sp_error_of(c);
  };
  EXPECT_NE(with("normalizer", {{"type", "Prepend"}}).find("Prepend needs a string \"prepend\""),
            std::string::npos);
  EXPECT_NE(with("normalizer", {{"type", "Replace"}, {"pattern", "x"}, {"content", "y"}})
                .find("Replace pattern"),
            std::string::npos);
  EXPECT_NE(with("normalizer", {{"type", "Lowercase"}}).find("\"Lowercase\""), std::string::npos);
  EXPECT_NE(with("pre_tokenizer", {{"type", "Metaspace"}, {"prepend_scheme", "sometimes"}})
                .find("\"sometimes\""),
            std::string::npos);
  EXPECT_NE(
      with("pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "ab"}}).find("one character"),
      std::string::npos);
  EXPECT_NE(with("decoder", {{"type", "WordPiece"}}).find("\"WordPiece\""), std::string::npos);
  EXPECT_NE(with("decoder", {{"type", "ByteLevel"}}).find("\"ByteLevel\""), std::string::npos);
  EXPECT_NE(
      with("decoder", {{"type", "Strip"}, {"content", "ab"}, {"start", 1}}).find("one character"),
      std::string::npos);
  EXPECT_NE(
      with("decoder", {{"type", "Strip"}, {"content", " "}, {"start", -1}}).find("must be a count"),
      std::string::npos);
  const json after_fuse = {
      {"type", "Sequence"},
      {"decoders", json::array({{{"type", "Fuse"}}, {{"type", "ByteFallback"}}})}};
  EXPECT_NE(with("decoder", after_fuse).find("ByteFallback after Fuse"), std::string::npos);
  json bad_model = sp_fixture();
  bad_model["model"]["byte_fallback"] = "yes";
  EXPECT_NE(sp_error_of(bad_model).find("byte_fallback must be true or false"), std::string::npos);
  // Byte fallback belongs to character BPE; beside a ByteLevel pre-tokenizer it is refused.
  json byte_level = sp_fixture();
  byte_level["normalizer"] = nullptr;
  byte_level["pre_tokenizer"] = {{"type", "ByteLevel"}};
  byte_level["decoder"] = {{"type", "ByteLevel"}};
  EXPECT_NE(sp_error_of(byte_level).find("byte_fallback with a ByteLevel pre_tokenizer"),
            std::string::npos)
      << sp_error_of(byte_level);
}

TEST(SyntheticMistralTokenizer, HasTheLegacyMixtralLayout) {
  SyntheticTokenizerOptions options;
  options.specials = SyntheticSpecials::Mistral;
  SyntheticTokenizer synthetic = build_synthetic_tokenizer(options);
  EXPECT_EQ(synthetic.tokenizer_json,
            build_synthetic_tokenizer(options).tokenizer_json);  // deterministic
  EXPECT_GE(synthetic.vocab_size, 1000);
  EXPECT_LE(synthetic.vocab_size, 2000);
  EXPECT_EQ(synthetic.eos_id, 2);
  EXPECT_EQ(synthetic.pad_id, -1);
  Tokenizer tok = Tokenizer::from_json_text(synthetic.tokenizer_json);
  EXPECT_EQ(tok.vocab_size(), synthetic.vocab_size);
  EXPECT_EQ(tok.token_id("<unk>"), 0);
  EXPECT_EQ(tok.token_id("<s>"), 1);
  EXPECT_EQ(tok.token_id("</s>"), 2);
  EXPECT_EQ(tok.token_string(3), "<0x00>");
  EXPECT_EQ(tok.token_string(258), "<0xFF>");
  EXPECT_GE(tok.token_id("▁the"), 259);
  for (int32_t id : {0, 1, 2}) EXPECT_TRUE(tok.is_special(id));
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_TRUE(tok.post_processor_adds_bos());

  json file = json::parse(synthetic.tokenizer_json);
  EXPECT_EQ(file["normalizer"], legacy_normalizer());
  EXPECT_TRUE(file["pre_tokenizer"].is_null());
  EXPECT_EQ(file["decoder"], legacy_decoder());
  EXPECT_EQ(file["model"]["byte_fallback"], true);
  EXPECT_EQ(file["model"]["fuse_unk"], true);
  EXPECT_EQ(file["model"]["unk_token"], "<unk>");
  EXPECT_TRUE(file["model"]["merges"][0].is_string());

  json config = json::parse(synthetic.tokenizer_config_json);
  EXPECT_EQ(config["add_bos_token"], true);
  EXPECT_EQ(config["add_eos_token"], false);
  EXPECT_EQ(config["bos_token"], "<s>");
  EXPECT_EQ(config["eos_token"], "</s>");
  EXPECT_EQ(config["unk_token"], "<unk>");
  EXPECT_TRUE(config["pad_token"].is_null());
  EXPECT_EQ(config["legacy"], true);
  EXPECT_EQ(config["tokenizer_class"], "LlamaTokenizer");
  EXPECT_EQ(config["chat_template"], std::string(kMixtralChatTemplate));
  EXPECT_EQ(config["added_tokens_decoder"].size(), 3u);
  EXPECT_EQ(config["model_max_length"], options.model_max_length);
}

TEST(SyntheticMistralTokenizer, RoundTripsTheCorpusAndArbitraryText) {
  SyntheticTokenizerOptions options;
  options.specials = SyntheticSpecials::Mistral;
  Tokenizer tok = Tokenizer::from_json_text(build_synthetic_tokenizer(options).tokenizer_json);
  std::vector<std::string> texts = {
      std::string(kSyntheticTokenizerCorpus),
      "The quick brown fox jumps over the lazy dog.",
      "   spaces\n\n\nnewlines\r\n\ttabs  ",
      "emoji \xF0\x9F\x98\x80 \xF0\x9F\xA6\x99 CJK \xE4\xBD\xA0\xE5\xA5\xBD \xE9\xBE\x98 control "
      "\x01\x7F",
      std::string("nul\0byte", 8),
      " ",
      "",
  };
  std::mt19937 rng(3);
  for (int i = 0; i < 50; ++i) {  // random code points, every plane
    std::string text;
    for (int k = 0; k < 20; ++k) {
      char32_t cp = rng() % 4 ? 0x20 + rng() % 0x60 : rng() % 0x110000;
      if (cp >= 0xD800 && cp < 0xE000) cp = 'x';
      if (cp == 0x2581) cp = 'y';  // "▁" itself decodes as a space
      utf8_append(text, cp);
    }
    texts.push_back(text);
  }
  for (const std::string& text : texts) {
    Ids ids = tok.encode(text);
    EXPECT_EQ(tok.decode(ids), text);
    EXPECT_EQ(streamed(tok, ids), text);
  }
  // Merges were learned: common English takes far fewer tokens than bytes.
  EXPECT_LT(tok.encode(texts[1]).size(), texts[1].size() * 6 / 10);
  EncodeOptions with_bos;
  with_bos.add_bos = true;
  EXPECT_EQ(tok.encode("[INST] hi [/INST]", with_bos).front(), 1);
  EXPECT_EQ(tok.decode(tok.encode("<s>[INST] hi [/INST]")), "<s> [INST] hi [/INST]");
}

}  // namespace
}  // namespace tern
