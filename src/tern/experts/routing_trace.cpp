#include "tern/experts/routing_trace.h"

#include <algorithm>
#include <limits>

#include "tern/core/error.h"
#include "tern/core/file.h"
#include "tern/core/json.h"

namespace tern {

using nlohmann::json;

namespace {

constexpr int64_t kMaxExpertId = std::numeric_limits<int32_t>::max();
constexpr size_t kMaxLineBytes = size_t{256} << 20;
constexpr int kMaxScanDepth = 64;  // deeper fields go to nlohmann (and its depth check)

// The scanner for the common shape of line. It accepts only what
// nlohmann::json would parse to the same value: plain ASCII strings without
// escapes, integers without sign, fraction or exponent as expert ids, and
// numbers that can neither overflow nor underflow a double (at most 40
// digits, a one- or two-digit exponent). Anything else: false, and the line
// goes to nlohmann.
class Scanner {
 public:
  explicit Scanner(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}

  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\r' || *p_ == '\n')) ++p_;
  }
  bool eat(char c) {
    ws();
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool at_end() {
    ws();
    return p_ == end_;
  }

  bool plain_string(std::string_view& out) {
    if (!eat('"')) return false;
    const char* start = p_;
    while (p_ < end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        out = std::string_view(start, static_cast<size_t>(p_ - start));
        ++p_;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;
      ++p_;
    }
    return false;
  }

  bool expert_id(int32_t& out) {
    ws();
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
    int64_t v = 0;
    int digits = 0;
    const bool leading_zero = *p_ == '0';
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') {
      if (++digits > 10) return false;
      v = v * 10 + (*p_ - '0');
      ++p_;
    }
    if ((leading_zero && digits > 1) || v > kMaxExpertId) return false;
    if (p_ < end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) return false;
    out = static_cast<int32_t>(v);
    return true;
  }

  bool number() {
    ws();
    if (p_ < end_ && *p_ == '-') ++p_;
    int digits = 0;
    auto run = [&] {
      int n = 0;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_, ++n;
      return n;
    };
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
    const bool leading_zero = *p_ == '0';
    const int whole = run();
    if (leading_zero && whole > 1) return false;
    digits += whole;
    if (p_ < end_ && *p_ == '.') {
      ++p_;
      const int fraction = run();
      if (fraction == 0) return false;
      digits += fraction;
    }
    if (digits > 40) return false;
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      const int exponent = run();
      if (exponent == 0 || exponent > 2) return false;
    }
    return true;
  }

  bool literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word)
      return false;
    p_ += word.size();
    return true;
  }

  bool skip_value(int depth) {
    ws();
    if (p_ == end_) return false;
    std::string_view unused;
    switch (*p_) {
      case '"':
        return plain_string(unused);
      case 't':
        return literal("true");
      case 'f':
        return literal("false");
      case 'n':
        return literal("null");
      case '[':
      case '{': {
        const char close = *p_ == '[' ? ']' : '}';
        const bool object = *p_ == '{';
        ++p_;
        if (depth + 1 > kMaxScanDepth) return false;
        if (eat(close)) return true;
        do {
          if (object && !(plain_string(unused) && eat(':'))) return false;
          if (!skip_value(depth + 1)) return false;
        } while (eat(','));
        return eat(close);
      }
      default:
        return number();
    }
  }

  // [[id, ...], ...] (ids) or [[number, ...], ...] (ids == nullptr).
  bool lists(std::vector<uint32_t>& lengths, std::vector<int32_t>* ids) {
    if (!eat('[')) return false;
    if (eat(']')) return true;
    do {
      if (!eat('[')) return false;
      uint32_t n = 0;
      if (!eat(']')) {
        do {
          if (ids) {
            int32_t id;
            if (!expert_id(id)) return false;
            ids->push_back(id);
          } else if (!number()) {
            return false;
          }
          ++n;
        } while (eat(','));
        if (!eat(']')) return false;
      }
      lengths.push_back(n);
    } while (eat(','));
    return eat(']');
  }

 private:
  const char* p_;
  const char* end_;
};

std::string excerpt(const json& value) {
  return json_excerpt(value);
}

}  // namespace

namespace detail {

bool scan_trace_line(std::string_view line, std::vector<uint32_t>& lengths,
                     std::vector<int32_t>& ids) {
  thread_local std::vector<uint32_t> weight_lengths;
  lengths.clear();
  ids.clear();
  weight_lengths.clear();
  Scanner s(line);
  bool experts = false, weights = false;
  if (!s.eat('{') || s.eat('}')) return false;
  do {
    std::string_view key;
    if (!s.plain_string(key) || !s.eat(':')) return false;
    if (key == "experts") {
      if (experts || !s.lists(lengths, &ids))
        return false;  // a repeated key: nlohmann keeps the last
      experts = true;
    } else if (key == "weights") {
      if (weights || !s.lists(weight_lengths, nullptr)) return false;
      weights = true;
    } else if (!s.skip_value(1)) {
      return false;
    }
  } while (s.eat(','));
  if (!s.eat('}') || !s.at_end() || !experts) return false;
  return !weights || weight_lengths == lengths;
}

void parse_trace_line_json(std::string_view line, std::string_view where,
                           std::vector<uint32_t>& lengths, std::vector<int32_t>& ids) {
  lengths.clear();
  ids.clear();
  const json j = parse_json(line, where);
  if (!j.is_object())
    fail("{}: expected a JSON object {{\"experts\": [[...], ...]}} (one token), got {}", where,
         excerpt(j));
  const auto experts = j.find("experts");
  if (experts == j.end())
    fail("{}: no \"experts\" field (one list of expert ids per MoE layer)", where);
  if (!experts->is_array())
    fail("{}: \"experts\" must be a list with one list of expert ids per MoE layer, got {}", where,
         excerpt(*experts));
  for (size_t l = 0; l < experts->size(); ++l) {
    const json& list = (*experts)[l];
    if (!list.is_array())
      fail("{}: experts[{}] must be a list of expert ids, got {}", where, l, excerpt(list));
    for (size_t i = 0; i < list.size(); ++i) {
      const json& v = list[i];
      const bool ok =
          v.is_number_unsigned()  ? v.get<uint64_t>() <= static_cast<uint64_t>(kMaxExpertId)
          : v.is_number_integer() ? v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMaxExpertId
                                  : false;
      if (!ok)
        fail("{}: experts[{}][{}] = {} is not an expert id (an integer from 0 to {})", where, l, i,
             excerpt(v), kMaxExpertId);
      ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
    lengths.push_back(static_cast<uint32_t>(list.size()));
  }
  const auto weights = j.find("weights");
  if (weights == j.end()) return;
  if (!weights->is_array() || weights->size() != experts->size())
    fail("{}: \"weights\" must be {} lists, the shape of \"experts\", got {}", where,
         experts->size(), excerpt(*weights));
  for (size_t l = 0; l < weights->size(); ++l) {
    const json& list = (*weights)[l];
    const bool ok = list.is_array() && list.size() == lengths[l] &&
                    std::all_of(list.begin(), list.end(),
                                [](const json& v) { return v.is_number() || v.is_null(); });
    if (!ok)
      fail("{}: weights[{}] must be {} numbers (or null), as experts[{}] has {} ids, got {}", where,
           l, lengths[l], l, lengths[l], excerpt(list));
  }
}

}  // namespace detail

void RoutingTraceParser::add_line(std::string_view line) {
  const int64_t number = ++line_number_;
  if (line.empty() || line == "\r")
    fail("{}:{}: empty line (each line is one token's JSON object)", source_, number);
  if (!detail::scan_trace_line(line, lengths_, ids_))
    detail::parse_trace_line_json(line, fmt::format("{}:{}", source_, number), lengths_, ids_);
  add_token(number);
}

void RoutingTraceParser::add_token(int64_t number) {
  const auto layers = static_cast<int64_t>(lengths_.size());
  if (trace_.layers == 0) {
    if (layers == 0) fail("{}:{}: \"experts\" lists no layers", source_, number);
    trace_.layers = layers;
  } else if (layers != trace_.layers) {
    fail("{}:{}: {} layer lists, but line 1 has {} (every token lists every MoE layer, in order)",
         source_, number, layers, trace_.layers);
  }
  size_t at = 0;
  for (int64_t l = 0; l < layers; ++l) {
    const std::span<const int32_t> list(ids_.data() + at, lengths_[static_cast<size_t>(l)]);
    for (size_t i = 1; i < list.size(); ++i)
      if (std::find(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(i), list[i]) !=
          list.begin() + static_cast<std::ptrdiff_t>(i))
        fail("{}:{}: experts[{}] names expert {} twice", source_, number, l, list[i]);
    at += list.size();
    trace_.starts.push_back(trace_.starts.back() + list.size());
  }
  trace_.experts.insert(trace_.experts.end(), ids_.begin(), ids_.end());
}

RoutingTrace RoutingTraceParser::finish() {
  if (line_number_ == 0) fail("{}: no tokens (expected one JSON line per token)", source_);
  RoutingTrace out = std::move(trace_);
  trace_ = RoutingTrace{};
  line_number_ = 0;
  return out;
}

RoutingTrace parse_routing_trace(std::string_view text, std::string_view source) {
  RoutingTraceParser parser{std::string(source)};
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    parser.add_line(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  }
  return parser.finish();
}

RoutingTrace read_routing_trace(const std::filesystem::path& path) {
  const File file = File::open_read(path);
  const uint64_t size = file.size();
  RoutingTraceParser parser{path.string()};
  std::string pending;  // a line cut by the end of a piece
  std::vector<char> piece(size_t{4} << 20);
  for (uint64_t offset = 0; offset < size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(piece.size(), size - offset));
    file.pread_exact(piece.data(), n, offset);
    offset += n;
    std::string_view rest(piece.data(), n);
    for (size_t nl; (nl = rest.find('\n')) != std::string_view::npos; rest.remove_prefix(nl + 1)) {
      if (pending.empty()) {
        parser.add_line(rest.substr(0, nl));
      } else {
        pending.append(rest.substr(0, nl));
        parser.add_line(pending);
        pending.clear();
      }
    }
    pending.append(rest);
    if (pending.size() > kMaxLineBytes)
      fail("{}: a line longer than {} MiB", path.string(), kMaxLineBytes >> 20);
  }
  if (!pending.empty()) parser.add_line(pending);
  return parser.finish();
}

}  // namespace tern
