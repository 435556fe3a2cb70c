#include "tern/tokenizer/synthetic.h"

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tern/tokenizer/bpe_trainer.h"
#include "tern/tokenizer/pre_tokenizer.h"
#include "tern/tokenizer/qwen3_chat_template.h"
#include "tern/tokenizer/synthetic_corpus.h"

namespace tern {

namespace {
using ordered_json = nlohmann::ordered_json;

// Qwen2/Qwen3's pre-tokenizer split pattern.
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// o200k_harmony's pre-tokenizer split pattern (gpt-oss tokenizer.json).
constexpr std::string_view kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct QwenAddedToken {
  std::string_view content;
  bool special;
};
// Qwen3's added tokens in id order, with its special flags.
constexpr QwenAddedToken kQwen3AddedTokens[] = {
    {"<|endoftext|>", true},      {"<|im_start|>", true},
    {"<|im_end|>", true},         {"<|object_ref_start|>", true},
    {"<|object_ref_end|>", true}, {"<|box_start|>", true},
    {"<|box_end|>", true},        {"<|quad_start|>", true},
    {"<|quad_end|>", true},       {"<|vision_start|>", true},
    {"<|vision_end|>", true},     {"<|vision_pad|>", true},
    {"<|image_pad|>", true},      {"<|video_pad|>", true},
    {"<tool_call>", false},       {"</tool_call>", false},
    {"<|fim_prefix|>", false},    {"<|fim_middle|>", false},
    {"<|fim_suffix|>", false},    {"<|fim_pad|>", false},
    {"<|repo_name|>", false},     {"<|file_sep|>", false},
    {"<tool_response>", false},   {"</tool_response>", false},
    {"<think>", false},           {"</think>", false},
};

ordered_json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", false},
          {"use_regex", use_regex}};
}

// o200k_harmony's added tokens, ids 199998..200018 in the real tokenizer.
std::vector<std::string> harmony_added_tokens() {
  std::vector<std::string> t;
  const std::pair<int, std::string_view> named[] = {
      {199998, "<|startoftext|>"}, {199999, "<|endoftext|>"}, {200002, "<|return|>"}, {200003, "<|constrain|>"},
      {200005, "<|channel|>"},     {200006, "<|start|>"},     {200007, "<|end|>"},    {200008, "<|message|>"},
      {200012, "<|call|>"},        {200018, "<|endofprompt|>"}};
  for (int id = 199998; id <= 200018; ++id) {
    std::string content = "<|reserved_" + std::to_string(id) + "|>";
    for (const auto& [nid, name] : named)
      if (nid == id) content = name;
    t.push_back(std::move(content));
  }
  return t;
}

ordered_json pre_tokenizer_config(std::string_view pattern) {
  ordered_json split = {{"type", "Split"},
                        {"pattern", {{"Regex", pattern}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
  return {{"type", "Sequence"}, {"pretokenizers", ordered_json::array({split, byte_level(false)})}};
}

ordered_json added_token_fields(const QwenAddedToken& t) {
  return {{"content", t.content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},      {"normalized", false},  {"special", t.special}};
}
}  // namespace

SyntheticTokenizer build_synthetic_tokenizer(const SyntheticTokenizerOptions& options) {
  const bool harmony = options.specials == SyntheticSpecials::Harmony;
  const ordered_json pre = pre_tokenizer_config(harmony ? kO200kPattern : kQwen2Pattern);
  BpeVocabulary bpe =
      train_byte_level_bpe(kSyntheticTokenizerCorpus, PreTokenizer::from_json(pre), options.merges);
  const auto first_added = static_cast<int32_t>(bpe.tokens.size());

  std::vector<QwenAddedToken> added_tokens;
  std::vector<std::string> harmony_names;
  if (harmony) {
    harmony_names = harmony_added_tokens();
    for (const std::string& name : harmony_names) added_tokens.push_back({name, true});
  } else {
    added_tokens.assign(std::begin(kQwen3AddedTokens), std::end(kQwen3AddedTokens));
  }
  ordered_json added = ordered_json::array();
  ordered_json added_decoder = ordered_json::object();
  ordered_json additional_special = ordered_json::array();
  int32_t id = first_added;
  SyntheticTokenizer out;
  for (const QwenAddedToken& t : added_tokens) {
    ordered_json entry = {{"id", id}};
    entry.update(added_token_fields(t));
    added.push_back(entry);
    // tokenizer_config.json lists the same fields keyed by id, sorted by name.
    ordered_json fields = {{"content", t.content}, {"lstrip", false},      {"normalized", false},
                           {"rstrip", false},      {"single_word", false}, {"special", t.special}};
    added_decoder[std::to_string(id)] = fields;
    if (!harmony && t.special && t.content != "<|endoftext|>") additional_special.push_back(t.content);
    if (t.content == "<|endoftext|>") out.pad_id = id;
    if (t.content == (harmony ? "<|return|>" : "<|im_end|>")) out.eos_id = id;
    ++id;
  }

  ordered_json vocab = ordered_json::object();
  for (size_t i = 0; i < bpe.tokens.size(); ++i) vocab[bpe.tokens[i]] = i;
  ordered_json merges = ordered_json::array();
  for (const auto& [a, b] : bpe.merges) merges.push_back(ordered_json::array({a, b}));

  ordered_json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", harmony ? ordered_json(nullptr) : ordered_json{{"type", "NFC"}}},
      {"pre_tokenizer", pre},
      {"post_processor", byte_level(false)},
      {"decoder", byte_level(false)},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merges}}},
  };
  ordered_json config;
  if (harmony) {
    config = {
        {"added_tokens_decoder", added_decoder},
        {"bos_token", "<|startoftext|>"},
        {"clean_up_tokenization_spaces", false},
        {"eos_token", "<|return|>"},
        {"extra_special_tokens", ordered_json::object()},
        {"model_input_names", {"input_ids", "attention_mask"}},
        {"model_max_length", options.model_max_length},
        {"pad_token", "<|endoftext|>"},
        {"tokenizer_class", "PreTrainedTokenizerFast"},
    };
  } else {
    config = {
        {"add_bos_token", false},
        {"add_prefix_space", false},
        {"added_tokens_decoder", added_decoder},
        {"additional_special_tokens", additional_special},
        {"bos_token", nullptr},
        {"chat_template", kQwen3ChatTemplate},
        {"clean_up_tokenization_spaces", false},
        {"eos_token", "<|im_end|>"},
        {"errors", "replace"},
        {"model_max_length", options.model_max_length},
        {"pad_token", "<|endoftext|>"},
        {"split_special_tokens", false},
        {"tokenizer_class", "Qwen2Tokenizer"},
        {"unk_token", nullptr},
    };
  }

  out.tokenizer_json = tokenizer.dump(2) + "\n";
  out.tokenizer_config_json = config.dump(2) + "\n";
  out.vocab_size = id;
  return out;
}

}  // namespace tern
