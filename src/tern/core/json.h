#pragma once
// JSON from untrusted files (config.json, manifest.json, tokenizer.json,
// safetensors headers): parsing with a nesting limit and short excerpts of
// values for error messages.
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tern {

// Deeper than any real model file nests (tokenizer.json: ~6). nlohmann's
// copy and dump recurse once per level, so an unbounded depth would let a
// file overflow the stack.
inline constexpr size_t kMaxJsonDepth = 128;

// Throws "<source>: JSON nested deeper than N levels" if `text` opens more
// than max_depth arrays/objects at once. Does not otherwise validate.
void check_json_depth(std::string_view text, std::string_view source, size_t max_depth = kMaxJsonDepth);

// check_json_depth, then nlohmann::json::parse; a syntax error throws
// "<source>: invalid JSON: ..." (tern::Error).
nlohmann::json parse_json(std::string_view text, std::string_view source);
// The same with nlohmann's parser callback, which may take values out of the
// document as they are parsed (returning false drops them from it).
nlohmann::json parse_json(std::string_view text, std::string_view source,
                          const nlohmann::json::parser_callback_t& callback);

// A value as JSON text for an error message, cut to about max_chars with
// "..." so a huge value cannot make a huge message.
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 60);

}  // namespace tern
