#include "tern/tokenizer/synthetic.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/core/error.h"
#include "tern/tokenizer/bpe_trainer.h"
#include "tern/tokenizer/deepseek_v3_chat_template.h"
#include "tern/tokenizer/glm45_chat_template.h"
#include "tern/tokenizer/mixtral_chat_template.h"
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

// Qwen1.5/Qwen2's added tokens.
constexpr QwenAddedToken kQwen2AddedTokens[] = {
    {"<|endoftext|>", true}, {"<|im_start|>", true}, {"<|im_end|>", true}};
// OLMoE's (GPT-NeoX-20B style) end-of-text and padding tokens.
constexpr QwenAddedToken kOlmoeAddedTokens[] = {{"<|endoftext|>", true}, {"<|padding|>", true}};

// Qwen1.5/Qwen2's chat template (ChatML with a default system prompt).
constexpr std::string_view kQwen2ChatTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
// The Tulu template of OLMoE-1B-7B-0924-Instruct, as its model card renders it.
constexpr std::string_view kTuluChatTemplate =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{ '<|system|>\n' + message['content'] + '\n' }}{% elif message['role'] == 'user' %}"
    "{{ '<|user|>\n' + message['content'] + '\n' }}{% elif message['role'] == 'assistant' %}"
    "{{ '<|assistant|>\n' + message['content'] + eos_token + '\n' }}{% endif %}"
    "{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}{% endfor %}";

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
// The vocabulary of a SentencePiece-style BPE file (Mistral's, Gemma's):
// the added tokens at ids 0.., then <0x00>..<0xFF>, then the tokens learned
// from the corpus in the "▁" alphabet; merges as "a b" strings or [a, b].
struct SpmVocabulary {
  ordered_json vocab = ordered_json::object();
  ordered_json added = ordered_json::array();
  ordered_json added_decoder = ordered_json::object();  // tokenizer_config.json's added_tokens_decoder
  ordered_json merges = ordered_json::array();
  int32_t size = 0;
};

SpmVocabulary spm_vocabulary(const SyntheticTokenizerOptions& options, std::span<const QwenAddedToken> added_first,
                             bool merges_as_pairs, std::string_view who) {
  BpeVocabulary bpe = train_metaspace_bpe(kSyntheticTokenizerCorpus, options.merges);
  SpmVocabulary v;
  int32_t& id = v.size;
  for (const QwenAddedToken& t : added_first) {
    v.vocab[std::string(t.content)] = id;
    ordered_json entry = {{"id", id}};
    entry.update(added_token_fields(t));
    v.added.push_back(entry);
    v.added_decoder[std::to_string(id)] = {{"content", t.content}, {"lstrip", false},      {"normalized", false},
                                           {"rstrip", false},      {"single_word", false}, {"special", t.special}};
    ++id;
  }
  for (int b = 0; b < 256; ++b) v.vocab[fmt::format("<0x{:02X}>", b)] = id++;
  for (const std::string& token : bpe.tokens) {
    if (v.vocab.contains(token)) fail("synthetic {} tokenizer: learned token \"{}\" is already in the vocab", who, token);
    v.vocab[token] = id++;
  }
  for (const auto& [a, b] : bpe.merges)
    v.merges.push_back(merges_as_pairs ? ordered_json::array({a, b}) : ordered_json(a + " " + b));
  return v;
}

// A SentencePiece-style file's BPE model (unk <unk>, fuse_unk, byte fallback).
ordered_json spm_model(SpmVocabulary& v) {
  return {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", "<unk>"},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", true},
          {"byte_fallback", true},
          {"vocab", std::move(v.vocab)},
          {"merges", std::move(v.merges)}};
}

// The decoder steps both files start with: "▁" -> " ", bytes, fused.
ordered_json spm_decoders() {
  return ordered_json::array({{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                              {{"type", "ByteFallback"}},
                              {{"type", "Fuse"}}});
}

// Mistral-7B/Mixtral-8x7B's tokenizer.json layout (legacy SentencePiece BPE).
SyntheticTokenizer build_mistral_tokenizer(const SyntheticTokenizerOptions& options) {
  constexpr QwenAddedToken specials[] = {{"<unk>", true}, {"<s>", true}, {"</s>", true}};
  SpmVocabulary v = spm_vocabulary(options, specials, /*merges_as_pairs=*/false, "Mistral");
  const int32_t id = v.size;
  ordered_json added = v.added;
  ordered_json added_decoder = v.added_decoder;
  ordered_json decoders = spm_decoders();
  decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});

  const ordered_json bos_template = {{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}};
  auto sequence = [](const char* name, int type_id) {
    return ordered_json{{"Sequence", {{"id", name}, {"type_id", type_id}}}};
  };
  ordered_json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers", ordered_json::array({{{"type", "Prepend"}, {"prepend", "\u2581"}},
                                             {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}})}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", ordered_json::array({bos_template, sequence("A", 0)})},
        {"pair", ordered_json::array({bos_template, sequence("A", 0),
                                      {{"SpecialToken", {{"id", "<s>"}, {"type_id", 1}}}}, sequence("B", 1)})},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder", {{"type", "Sequence"}, {"decoders", decoders}}},
      {"model", spm_model(v)},
  };
  ordered_json config = {
      {"add_bos_token", true},
      {"add_eos_token", false},
      {"added_tokens_decoder", added_decoder},
      {"additional_special_tokens", ordered_json::array()},
      {"bos_token", "<s>"},
      {"chat_template", kMixtralChatTemplate},
      {"clean_up_tokenization_spaces", false},
      {"eos_token", "</s>"},
      {"legacy", true},
      {"model_max_length", options.model_max_length},
      {"pad_token", nullptr},
      {"sp_model_kwargs", ordered_json::object()},
      {"spaces_between_special_tokens", false},
      {"tokenizer_class", "LlamaTokenizer"},
      {"unk_token", "<unk>"},
      {"use_default_system_prompt", false},
  };
  SyntheticTokenizer out;
  out.tokenizer_json = tokenizer.dump(2) + "\n";
  out.tokenizer_config_json = config.dump(2) + "\n";
  out.vocab_size = id;
  out.eos_id = 2;   // </s>
  out.pad_id = -1;  // Mixtral has no pad token (pad_token null)
  return out;
}

// DeepSeek-V3's three Split patterns, in the order of its pre-tokenizer
// Sequence: digit runs, CJK ideograph / hiragana / katakana runs, words.
constexpr std::string_view kDeepseekV3Patterns[] = {
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};
// Its sentence tokens, ids 0..2 (special, not normalized).
constexpr std::string_view kDeepseekV3SentenceTokens[] = {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
                                                          "<｜▁pad▁｜>"};
// Its tokens after the placeholders (ids 128800..128814), normalized; only <|EOT|> special.
constexpr QwenAddedToken kDeepseekV3ChatTokens[] = {
    {"<｜fim▁hole｜>", false},         {"<｜fim▁begin｜>", false},         {"<｜fim▁end｜>", false},
    {"<｜User｜>", false},             {"<｜Assistant｜>", false},         {"<|EOT|>", true},
    {"<｜tool▁calls▁begin｜>", false}, {"<｜tool▁calls▁end｜>", false},   {"<｜tool▁call▁begin｜>", false},
    {"<｜tool▁call▁end｜>", false},    {"<｜tool▁outputs▁begin｜>", false}, {"<｜tool▁outputs▁end｜>", false},
    {"<｜tool▁output▁begin｜>", false}, {"<｜tool▁output▁end｜>", false},  {"<｜tool▁sep｜>", false},
};

// tokenizer_config.json's form of a token: {"__type": "AddedToken", ...}.
ordered_json legacy_added_token(std::string_view content) {
  return {{"__type", "AddedToken"}, {"content", content}, {"lstrip", false},
          {"normalized", true},     {"rstrip", false},    {"single_word", false}};
}

// DeepSeek-V3's tokenizer.json layout.
SyntheticTokenizer build_deepseek_v3_tokenizer(const SyntheticTokenizerOptions& options) {
  ordered_json splits = ordered_json::array();
  for (std::string_view pattern : kDeepseekV3Patterns)
    splits.push_back(
        {{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}});
  ordered_json level = byte_level(false);
  level["trim_offsets"] = true;
  splits.push_back(level);
  const ordered_json pre = {{"type", "Sequence"}, {"pretokenizers", splits}};
  BpeVocabulary bpe = train_byte_level_bpe(kSyntheticTokenizerCorpus, PreTokenizer::from_json(pre), options.merges);

  ordered_json vocab = ordered_json::object();
  ordered_json added = ordered_json::array();
  int32_t id = 0;
  auto add = [&](const QwenAddedToken& t, bool normalized) {
    ordered_json entry = {{"id", id}};
    entry.update(added_token_fields(t));
    entry["normalized"] = normalized;
    added.push_back(entry);
  };
  for (std::string_view sentence : kDeepseekV3SentenceTokens) {
    vocab[std::string(sentence)] = id;
    add({sentence, true}, false);
    ++id;
  }
  for (const std::string& token : bpe.tokens) {
    if (vocab.contains(token)) fail("synthetic DeepSeek-V3 tokenizer: learned token \"{}\" is already in the vocab", token);
    vocab[token] = id++;
  }
  for (const QwenAddedToken& t : kDeepseekV3ChatTokens) {
    add(t, true);
    ++id;
  }
  ordered_json merges = ordered_json::array();
  for (const auto& [a, b] : bpe.merges) merges.push_back(a + " " + b);

  ordered_json prefix_level = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false},
                               {"use_regex", true}};
  ordered_json decoder = prefix_level;
  decoder["trim_offsets"] = true;
  ordered_json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", ordered_json::array()}}},
      {"pre_tokenizer", pre},
      {"post_processor", prefix_level},
      {"decoder", decoder},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", merges}}},
  };
  // The real file's fields in its order (no added_tokens_decoder).
  ordered_json config = {
      {"add_bos_token", true},
      {"add_eos_token", false},
      {"bos_token", legacy_added_token(kDeepseekV3SentenceTokens[0])},
      {"clean_up_tokenization_spaces", false},
      {"eos_token", legacy_added_token(kDeepseekV3SentenceTokens[1])},
      {"legacy", true},
      {"model_max_length", options.model_max_length},
      {"pad_token", legacy_added_token(kDeepseekV3SentenceTokens[1])},
      {"sp_model_kwargs", ordered_json::object()},
      {"unk_token", nullptr},
      {"tokenizer_class", "LlamaTokenizerFast"},
      {"chat_template", kDeepseekV3ChatTemplate},
  };
  SyntheticTokenizer out;
  out.tokenizer_json = tokenizer.dump(2) + "\n";
  out.tokenizer_config_json = config.dump(2) + "\n";
  out.vocab_size = id;
  out.eos_id = 1;  // <｜end▁of▁sentence｜>
  out.pad_id = 1;  // pad_token is the eos
  return out;
}

// GLM-4.5's tokenizer.json layout. No copy of the real file is reachable
// offline; its structure is taken from (code index, read 2026-12):
//  - the GLM-4 split regex: THUDM's glm-4-9b-chat tokenization_chatglm.py
//    (pat_str) and a third-party validator pinned to zai-org/GLM-4.7-Flash's
//    tokenizer.json (same GLM-4 tokenizer family, larger vocabulary), which
//    also gives the pre-tokenizer Sequence, normalizer null, the ByteLevel
//    post-processor/decoder settings, BPE with ignore_merges true and
//    continuing_subword_prefix/end_of_word_suffix null, merges as pairs,
//    added tokens all normalized false with only the first 18 special, and
//    the tokenizer_config.json fields (PreTrainedTokenizer, eos = pad =
//    <|endoftext|>, padding_side left, additional_special_tokens = the 18);
//  - the added tokens' order and GLM-4.5's ids: glm-4-9b-chat's
//    special_tokens (<|endoftext|> 151329 .. <|end_of_video|> 151342),
//    llama.cpp's GGUF metadata of GLM-4.5-Air / GLM-4.5 (bos [gMASK] 151331,
//    eos/pad <|endoftext|> 151329, eot <|user|> 151336, eom <|observation|>
//    151338, FIM <|code_prefix|> 151347, <|code_middle|> 151348,
//    <|code_suffix|> 151349, 151552 rows in the embedding), GLM-4.5V's config
//    (<|image|> 151363, <|video|> 151364) and the GLM-4.7-Flash list for the
//    rest, the same order from 154820 there.
// Not verified: that GLM-4.5's own file matches GLM-4.7-Flash's in every
// field above (post-processor, decoder, ignore_merges, config field set), and
// model_max_length (128000 in GLM-4.7-Flash's; options.model_max_length here).
constexpr std::string_view kGlm4Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Its added tokens in id order; the first 18 are special.
constexpr std::string_view kGlm45AddedTokens[] = {
    "<|endoftext|>",   "[MASK]",          "[gMASK]",          "[sMASK]",
    "<sop>",           "<eop>",           "<|system|>",       "<|user|>",
    "<|assistant|>",   "<|observation|>", "<|begin_of_image|>", "<|end_of_image|>",
    "<|begin_of_video|>", "<|end_of_video|>", "<|begin_of_audio|>", "<|end_of_audio|>",
    "<|begin_of_transcription|>", "<|end_of_transcription|>", "<|code_prefix|>", "<|code_middle|>",
    "<|code_suffix|>", "<think>",         "</think>",         "<tool_call>",
    "</tool_call>",    "<tool_response>", "</tool_response>", "<arg_key>",
    "</arg_key>",      "<arg_value>",     "</arg_value>",     "/nothink",
    "<|begin_of_box|>", "<|end_of_box|>", "<|image|>",        "<|video|>",
};
constexpr size_t kGlm45SpecialCount = 18;

SyntheticTokenizer build_glm45_tokenizer(const SyntheticTokenizerOptions& options) {
  ordered_json level = byte_level(false);
  level["trim_offsets"] = true;
  const ordered_json pre = {
      {"type", "Sequence"},
      {"pretokenizers",
       ordered_json::array({{{"type", "Split"},
                             {"pattern", {{"Regex", kGlm4Pattern}}},
                             {"behavior", "Isolated"},
                             {"invert", false}},
                            level})}};
  BpeVocabulary bpe = train_byte_level_bpe(kSyntheticTokenizerCorpus, PreTokenizer::from_json(pre), options.merges);

  ordered_json vocab = ordered_json::object();
  for (size_t i = 0; i < bpe.tokens.size(); ++i) vocab[bpe.tokens[i]] = i;
  ordered_json merges = ordered_json::array();
  for (const auto& [a, b] : bpe.merges) merges.push_back(ordered_json::array({a, b}));

  SyntheticTokenizer out;
  ordered_json added = ordered_json::array();
  ordered_json added_decoder = ordered_json::object();
  ordered_json additional_special = ordered_json::array();
  auto id = static_cast<int32_t>(bpe.tokens.size());
  for (size_t k = 0; k < std::size(kGlm45AddedTokens); ++k) {
    const QwenAddedToken t{kGlm45AddedTokens[k], k < kGlm45SpecialCount};
    ordered_json entry = {{"id", id}};
    entry.update(added_token_fields(t));
    added.push_back(entry);
    added_decoder[std::to_string(id)] = {{"content", t.content}, {"lstrip", false},      {"normalized", false},
                                         {"rstrip", false},      {"single_word", false}, {"special", t.special}};
    if (t.special) additional_special.push_back(t.content);
    if (t.content == "<|endoftext|>") out.eos_id = out.pad_id = id;
    ++id;
  }
  ordered_json prefix_level = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false},
                               {"use_regex", true}};
  ordered_json decoder = prefix_level;
  decoder["trim_offsets"] = true;
  ordered_json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", pre},
      {"post_processor", prefix_level},
      {"decoder", decoder},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", true},
        {"vocab", vocab},
        {"merges", merges}}},
  };
  // GLM-4.5's fields (sorted, as transformers writes them); the chat template
  // is in the file, as in GLM-4.5's first release (later revisions moved it
  // to chat_template.jinja).
  ordered_json config = {
      {"added_tokens_decoder", added_decoder},
      {"additional_special_tokens", additional_special},
      {"chat_template", kGlm45ChatTemplate},
      {"clean_up_tokenization_spaces", false},
      {"do_lower_case", false},
      {"eos_token", "<|endoftext|>"},
      {"extra_special_tokens", ordered_json::object()},
      {"model_max_length", options.model_max_length},
      {"pad_token", "<|endoftext|>"},
      {"padding_side", "left"},
      {"remove_space", false},
      {"tokenizer_class", "PreTrainedTokenizer"},
  };
  out.tokenizer_json = tokenizer.dump(2) + "\n";
  out.tokenizer_config_json = config.dump(2) + "\n";
  out.vocab_size = id;
  return out;
}
// Gemma 4's control tokens at their ids in the release's vocabulary
// (google-deepmind/gemma _Gemma4SpecialTokens, transformers'
// convert_gemma4_weights.py; docs/gemma4_facts.md); the ids between are
// <unusedN> placeholders here.
constexpr std::pair<int32_t, QwenAddedToken> kGemma4ControlTokens[] = {
    {0, {"<pad>", true}},       {1, {"<eos>", true}},           {2, {"<bos>", true}},
    {3, {"<unk>", true}},       {4, {"<mask>", false}},         {46, {"<|tool>", true}},
    {47, {"<tool|>", true}},    {48, {"<|tool_call>", true}},   {49, {"<tool_call|>", true}},
    {50, {"<|tool_response>", true}}, {51, {"<tool_response|>", true}}, {52, {"<|\"|>", true}},
    {98, {"<|think|>", true}},  {100, {"<|channel>", true}},    {101, {"<channel|>", true}},
    {105, {"<|turn>", true}},   {106, {"<turn|>", true}},       {107, {"\n", false}},
    {108, {"\n\n", false}},
};

// A chat template with the release's turn structure (the large models':
// 26B-A4B, 31B), without tools: written from Google's Gemma 4 prompt format
// (docs/gemma4_facts.md), not a copy of the released file. Tern renders
// Gemma 4 itself (runtime/gemma_chat.h); the text only has to carry the
// markers make_chat_format() looks for.
constexpr std::string_view kGemma4ChatTemplate =
    "{{- bos_token -}}"
    "{%- set enable_thinking = enable_thinking | default(false) -%}"
    "{%- set loop_messages = messages -%}"
    "{%- if enable_thinking or (messages and messages[0]['role'] in ['system', 'developer']) -%}"
    "{{- '<|turn>system\\n' -}}{%- if enable_thinking -%}{{- '<|think|>\\n' -}}{%- endif -%}"
    "{%- if messages and messages[0]['role'] in ['system', 'developer'] -%}"
    "{{- messages[0]['content'] | trim -}}{%- set loop_messages = messages[1:] -%}{%- endif -%}"
    "{{- '<turn|>\\n' -}}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{- '<|turn>' + role + '\\n' + (message['content'] | trim) + '<turn|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|turn>model\\n' -}}"
    "{%- if not enable_thinking -%}{{- '<|channel>thought\\n<channel|>' -}}{%- endif -%}{%- endif -%}";

// Gemma's tokenizer.json layout (Gemma 3's file, which Gemma 4's follows):
// normalizer Replace " " -> "▁" (no prefix), pre-tokenizer Split on " "
// (MergedWithPrevious), BPE with byte fallback and merges as pairs, decoder
// Replace "▁" -> " ", ByteFallback, Fuse (no Strip). Ids: Gemma 4's control
// tokens (kGemma4ControlTokens) up to 108, <0x00>..<0xFF>, then the learned
// tokens. No bos from the post-processor: Gemma 4's tokenizer has
// add_bos_token false, its chat template writes <bos>.
SyntheticTokenizer build_gemma4_tokenizer(const SyntheticTokenizerOptions& options) {
  std::vector<std::string> unused;
  std::vector<QwenAddedToken> first;
  const int32_t last = kGemma4ControlTokens[std::size(kGemma4ControlTokens) - 1].first;
  unused.reserve(static_cast<size_t>(last) + 1);
  for (int32_t id = 0, k = 0; id <= last; ++id) {
    const auto* named = std::find_if(std::begin(kGemma4ControlTokens), std::end(kGemma4ControlTokens),
                                     [&](const auto& t) { return t.first == id; });
    if (named != std::end(kGemma4ControlTokens)) {
      first.push_back(named->second);
    } else {
      unused.push_back(fmt::format("<unused{}>", k++));
      first.push_back({unused.back(), false});
    }
  }
  SpmVocabulary v = spm_vocabulary(options, first, /*merges_as_pairs=*/true, "Gemma");
  const int32_t size = v.size;
  ordered_json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", v.added},
      {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}},
      {"pre_tokenizer",
       {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", ordered_json::array({{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"pair", ordered_json::array({{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                      {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
        {"special_tokens", ordered_json::object()}}},
      {"decoder", {{"type", "Sequence"}, {"decoders", spm_decoders()}}},
      {"model", spm_model(v)},
  };
  ordered_json config = {
      {"add_bos_token", false},
      {"add_eos_token", false},
      {"added_tokens_decoder", v.added_decoder},
      {"bos_token", "<bos>"},
      {"chat_template", kGemma4ChatTemplate},
      {"clean_up_tokenization_spaces", false},
      {"eos_token", "<eos>"},
      {"model_max_length", options.model_max_length},
      {"pad_token", "<pad>"},
      {"padding_side", "left"},
      {"spaces_between_special_tokens", false},
      {"tokenizer_class", "GemmaTokenizer"},
      {"unk_token", "<unk>"},
  };
  SyntheticTokenizer out;
  out.tokenizer_json = tokenizer.dump(2) + "\n";
  out.tokenizer_config_json = config.dump(2) + "\n";
  out.vocab_size = size;
  out.eos_id = 1;  // <eos>
  out.pad_id = 0;  // <pad>
  return out;
}
}  // namespace

SyntheticTokenizer build_synthetic_tokenizer(const SyntheticTokenizerOptions& options) {
  if (options.specials == SyntheticSpecials::Mistral) return build_mistral_tokenizer(options);
  if (options.specials == SyntheticSpecials::Gemma4) return build_gemma4_tokenizer(options);
  if (options.specials == SyntheticSpecials::DeepseekV3) return build_deepseek_v3_tokenizer(options);
  if (options.specials == SyntheticSpecials::Glm45) return build_glm45_tokenizer(options);
  const bool harmony = options.specials == SyntheticSpecials::Harmony;
  const bool olmoe = options.specials == SyntheticSpecials::Olmoe;
  const bool qwen2 = options.specials == SyntheticSpecials::Qwen2;
  ordered_json pre = pre_tokenizer_config(harmony ? kO200kPattern : kQwen2Pattern);
  if (olmoe) pre = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  BpeVocabulary bpe =
      train_byte_level_bpe(kSyntheticTokenizerCorpus, PreTokenizer::from_json(pre), options.merges);
  const auto first_added = static_cast<int32_t>(bpe.tokens.size());

  std::vector<QwenAddedToken> added_tokens;
  std::vector<std::string> harmony_names;
  if (harmony) {
    harmony_names = harmony_added_tokens();
    for (const std::string& name : harmony_names) added_tokens.push_back({name, true});
  } else if (olmoe) {
    added_tokens.assign(std::begin(kOlmoeAddedTokens), std::end(kOlmoeAddedTokens));
  } else if (qwen2) {
    added_tokens.assign(std::begin(kQwen2AddedTokens), std::end(kQwen2AddedTokens));
  } else {
    added_tokens.assign(std::begin(kQwen3AddedTokens), std::end(kQwen3AddedTokens));
  }
  ordered_json added = ordered_json::array();
  ordered_json added_decoder = ordered_json::object();
  ordered_json additional_special = ordered_json::array();
  int32_t id = first_added;
  SyntheticTokenizer out;
  // OLMoE's file also adds runs of 24 down to 2 spaces as non-special,
  // normalized tokens (matched before the pre-tokenizer, longest first).
  std::vector<std::string> space_runs;
  if (olmoe)
    for (int n = 24; n >= 2; --n) space_runs.emplace_back(static_cast<size_t>(n), ' ');
  for (const std::string& run : space_runs) added_tokens.push_back({run, false});
  for (const QwenAddedToken& t : added_tokens) {
    const bool normalized = olmoe && !t.special;
    ordered_json entry = {{"id", id}};
    entry.update(added_token_fields(t));
    entry["normalized"] = normalized;
    added.push_back(entry);
    // tokenizer_config.json lists the same fields keyed by id, sorted by name.
    ordered_json fields = {{"content", t.content}, {"lstrip", false},      {"normalized", normalized},
                           {"rstrip", false},      {"single_word", false}, {"special", t.special}};
    added_decoder[std::to_string(id)] = fields;
    if (!harmony && !olmoe && t.special && t.content != "<|endoftext|>") additional_special.push_back(t.content);
    if (t.content == (olmoe ? "<|padding|>" : "<|endoftext|>")) out.pad_id = id;
    if (t.content == (harmony ? "<|return|>" : olmoe ? "<|endoftext|>" : "<|im_end|>")) out.eos_id = id;
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
  if (olmoe) {
    config = {
        {"add_bos_token", false},
        {"add_eos_token", false},
        {"added_tokens_decoder", added_decoder},
        {"bos_token", "<|endoftext|>"},
        {"chat_template", kTuluChatTemplate},
        {"clean_up_tokenization_spaces", true},
        {"eos_token", "<|endoftext|>"},
        {"model_max_length", options.model_max_length},
        {"pad_token", "<|padding|>"},
        {"tokenizer_class", "GPTNeoXTokenizer"},
        {"unk_token", nullptr},
    };
  } else if (harmony) {
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
        {"chat_template", qwen2 ? kQwen2ChatTemplate : kQwen3ChatTemplate},
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
