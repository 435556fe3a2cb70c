#include "tern/core/json.h"

#include "tern/core/error.h"

namespace tern {

void check_json_depth(std::string_view text, std::string_view source, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        fail("{}: JSON nested deeper than {} levels at byte {}", source, max_depth, i);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

nlohmann::json parse_json(std::string_view text, std::string_view source) {
  return parse_json(text, source, nullptr);
}

nlohmann::json parse_json(std::string_view text, std::string_view source,
                          const nlohmann::json::parser_callback_t& callback) {
  check_json_depth(text, source);
  try {
    return nlohmann::json::parse(text, callback);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
    fail("{}: invalid JSON: {}", source, e.what());
  }
}

std::string json_excerpt(const nlohmann::json& value, size_t max_chars) {
  // Strings may hold invalid UTF-8 only if built in code; replace rather than throw.
  std::string s = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > max_chars) {
    size_t cut = max_chars;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // whole characters
    s.resize(cut);
    s += "...";
  }
  return s;
}

}  // namespace tern
