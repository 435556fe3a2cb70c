// Fuzz target "tokenizer": the input is a tokenizer.json, optionally
// followed by a NUL byte and text (JSON text cannot contain a raw NUL).
// Loading must either give a clean tern::Error or a tokenizer that encodes
// any text to ids it can decode, decodes arbitrary ids (unknown ones are a
// clean error) and streams them to whole UTF-8.
#include <cstring>
#include <vector>

#include "fuzz_target.h"
#include "tern/tokenizer/stream_decoder.h"
#include "tern/tokenizer/tokenizer.h"
#include "tern/tokenizer/utf8.h"

namespace tern::fuzz {

namespace {

constexpr std::string_view kDefaultText = "Hello, world! <|im_start|>user\n  déjà vu 123 <think>\n</think>";

void exercise(const Tokenizer& tok, std::string_view text) {
  for (bool special : {true, false}) {
    std::vector<int32_t> ids;
    run_expecting_clean_errors([&] { ids = tok.encode(text, {special, /*add_bos=*/true}); });
    for (int32_t id : ids)
      if (!tok.has_token(id)) broken("encode produced an id the tokenizer does not have");
    tok.decode(ids);
    StreamDecoder stream(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    if (utf8_valid_prefix(streamed) != streamed.size()) broken("StreamDecoder emitted invalid UTF-8");
  }
  // Arbitrary ids from the text's bytes: known ones decode, unknown ones are a clean error.
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 4 <= text.size() && ids.size() < 64; i += 4) {
    int32_t id;
    std::memcpy(&id, text.data() + i, 4);
    ids.push_back(id);
  }
  for (int32_t id : ids) {
    run_expecting_clean_errors([&] { tok.decode(std::span<const int32_t>(&id, 1)); });
    run_expecting_clean_errors([&] { tok.token_string(id); });
  }
  tok.token_id(text);
}

}  // namespace

void fuzz_tokenizer(std::span<const uint8_t> input) {
  const std::string_view all(reinterpret_cast<const char*>(input.data()), input.size());
  const size_t nul = all.find('\0');
  const std::string_view json = all.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? kDefaultText : all.substr(nul + 1);
  run_expecting_clean_errors([&] {
    Tokenizer tok = Tokenizer::from_json_text(json);
    exercise(tok, text);
  });
}

}  // namespace tern::fuzz
