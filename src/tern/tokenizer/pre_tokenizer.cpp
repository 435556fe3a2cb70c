#include "tern/tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "tern/core/error.h"
#include "tern/core/json.h"

namespace tern {

namespace {
// GPT-2's pre-tokenizer regex, used by ByteLevel when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

PreTokenizer::Behavior parse_behavior(const std::string& name) {
  using B = PreTokenizer::Behavior;
  if (name == "Isolated") return B::Isolated;
  if (name == "Removed") return B::Removed;
  if (name == "MergedWithPrevious") return B::MergedWithPrevious;
  if (name == "MergedWithNext") return B::MergedWithNext;
  if (name == "Contiguous") return B::Contiguous;
  fail("unsupported Split behavior \"{}\" in tokenizer pre_tokenizer", printable(name));
}

struct Span {
  ByteRange range;
  bool is_match;
};

// Applies a split behavior to the alternating match/gap spans of one piece,
// following tokenizers' NormalizedString::split exactly.
void combine(PreTokenizer::Behavior behavior, const std::vector<Span>& spans,
             std::vector<ByteRange>& out) {
  using B = PreTokenizer::Behavior;
  switch (behavior) {
    case B::Isolated:
      for (const Span& s : spans) out.push_back(s.range);
      return;
    case B::Removed:
      for (const Span& s : spans)
        if (!s.is_match) out.push_back(s.range);
      return;
    case B::MergedWithPrevious: {
      size_t first = out.size();
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && out.size() > first)
          out.back().end = s.range.end;
        else
          out.push_back(s.range);
        previous_match = s.is_match;
      }
      return;
    }
    case B::MergedWithNext: {
      // Mirror image of MergedWithPrevious: walk right to left, then restore order.
      size_t first = out.size();
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && out.size() > first)
          out.back().begin = it->range.begin;
        else
          out.push_back(it->range);
        previous_match = it->is_match;
      }
      std::reverse(out.begin() + static_cast<ptrdiff_t>(first), out.end());
      return;
    }
    case B::Contiguous: {
      size_t first = out.size();
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.is_match == previous_match && out.size() > first)
          out.back().end = s.range.end;
        else
          out.push_back(s.range);
        previous_match = s.is_match;
      }
      return;
    }
  }
}
}  // namespace

PreTokenizer PreTokenizer::from_json(const nlohmann::json& config) {
  PreTokenizer p;
  p.add_steps(config);
  return p;
}

void PreTokenizer::add_steps(const nlohmann::json& config) {
  if (config.is_null()) return;
  if (!config.is_object() || !config.contains("type"))
    fail("tokenizer pre_tokenizer must be an object with a \"type\"");
  const std::string type = config.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& step : config.at("pretokenizers")) add_steps(step);
  } else if (type == "Split") {
    const auto& pattern = config.at("pattern");
    Step step{Step::Kind::Split};
    if (pattern.contains("Regex")) {
      regexes_.push_back(std::make_unique<Regex>(pattern.at("Regex").get<std::string>()));
    } else if (pattern.contains("String")) {
      regexes_.push_back(
          std::make_unique<Regex>(pattern.at("String").get<std::string>(), /*literal=*/true));
    } else {
      fail("tokenizer Split pattern must have \"Regex\" or \"String\", got {}", json_excerpt(pattern));
    }
    step.regex = regexes_.back().get();
    step.behavior = parse_behavior(config.value("behavior", std::string("Isolated")));
    step.invert = config.value("invert", false);
    steps_.push_back(step);
  } else if (type == "ByteLevel") {
    Step step{Step::Kind::ByteLevel};
    step.add_prefix_space = config.value("add_prefix_space", true);
    if (config.value("use_regex", true)) {
      regexes_.push_back(std::make_unique<Regex>(kGpt2Pattern));
      step.regex = regexes_.back().get();
    }
    steps_.push_back(step);
  } else {
    fail("unsupported tokenizer pre_tokenizer type \"{}\" (supported: Split, ByteLevel, Sequence)",
         printable(type));
  }
}

bool PreTokenizer::has_byte_level() const {
  for (const Step& s : steps_)
    if (s.kind == Step::Kind::ByteLevel) return true;
  return false;
}

void PreTokenizer::apply_split(const Step& step, const std::string& buffer,
                               const std::vector<ByteRange>& in,
                               std::vector<ByteRange>& out) const {
  std::vector<ByteRange> matches;
  std::vector<Span> spans;
  for (const ByteRange& piece : in) {
    std::string_view subject(buffer.data() + piece.begin, piece.end - piece.begin);
    matches.clear();
    step.regex->find_all(subject, matches);
    spans.clear();
    size_t last = 0;
    for (const ByteRange& m : matches) {
      if (m.begin > last)
        spans.push_back({{piece.begin + last, piece.begin + m.begin}, step.invert});
      spans.push_back({{piece.begin + m.begin, piece.begin + m.end}, !step.invert});
      last = m.end;
    }
    if (last < subject.size()) spans.push_back({{piece.begin + last, piece.end}, step.invert});
    combine(step.behavior, spans, out);
  }
}

void PreTokenizer::split(std::string& buffer, std::vector<ByteRange>& pieces) const {
  pieces.clear();
  if (buffer.empty()) return;
  pieces.push_back({0, buffer.size()});
  std::vector<ByteRange> next;
  for (const Step& step : steps_) {
    if (step.kind == Step::Kind::ByteLevel && step.add_prefix_space) {
      // tokenizers prepends the space to every piece that lacks one, not just
      // the first: pieces are split independently by then.
      for (ByteRange& piece : pieces) {
        if (buffer[piece.begin] == ' ') continue;
        size_t begin = buffer.size();
        buffer.reserve(begin + 1 +
                       (piece.end - piece.begin));  // appending from itself: no reallocation
        buffer += ' ';
        buffer.append(buffer, piece.begin, piece.end - piece.begin);
        piece = {begin, buffer.size()};
      }
    }
    if (!step.regex) continue;
    next.clear();
    apply_split(step, buffer, pieces, next);
    pieces.swap(next);
  }
}

}  // namespace tern
