#pragma once
// PreTokenizer — the tokenizer.json "pre_tokenizer" stage: splits normalized
// text into pre-tokens (words) that BPE then encodes independently. Supports
// Split (regex or literal, every split behavior), ByteLevel (optional prefix
// space and the GPT-2 regex), Metaspace (spaces become "▁", prepend_scheme
// always/first/never, optional split) and Sequence of these — what Qwen2/3,
// Llama 3, GPT-OSS, DeepSeek-V3 and the non-legacy Mistral/Llama 2 files ship.
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
  // that changes text (ByteLevel's prefix space, Metaspace) appends the
  // changed piece to `buffer`, so ranges stay offsets and no per-piece string
  // is built. `at_text_start`: the buffer is the start of the input (not text
  // after an added token), which Metaspace's prepend_scheme "first" needs.
  void split(std::string& buffer, std::vector<ByteRange>& pieces, bool at_text_start = true) const;

  // True if a ByteLevel step is present (the BPE model then works on bytes).
  bool has_byte_level() const;

  // Metaspace's prepend_scheme, as in the Rust `tokenizers` crate.
  enum class PrependScheme { Always, First, Never };

  // How Split keeps its delimiters, as in the Rust `tokenizers` crate.
  enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

 private:
  struct Step {
    enum class Kind { Split, ByteLevel, Metaspace } kind;
    const Regex* regex = nullptr;  // Split; ByteLevel with use_regex (points into regexes_)
    Behavior behavior = Behavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;
    std::string replacement{};  // Metaspace: the character spaces become ("▁")
    PrependScheme prepend_scheme = PrependScheme::Always;
    bool split = true;  // Metaspace: split before each replacement character
  };
  void add_steps(const nlohmann::json& config);
  void apply_split(const Step& step, const std::string& buffer, const std::vector<ByteRange>& in,
                   std::vector<ByteRange>& out) const;
  static void apply_metaspace(const Step& step, std::string& buffer, bool first_at_start,
                              std::vector<ByteRange>& pieces);

  std::vector<Step> steps_;
  std::vector<std::unique_ptr<Regex>> regexes_;  // stable addresses for Step::regex
};

}  // namespace tern
