#pragma once
// PreTokenizer — the tokenizer.json "pre_tokenizer" stage: splits normalized
// text into pre-tokens (words) that BPE then encodes independently. Supports
// Split (regex or literal, every split behavior), ByteLevel (optional prefix
// space and the GPT-2 regex) and Sequence of these — what Qwen2/3, Llama 3,
// GPT-OSS and DeepSeek-V3 ship.
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <vector>

#include "tern/tokenizer/regex.h"

namespace tern {

class PreTokenizer {
 public:
  // Parses the "pre_tokenizer" value; unsupported types throw tern::Error
  // naming the type.
  static PreTokenizer from_json(const nlohmann::json& config);

  // Splits buffer[0, size) into pieces (byte ranges into `buffer`). A step
  // that changes text (ByteLevel's prefix space) appends the changed piece
  // to `buffer`, so ranges stay offsets and no per-piece string is built.
  void split(std::string& buffer, std::vector<ByteRange>& pieces) const;

  // True if a ByteLevel step is present (required for byte-level BPE).
  bool has_byte_level() const;

  // How Split keeps its delimiters, as in the Rust `tokenizers` crate.
  enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

 private:
  struct Step {
    enum class Kind { Split, ByteLevel } kind;
    const Regex* regex = nullptr;  // Split; ByteLevel with use_regex (points into regexes_)
    Behavior behavior = Behavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;
  };
  void add_steps(const nlohmann::json& config);
  void apply_split(const Step& step, const std::string& buffer, const std::vector<ByteRange>& in,
                   std::vector<ByteRange>& out) const;

  std::vector<Step> steps_;
  std::vector<std::unique_ptr<Regex>> regexes_;  // stable addresses for Step::regex
};

}  // namespace tern
