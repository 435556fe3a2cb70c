#include "tern/tokenizer/tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tern/core/error.h"
#include "tern/core/file.h"
#include "tern/core/json.h"
#include "tern/tokenizer/byte_level.h"
#include "tern/tokenizer/utf8.h"

namespace tern {

namespace {
// A token id from JSON: an integer in [0, kMaxTokenId), else tern::Error.
int32_t token_id_value(const nlohmann::json& v, std::string_view what) {
  const bool ok = v.is_number_unsigned() ? v.get<uint64_t>() < static_cast<uint64_t>(kMaxTokenId)
                                         : v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < kMaxTokenId;
  if (!ok)
    fail("{} has an invalid id {} (ids must be integers in [0, {}))", what, json_excerpt(v), kMaxTokenId);
  return static_cast<int32_t>(v.get<uint64_t>());
}

std::string type_of(const nlohmann::json& config) {
  return config.is_object() ? config.value("type", std::string()) : std::string();
}

// A byte-level tokenizer's decoder: decode() gives the tokens' raw bytes.
void check_byte_level_decoder(const nlohmann::json& decoder) {
  if (decoder.is_null()) return;
  std::string type = type_of(decoder);
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    for (const auto& d : decoder.at("decoders")) check_byte_level_decoder(d);
    return;
  }
  fail("unsupported tokenizer decoder type \"{}\" with a ByteLevel pre_tokenizer (supported: ByteLevel, Sequence)",
       printable(type));
}

// Returns the id of the special token a TemplateProcessing puts before the
// text in "single" (Llama 3's <|begin_of_text|>), or -1. Other post-processor
// pieces (ByteLevel offsets trimming) do not change ids.
int32_t parse_post_processor(const nlohmann::json& config) {
  if (config.is_null()) return -1;
  std::string type = type_of(config);
  if (type == "ByteLevel") return -1;
  if (type == "Sequence") {
    int32_t bos = -1;
    for (const auto& p : config.at("processors")) {
      int32_t id = parse_post_processor(p);
      if (id >= 0) bos = id;
    }
    return bos;
  }
  if (type == "TemplateProcessing") {
    const auto& single = config.at("single");
    if (single.empty() || !single[0].contains("SpecialToken")) return -1;
    std::string name = single[0]["SpecialToken"].at("id").get<std::string>();
    const auto& specials = config.at("special_tokens");
    if (!specials.contains(name))
      fail("post_processor template uses \"{}\", missing from its special_tokens", printable(name));
    const auto& ids = specials[name].at("ids");
    if (!ids.is_array() || ids.size() != 1)
      fail("post_processor special token \"{}\" must map to a list of one id", printable(name));
    return token_id_value(ids[0], "post_processor special token");
  }
  fail(
      "unsupported tokenizer post_processor type \"{}\" (supported: ByteLevel, TemplateProcessing, "
      "Sequence)",
      printable(type));
}

std::vector<AddedToken> parse_added_tokens(const nlohmann::json& list) {
  std::vector<AddedToken> out;
  if (list.is_null()) return out;
  for (const auto& t : list) {
    AddedToken a;
    a.id = token_id_value(t.at("id"), "added token");
    a.content = t.at("content").get<std::string>();
    a.special = t.value("special", false);
    a.lstrip = t.value("lstrip", false);
    a.rstrip = t.value("rstrip", false);
    a.single_word = t.value("single_word", false);
    a.normalized = t.value("normalized", !a.special);
    out.push_back(std::move(a));
  }
  return out;
}
}  // namespace

Tokenizer Tokenizer::load(const std::filesystem::path& tokenizer_json) {
  return from_json_text(read_text_file(tokenizer_json), tokenizer_json.string());
}

Tokenizer Tokenizer::from_json_text(std::string_view json_text, std::string_view origin) {
  // model.vocab's entries are taken out as they are parsed into a flat list:
  // as a JSON object they would be a std::map of ~150k-260k keys, which took
  // about half of loading (Qwen3's and Gemma 3's tokenizer.json, RESULTS).
  // The object stays in the document, empty; anything but an object there is
  // left in place for BpeModel::from_json to refuse.
  BpeModel::VocabEntries vocab;
  std::string key1, key2, pending;  // the keys at depths 1 and 2; a vocab key waiting for its value
  bool in_vocab = false;
  auto take_vocab = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::key && depth <= 2) {
      (depth == 1 ? key1 : key2) = parsed.get_ref<const std::string&>();
      if (depth == 1) key2.clear();
      if (key1 == "model" && (depth == 1 || key2 == "vocab")) vocab.clear();  // a repeated key: the last wins
      return true;
    }
    if (depth == 2 && key1 == "model" && key2 == "vocab") {
      if (event == Event::object_start) in_vocab = true;
      if (event == Event::object_end) in_vocab = false;
      return true;
    }
    if (!in_vocab || depth != 3) return true;
    if (event == Event::key) {
      pending = std::move(parsed.get_ref<std::string&>());
      return false;  // drops the entry from the document; its value event still comes
    }
    if (event == Event::value) vocab.emplace_back(std::move(pending), std::move(parsed));
    // A nested value (an object or array as an id) is dropped with its key;
    // keep it as its kind so from_json names the entry.
    if (event == Event::object_start) vocab.emplace_back(std::move(pending), nlohmann::json::object());
    if (event == Event::array_start) vocab.emplace_back(std::move(pending), nlohmann::json::array());
    return true;
  };
  nlohmann::json root = parse_json(json_text, origin, take_vocab);
  Tokenizer tok;
  try {
    if (!root.is_object() || !root.contains("model"))
      fail("no \"model\" object (is this a tokenizer.json?)");
    tok.normalizer_ = Normalizer::from_json(root.value("normalizer", nlohmann::json()));
    tok.pre_tokenizer_ = PreTokenizer::from_json(root.value("pre_tokenizer", nlohmann::json()));
    // With a ByteLevel step BPE works on raw bytes; without one (Metaspace,
    // or no pre-tokenizer after a Prepend/Replace normalizer) on the text's
    // characters, SentencePiece style.
    const bool byte_level = tok.pre_tokenizer_.has_byte_level();
    const nlohmann::json decoder = root.value("decoder", nlohmann::json());
    if (byte_level)
      check_byte_level_decoder(decoder);
    else
      tok.decoder_ = TokenDecoder::from_json(decoder);
    tok.model_ =
        BpeModel::from_json(root.at("model"), byte_level ? BpeModel::Input::Bytes : BpeModel::Input::Chars, vocab);
    tok.added_tokens_ = parse_added_tokens(root.value("added_tokens", nlohmann::json()));
    tok.bos_id_ = parse_post_processor(root.value("post_processor", nlohmann::json()));
  } catch (const nlohmann::json::exception& e) {
    fail("{}: malformed tokenizer: {}", origin, e.what());
  } catch (const Error& e) {
    fail("{}: {}", origin, e.what());
  }

  int32_t max_id = -1;
  for (const auto& [s, id] : tok.model_.vocab()) max_id = std::max(max_id, id);
  for (const AddedToken& a : tok.added_tokens_) max_id = std::max(max_id, a.id);
  // The id table is sized by the largest id: ids may leave gaps, but a table
  // mostly empty is a corrupt id, not a vocabulary.
  const size_t count = tok.model_.vocab().size() + tok.added_tokens_.size();
  if (static_cast<size_t>(max_id) + 1 > 2 * count + 4096)
    fail("{}: token id {} is far beyond the {} tokens defined (ids must be nearly contiguous)", origin, max_id, count);
  tok.tokens_.resize(static_cast<size_t>(max_id) + 1);
  for (const auto& [s, id] : tok.model_.vocab()) {
    TokenInfo& info = tok.tokens_[id];
    info.present = true;
    info.vocab_string = s;
    if (tok.is_byte_level()) {
      // The ByteLevel decoder falls back to a token's own UTF-8 when it has
      // characters outside the byte alphabet.
      auto raw = byte_level_to_bytes(s);
      info.bytes = raw ? std::move(*raw) : s;
    } else {
      info.bytes = tok.decoder_.piece(s);
    }
  }
  for (const AddedToken& a : tok.added_tokens_) {
    TokenInfo& info = tok.tokens_[a.id];
    info.present = info.added = true;
    info.special = a.special;
    if (info.vocab_string.empty()) info.vocab_string = a.content;
    info.bytes = a.content;
    tok.added_by_content_.emplace(a.content, a.id);
  }
  if (tok.bos_id_ >= 0 && !tok.has_token(tok.bos_id_))
    fail("{}: post_processor BOS id {} is not a token", origin, tok.bos_id_);
  tok.added_matcher_ = AddedTokenMatcher(tok.added_tokens_);
  return tok;
}

const Tokenizer::TokenInfo& Tokenizer::info(int32_t id) const {
  if (!has_token(id)) fail("token id {} is not in the vocabulary (size {})", id, vocab_size());
  return tokens_[id];
}

bool Tokenizer::has_token(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < tokens_.size() && tokens_[id].present;
}
bool Tokenizer::is_added(int32_t id) const {
  return has_token(id) && tokens_[id].added;
}
bool Tokenizer::is_special(int32_t id) const {
  return has_token(id) && tokens_[id].special;
}
const std::string& Tokenizer::token_piece(int32_t id) const {
  return info(id).bytes;
}
const std::string& Tokenizer::token_string(int32_t id) const {
  return info(id).vocab_string;
}

const std::string& Tokenizer::decoder_token(int32_t id) const {
  const TokenInfo& t = info(id);
  return t.added ? t.bytes : t.vocab_string;
}

int32_t Tokenizer::token_id(std::string_view piece) const {
  if (auto it = added_by_content_.find(piece); it != added_by_content_.end()) return it->second;
  if (auto it = model_.vocab().find(piece); it != model_.vocab().end()) return it->second;
  if (is_byte_level()) {
    if (auto it = model_.vocab().find(bytes_to_byte_level(piece)); it != model_.vocab().end()) return it->second;
    return -1;
  }
  // SentencePiece-style: spaces are spelled "▁"; a lone byte may be a <0xXX> token.
  std::string spelled;
  for (char c : piece) {
    if (c == ' ')
      spelled += "\u2581";
    else
      spelled += c;
  }
  if (auto it = model_.vocab().find(spelled); it != model_.vocab().end()) return it->second;
  if (piece.size() == 1) return model_.byte_fallback_id(static_cast<uint8_t>(piece[0]));
  return -1;
}

void Tokenizer::encode_plain(std::string_view text, bool at_text_start, std::vector<int32_t>& ids) const {
  thread_local std::string buffer;
  thread_local std::vector<ByteRange> pieces;
  normalizer_.apply(text, buffer);
  pre_tokenizer_.split(buffer, pieces, at_text_start);
  for (const ByteRange& p : pieces)
    model_.encode_word(std::string_view(buffer).substr(p.begin, p.end - p.begin), ids);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  size_t valid = utf8_valid_prefix(text);
  if (valid != text.size())
    fail("text is not valid UTF-8 at byte {} (0x{:02X})", valid, static_cast<uint8_t>(text[valid]));
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (options.add_bos && bos_id_ >= 0) ids.push_back(bos_id_);
  std::vector<TextSegment> segments;
  added_matcher_.split(text, options.allow_special, segments);
  for (const TextSegment& seg : segments) {
    if (seg.token_id >= 0)
      ids.push_back(seg.token_id);
    else
      encode_plain(text.substr(seg.begin, seg.end - seg.begin), seg.begin == 0, ids);
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  if (is_byte_level()) {
    for (int32_t id : ids) out += info(id).bytes;
    return out;
  }
  // The same calls StreamDecoder makes, so streamed text equals this text.
  TokenDecoder::State state = decoder_.start();
  for (int32_t id : ids) decoder_.push(state, decoder_token(id), out);
  decoder_.flush(state, out);
  return out;
}

}  // namespace tern
