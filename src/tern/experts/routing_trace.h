#pragma once
// RoutingTrace — the routing of a run, as `tern trace replay` reads it from a
// JSON Lines file (docs/TRACES.md): one line per token, in order,
//   {"experts": [[3, 17, ...], [5, 2, ...], ...], "weights": [[...], ...], ...}
// with one list of expert ids per MoE layer, in layer order; "weights" (same
// shape) and any other field are optional and not kept. Every line must list
// the same number of layers; a list may not name an expert twice.
//
// Traces can be large (50,000 tokens x 48 layers x top-8 = 19M ids), so the
// common shape of line is read by a dedicated scanner; any line it does not
// take (escapes, non-ASCII text, odd numbers, every error) goes through
// nlohmann::json, which decides what the line means and words every error.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

// Owns the ids of every token's experts per layer, flat: the experts of
// token t in layer l (l counts MoE layers from 0) are
// experts[starts[t * layers + l] .. starts[t * layers + l + 1]).
struct RoutingTrace {
  int64_t layers = 0;
  std::vector<uint64_t> starts{0};  // [tokens * layers + 1]
  std::vector<int32_t> experts;     // in the order each line lists them

  int64_t tokens() const { return layers ? static_cast<int64_t>(starts.size() - 1) / layers : 0; }
  uint64_t accesses() const { return experts.size(); }
  std::span<const int32_t> batch(int64_t token, int64_t layer) const {
    const size_t b = static_cast<size_t>(token * layers + layer);
    return {experts.data() + starts[b], experts.data() + starts[b + 1]};
  }
};

// Builds a RoutingTrace line by line. Errors are tern::Error
// "<source>:<line>: <what>", one line each.
class RoutingTraceParser {
 public:
  explicit RoutingTraceParser(std::string source) : source_(std::move(source)) {}
  // One line without its newline (a trailing '\r' is JSON whitespace).
  void add_line(std::string_view line);
  // The trace; fails if no line was added.
  RoutingTrace finish();

 private:
  void add_token(int64_t line_number);
  void parse_slow(std::string_view line, int64_t line_number);

  std::string source_;
  RoutingTrace trace_;
  int64_t line_number_ = 0;
  std::vector<uint32_t> lengths_;  // the current line: list length per layer
  std::vector<int32_t> ids_;       // the current line: ids, flat
};

RoutingTrace parse_routing_trace(std::string_view text, std::string_view source = "trace");
// Streams the file (reads it in pieces; memory grows with the ids, not the text).
RoutingTrace read_routing_trace(const std::filesystem::path& path);

namespace detail {
// The scanner alone: true and lengths/ids filled if it takes the line (then
// the JSON parser would read the same), false otherwise. For tests.
bool scan_trace_line(std::string_view line, std::vector<uint32_t>& lengths,
                     std::vector<int32_t>& ids);
// The JSON parser alone; throws tern::Error for a line that is not a token line.
void parse_trace_line_json(std::string_view line, std::string_view where,
                           std::vector<uint32_t>& lengths, std::vector<int32_t>& ids);
}  // namespace detail

}  // namespace tern
