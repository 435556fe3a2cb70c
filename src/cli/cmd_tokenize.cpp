// tern tokenize — encode text (or decode ids) with a model's tokenizer.json.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "tern/core/error.h"
#include "tern/core/file.h"
#include "tern/tokenizer/synthetic.h"
#include "tern/tokenizer/tokenizer.h"
#include "tern/tokenizer/utf8.h"

namespace tern::cli {

namespace {
namespace fs = std::filesystem;

struct TokenizeArgs {
  std::string model;
  std::string text;
  bool has_text = false;
  bool json = false;
  bool no_special = false;
  bool no_bos = false;
  std::string batch_file;
  std::string decode_ids;
  std::string write_synthetic_dir;
  SyntheticSpecials synthetic_specials = SyntheticSpecials::Qwen3;
};

fs::path resolve_tokenizer_json(const std::string& model) {
  fs::path path(model);
  if (fs::is_directory(path)) {
    fs::path candidate = path / "tokenizer.json";
    if (!fs::exists(candidate)) fail("{} has no tokenizer.json", model);
    return candidate;
  }
  if (!fs::exists(path))
    fail("{} does not exist (expected a tokenizer.json or a model directory)", model);
  return path;
}

// A piece made visible for a terminal: quoted, control characters and bytes
// that are not whole UTF-8 characters escaped (a token may end mid-character).
std::string visible(const std::string& bytes) {
  std::string out = "\"";
  size_t i = 0;
  while (i < bytes.size()) {
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      size_t valid = utf8_valid_prefix(std::string_view(bytes).substr(i, 4));
      // Only whole characters are printed as is.
      size_t len = (c >= 0xF0) ? 4 : (c >= 0xE0) ? 3 : (c >= 0xC0) ? 2 : 1;
      if (valid >= len && len > 1) {
        out.append(bytes, i, len);
        i += len;
        continue;
      }
      out += fmt::format("\\x{:02x}", c);
    }
    ++i;
  }
  return out + "\"";
}

std::vector<int32_t> parse_id_list(const std::string& list) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(pos, comma - pos);
    size_t start = item.find_first_not_of(" \t"), end = item.find_last_not_of(" \t");
    if (start == std::string::npos) fail("--decode: empty id in \"{}\"", list);
    item = item.substr(start, end - start + 1);
    size_t used = 0;
    long long value = -1;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || value < 0 || value > INT32_MAX)
      fail("--decode: \"{}\" is not a token id", item);
    ids.push_back(static_cast<int32_t>(value));
    pos = comma + 1;
  }
  return ids;
}

// Decoded bytes as a JSON string; bytes that are not UTF-8 become U+FFFD.
std::string json_text(const std::string& bytes) {
  return nlohmann::json(bytes).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void write_synthetic(const std::string& dir, SyntheticSpecials specials) {
  SyntheticTokenizer synthetic = build_synthetic_tokenizer({.specials = specials});
  fs::create_directories(dir);
  write_file_atomic(fs::path(dir) / "tokenizer.json", synthetic.tokenizer_json);
  write_file_atomic(fs::path(dir) / "tokenizer_config.json", synthetic.tokenizer_config_json);
  std::printf("wrote synthetic tokenizer (%d tokens) to %s\n", synthetic.vocab_size, dir.c_str());
}

// Each line of `file`: a JSON string to encode (prints a JSON array of ids)
// or a JSON array of ids to decode (prints a JSON string). One load serves
// every line, so tests can compare hundreds of strings cheaply.
void run_batch(const Tokenizer& tokenizer, const std::string& file, const EncodeOptions& options) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("cannot open batch file {}", file);
  std::string line, out;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("{}:{}: not JSON: {}", file, line_no, e.what());
    }
    try {
      if (value.is_string()) {
        out = nlohmann::json(tokenizer.encode(value.get_ref<const std::string&>(), options)).dump();
      } else if (value.is_array()) {
        out = json_text(tokenizer.decode(value.get<std::vector<int32_t>>()));
      } else {
        fail("expected a JSON string (to encode) or an array of ids (to decode)");
      }
    } catch (const Error& e) {
      fail("{}:{}: {}", file, line_no, e.what());
    } catch (const nlohmann::json::exception& e) {
      fail("{}:{}: {}", file, line_no, e.what());
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
  }
}

void run(const TokenizeArgs& args) {
  if (!args.write_synthetic_dir.empty()) {
    write_synthetic(args.write_synthetic_dir, args.synthetic_specials);
    return;
  }
  if (args.model.empty()) fail("tokenize: a model (tokenizer.json or model directory) is required");
  Tokenizer tokenizer = Tokenizer::load(resolve_tokenizer_json(args.model));
  EncodeOptions options;
  options.allow_special = !args.no_special;
  // Add BOS exactly when the tokenizer's own post_processor would (Llama 3: yes; Qwen: no BOS
  // exists).
  options.add_bos = tokenizer.post_processor_adds_bos() && !args.no_bos;

  if (!args.batch_file.empty()) {
    run_batch(tokenizer, args.batch_file, options);
    return;
  }
  if (!args.decode_ids.empty()) {
    std::string text = tokenizer.decode(parse_id_list(args.decode_ids));
    if (args.json) {
      std::printf("{\"text\": %s}\n", json_text(text).c_str());
    } else {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fputc('\n', stdout);
    }
    return;
  }
  if (!args.has_text) fail("tokenize: give the text to encode, --decode IDS or --batch FILE");
  std::vector<int32_t> ids = tokenizer.encode(args.text, options);
  if (args.json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : ids) pieces.push_back(tokenizer.token_string(id));
    nlohmann::json out = {{"ids", ids}, {"pieces", pieces}};
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  for (int32_t id : ids) std::printf("%d\t%s\n", id, visible(tokenizer.token_piece(id)).c_str());
  std::printf("%zu tokens\n", ids.size());
}
}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize", "Show how a model's tokenizer splits text (or decode token ids)");
  cmd->add_option("model", args->model,
                  "tokenizer.json, or a directory holding one (Hugging Face or .tern)");
  CLI::Option* text = cmd->add_option("text", args->text, "text to encode");
  cmd->add_flag("--json", args->json,
                "print {\"ids\": [...], \"pieces\": [...]} (pieces as spelled in the vocab)");
  cmd->add_flag("--no-special", args->no_special,
                "tokenize special tokens such as <|im_start|> as plain text");
  cmd->add_flag("--no-bos", args->no_bos,
                "do not add the BOS token even if the tokenizer's post_processor would");
  cmd->add_option("--decode", args->decode_ids, "decode comma-separated token ids to text instead");
  cmd->add_option("--batch", args->batch_file,
                  "JSON Lines file: each line a string to encode or an id array to decode; prints "
                  "one JSON value per line");
  cmd->add_option(
         "--write-synthetic", args->write_synthetic_dir,
         "write the synthetic test tokenizer (tokenizer.json, tokenizer_config.json) to DIR")
      ->group("");  // hidden: for tests
  const std::map<std::string, SyntheticSpecials> families = {
      {"qwen3", SyntheticSpecials::Qwen3},   {"harmony", SyntheticSpecials::Harmony},
      {"mistral", SyntheticSpecials::Mistral}, {"qwen2", SyntheticSpecials::Qwen2},
      {"olmoe", SyntheticSpecials::Olmoe},   {"deepseek_v3", SyntheticSpecials::DeepseekV3},
      {"glm4_moe", SyntheticSpecials::Glm45}, {"gemma4", SyntheticSpecials::Gemma4}};
  cmd->add_option("--synthetic-family", args->synthetic_specials,
                  "with --write-synthetic: whose added tokens and layout (default qwen3)")
      ->transform(CLI::CheckedTransformer(families, CLI::ignore_case))
      ->group("");
  cmd->callback([args, text] {
    args->has_text = text->count() > 0;  // "" is valid text; a missing argument is not
    run(*args);
  });
}

}  // namespace tern::cli
