#include "tern/experts/routing_trace.h"

#include <gtest/gtest.h>

#include <random>

#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace tern {
namespace {

using testing::expect_error;

std::vector<std::vector<int32_t>> batches_of(const RoutingTrace& t) {
  std::vector<std::vector<int32_t>> out;
  for (int64_t token = 0; token < t.tokens(); ++token)
    for (int64_t l = 0; l < t.layers; ++l) {
      auto b = t.batch(token, l);
      out.emplace_back(b.begin(), b.end());
    }
  return out;
}

TEST(RoutingTrace, ReadsOneTokenPerLineWithOneListPerLayer) {
  const RoutingTrace t = parse_routing_trace(
      "{\"experts\": [[3, 1], [0, 7]], \"weights\": [[0.75, 0.25], [0.5, 0.5]]}\n"
      "{\"position\":1,\"token\":9,\"experts\":[[2,3],[7,6]],\"weights\":[[1e-05,-0],[1,2E+10]]}\n"
      "  { \"note\" : {\"a\": [true, false, null, \"x\"]} ,\"experts\" : [ [ 5 ] , [ ] ] }\r\n");
  EXPECT_EQ(t.layers, 2);
  EXPECT_EQ(t.tokens(), 3);
  EXPECT_EQ(t.accesses(), 9u);
  const std::vector<std::vector<int32_t>> want = {{3, 1}, {0, 7}, {2, 3}, {7, 6}, {5}, {}};
  EXPECT_EQ(batches_of(t), want);  // in the order written
}

TEST(RoutingTrace, LastLineNeedsNoNewline) {
  EXPECT_EQ(parse_routing_trace("{\"experts\":[[1]]}\n{\"experts\":[[2]]}").tokens(), 2);
}

// Lines the scanner leaves to nlohmann (escapes, unicode, a BOM, a repeated
// key, a signed zero) still parse, with nlohmann's meaning.
TEST(RoutingTrace, LinesOutsideTheScannersShapeParseAsJson) {
  const std::vector<std::pair<std::string, std::vector<int32_t>>> cases = {
      {"{\"exp\\u0065rts\": [[4]]}", {4}},
      {"{\"name\": \"caf\xc3\xa9\", \"experts\": [[4]]}", {4}},
      {"\xef\xbb\xbf{\"experts\": [[4]]}", {4}},
      {"{\"experts\": [[1]], \"experts\": [[4]]}", {4}},  // nlohmann keeps the last
      {"{\"experts\": [[-0]]}", {0}},
      {"{\"experts\": [[4]], \"weights\": [[1e300]]}", {4}},
  };
  for (const auto& [line, ids] : cases) {
    std::vector<uint32_t> lengths;
    std::vector<int32_t> scanned;
    EXPECT_FALSE(detail::scan_trace_line(line, lengths, scanned)) << line;
    const RoutingTrace t = parse_routing_trace(line);
    EXPECT_EQ(t.experts, ids) << line;
  }
}

TEST(RoutingTrace, ErrorsNameTheFileLineAndProblem) {
  const std::string ok = "{\"experts\": [[1, 2], [3, 4]]}\n";
  expect_error([&] { parse_routing_trace(ok + "{\"experts\": [[1, 2], [3, 4]]\n", "t.jsonl"); },
               {"t.jsonl:2:", "invalid JSON"});
  expect_error([&] { parse_routing_trace(ok + ok + "{\"experts\": [[1, 2]]}\n", "t.jsonl"); },
               {"t.jsonl:3:", "1 layer lists, but line 1 has 2"});
  expect_error([&] { parse_routing_trace(ok + "{\"experts\": [[1, 2], [3, 3]]}\n"); },
               {"trace:2:", "experts[1] names expert 3 twice"});
  expect_error([&] { parse_routing_trace("{\"experts\": [[1, -2]]}"); },
               {"trace:1:", "experts[0][1] = -2 is not an expert id"});
  expect_error([&] { parse_routing_trace("{\"experts\": [[1.5]]}"); },
               {"experts[0][0] = 1.5 is not an expert id"});
  expect_error([&] { parse_routing_trace("{\"experts\": [[2147483648]]}"); },
               {"is not an expert id"});
  expect_error([&] { parse_routing_trace("{\"experts\": [1, 2]}"); },
               {"experts[0] must be a list of expert ids"});
  expect_error([&] { parse_routing_trace("{\"experts\": 7}"); }, {"\"experts\" must be a list"});
  expect_error([&] { parse_routing_trace("{\"weights\": [[1]]}"); },
               {"trace:1:", "no \"experts\" field"});
  expect_error([&] { parse_routing_trace("[[1, 2]]"); }, {"expected a JSON object"});
  expect_error([&] { parse_routing_trace("{\"experts\": []}"); }, {"lists no layers"});
  expect_error([&] { parse_routing_trace("{\"experts\": [[1, 2]], \"weights\": [[0.5]]}"); },
               {"weights[0] must be 2 numbers"});
  expect_error([&] { parse_routing_trace("{\"experts\": [[1], [2]], \"weights\": [[0.5]]}"); },
               {"\"weights\" must be 2 lists"});
  expect_error([&] { parse_routing_trace(ok + "\n" + ok); }, {"trace:2:", "empty line"});
  expect_error([&] { parse_routing_trace(""); }, {"no tokens"});
  expect_error([&] { parse_routing_trace(std::string(200, '[') + std::string(200, ']')); },
               {"nested deeper"});
}

// Whatever the scanner takes, nlohmann reads the same way: random edits of
// good lines, through both.
TEST(RoutingTrace, ScannerAgreesWithJsonOnEditedLines) {
  const std::vector<std::string> seeds = {
      "{\"position\":3,\"token\":17,\"experts\":[[5,0,12],[7,1,2]],\"weights\":[[0.5,0.25,0.25],["
      "1e-05,0.5,0.49999]]}",
      "{ \"experts\" : [ [ 10 , 20 ] ], \"x\": {\"y\": [null, true, false, \"s\", -1.5e+07]} }",
  };
  const std::string alphabet = "{}[],:\" 0123456789-+.eE\\tfnux";
  std::mt19937 rng(12345);
  int scanned = 0, both = 0;
  for (int round = 0; round < 40000; ++round) {
    std::string line = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % (line.size() + 1);
      switch (rng() % 3) {
        case 0:
          line.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 1:
          if (at < line.size()) line.erase(at, 1);
          break;
        default:
          if (at < line.size()) line[at] = alphabet[rng() % alphabet.size()];
          break;
      }
    }
    std::vector<uint32_t> lengths, json_lengths;
    std::vector<int32_t> ids, json_ids;
    const bool fast = detail::scan_trace_line(line, lengths, ids);
    bool parsed = true;
    try {
      detail::parse_trace_line_json(line, "edit", json_lengths, json_ids);
    } catch (const Error&) {
      parsed = false;
    }
    if (!fast) continue;
    ++scanned;
    ASSERT_TRUE(parsed) << "the scanner took a line JSON rejects: " << line;
    ASSERT_EQ(lengths, json_lengths) << line;
    ASSERT_EQ(ids, json_ids) << line;
    ++both;
  }
  EXPECT_GT(scanned, 1000);  // the edits do leave many lines the scanner takes
  EXPECT_EQ(scanned, both);
}

TEST(RoutingTrace, ReadsAFileInPiecesAsTheText) {
  testing::TempDir dir;
  std::string text;
  std::mt19937 rng(7);
  for (int t = 0; t < 30000; ++t) {  // ~6 MB: lines cross the reader's 4 MiB pieces
    text += "{\"experts\":[";
    for (int l = 0; l < 4; ++l)
      text += fmt::format("{}[{},{}]", l ? "," : "", rng() % 64, 64 + rng() % 64);
    text += "],\"weights\":[[0.6,0.4],[0.6,0.4],[0.6,0.4],[0.6,0.4]],\"padding\":\"" +
            std::string(rng() % 200, 'x') + "\"}\n";
  }
  text.pop_back();  // no final newline
  testing::write_bytes(dir / "t.jsonl", text);
  const RoutingTrace from_file = read_routing_trace(dir / "t.jsonl");
  const RoutingTrace from_text = parse_routing_trace(text);
  EXPECT_EQ(from_file.tokens(), 30000);
  EXPECT_EQ(from_file.starts, from_text.starts);
  EXPECT_EQ(from_file.experts, from_text.experts);
  testing::write_bytes(dir / "bad.jsonl", "{\"experts\":[[1]]}\n{\"experts\":[[1]\n");
  expect_error([&] { read_routing_trace(dir / "bad.jsonl"); }, {"bad.jsonl:2:", "invalid JSON"});
}

}  // namespace
}  // namespace tern
