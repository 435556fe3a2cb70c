#include "tern/tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "tern/core/error.h"
#include "tern/core/json.h"
#include "tern/tokenizer/utf8.h"

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
  } else if (type == "Metaspace") {
    Step step{Step::Kind::Metaspace};
    step.replacement = config.value("replacement", std::string("\u2581"));
    size_t end = 0;
    if (step.replacement.empty() || utf8_valid_prefix(step.replacement) != step.replacement.size() ||
        (utf8_decode(step.replacement, end), end != step.replacement.size()))
      fail("tokenizer Metaspace replacement must be one character, got \"{}\"", printable(step.replacement));
    const std::string scheme = config.value("prepend_scheme", std::string("always"));
    if (scheme == "always") {
      step.prepend_scheme = PrependScheme::Always;
    } else if (scheme == "first") {
      step.prepend_scheme = PrependScheme::First;
    } else if (scheme == "never") {
      step.prepend_scheme = PrependScheme::Never;
    } else {
      fail("unsupported Metaspace prepend_scheme \"{}\" (supported: always, first, never)", printable(scheme));
    }
    // Files older than prepend_scheme say add_prefix_space; tokenizers
    // refuses false beside a scheme other than "never" (the default is "always").
    if (config.contains("add_prefix_space") && config["add_prefix_space"].is_boolean() &&
        !config["add_prefix_space"].get<bool>()) {
      if (step.prepend_scheme != PrependScheme::Never)
        fail("tokenizer Metaspace add_prefix_space false does not match its prepend_scheme \"{}\"", scheme);
    }
    step.split = config.value("split", true);
    steps_.push_back(step);
  } else {
    fail(
        "unsupported tokenizer pre_tokenizer type \"{}\" (supported: Split, ByteLevel, Metaspace, "
        "Sequence)",
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

// Metaspace on each piece, as tokenizers: spaces become the replacement, the
// replacement is prepended (unless the piece starts with it; "first": only to
// the piece at the start of the input), then the piece is cut before each
// replacement (MergedWithNext). Changed pieces are appended to `buffer`.
void PreTokenizer::apply_metaspace(const Step& step, std::string& buffer, bool first_at_start,
                                   std::vector<ByteRange>& pieces) {
  thread_local std::string text;
  thread_local std::vector<ByteRange> out;
  out.clear();
  const std::string_view rep = step.replacement;
  for (size_t i = 0; i < pieces.size(); ++i) {
    ByteRange piece = pieces[i];
    std::string_view view(buffer.data() + piece.begin, piece.end - piece.begin);
    const bool starts_with_rep = view.substr(0, rep.size()) == rep;
    bool prepend = false;
    if (step.prepend_scheme == PrependScheme::Always) prepend = !starts_with_rep && view[0] != ' ';
    if (step.prepend_scheme == PrependScheme::First)
      prepend = !starts_with_rep && view[0] != ' ' && i == 0 && first_at_start;
    if (prepend || view.find(' ') != std::string_view::npos) {
      text.clear();
      if (prepend) text.append(rep);
      for (char c : view) {
        if (c == ' ')
          text.append(rep);
        else
          text += c;
      }
      piece = {buffer.size(), buffer.size() + text.size()};
      buffer.append(text);
    }
    if (!step.split) {
      out.push_back(piece);
      continue;
    }
    std::string_view s(buffer.data() + piece.begin, piece.end - piece.begin);
    size_t begin = 0;
    for (size_t at = s.find(rep, 1); at != std::string_view::npos; at = s.find(rep, at + rep.size())) {
      if (at > begin) out.push_back({piece.begin + begin, piece.begin + at});
      begin = at;
    }
    out.push_back({piece.begin + begin, piece.end});
  }
  pieces.swap(out);
}

void PreTokenizer::split(std::string& buffer, std::vector<ByteRange>& pieces, bool at_text_start) const {
  pieces.clear();
  if (buffer.empty()) return;
  pieces.push_back({0, buffer.size()});
  std::vector<ByteRange> next;
  // Whether pieces[0] still begins where the input began (Metaspace "first").
  bool first_at_start = at_text_start;
  for (const Step& step : steps_) {
    if (pieces.empty()) return;
    if (step.kind == Step::Kind::Metaspace) {
      apply_metaspace(step, buffer, first_at_start, pieces);
      continue;
    }
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
    first_at_start = first_at_start && !next.empty() && next[0].begin == pieces[0].begin;
    pieces.swap(next);
  }
}

}  // namespace tern
