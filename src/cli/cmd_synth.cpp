// tern synth --arch A --preset P -o DIR: a random-weight model in the real
// Hugging Face layout, for tests and demos.
#include <fmt/format.h>

#include <algorithm>

#include "cli/commands.h"
#include "tern/core/error.h"
#include "tern/core/units.h"
#include "tern/format/architectures.h"
#include "tern/synth/synth.h"

namespace tern::cli {

void add_synth_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "synth", "Write a random-weight model in Hugging Face layout (config.json, safetensors, tokenizer)");
  auto opt = std::make_shared<SynthOptions>();
  auto dtype = std::make_shared<std::string>("bf16");
  auto shard = std::make_shared<std::string>("4G");
  struct IntFlag {
    const char* flag;
    const char* field;
    const char* help;
  };
  static const IntFlag int_flags[] = {
      {"--layers", "num_hidden_layers", "Number of layers"},
      {"--experts", "num_experts", "Routed experts per MoE layer"},
      {"--top-k", "num_experts_per_tok", "Experts per token"},
      {"--hidden", "hidden_size", "Hidden size"},
      {"--moe-ffn", "moe_intermediate_size", "Expert intermediate size"},
      {"--ffn", "intermediate_size", "Dense MLP intermediate size"},
      {"--vocab", "vocab_size", "Vocabulary size (>= the tokenizer's)"},
      {"--heads", "num_attention_heads", "Attention heads"},
      {"--kv-heads", "num_key_value_heads", "Key/value heads"},
      {"--head-dim", "head_dim", "Head dimension"},
      {"--max-position", "max_position_embeddings", "Context length"},
      {"--decoder-sparse-step", "decoder_sparse_step", "Every n-th layer is MoE"},
      {"--sliding-window", "sliding_window", "Keys a sliding-window layer attends to (gpt_oss; mixtral: every layer)"},
  };
  auto ints = std::make_shared<std::map<std::string, int64_t>>();
  auto mlp_only = std::make_shared<std::vector<int64_t>>();
  auto tie = std::make_shared<bool>(false);
  auto no_norm_topk = std::make_shared<bool>(false);
  auto attn_bias = std::make_shared<bool>(false);
  cmd->add_option("--arch", opt->architecture, "Architecture (Hugging Face model_type)")->default_val("qwen3_moe");
  cmd->add_option("--preset", opt->preset,
                  "qwen3_moe: tiny | small | demo | qwen3-30b-a3b; gpt_oss: tiny | gpt-oss-20b | gpt-oss-120b")
      ->default_val("tiny");
  cmd->add_option("-o,--output", opt->output, "Output directory")->required();
  cmd->add_option("--seed", opt->seed, "Random seed")->default_val(0);
  auto* dtype_opt = cmd->add_option("--dtype", *dtype,
                                    "bf16 | f32 | f16: float tensors (gpt_oss: given alone, selects --layout float)")
                        ->default_val("bf16");
  cmd->add_option("--layout", opt->layout,
                  "Checkpoint layout, for architectures published in several (gpt_oss: mxfp4 as released, the "
                  "default; float: dequantized experts)");
  cmd->add_option("--fp8", opt->fp8_block,
                  "Write the decoder's projections as block-scaled FP8 (F8_E4M3 + F32 *_scale_inv per NxN "
                  "block) as DeepSeek-V3 and the -FP8 releases ship them; DeepSeek uses 128")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  cmd->add_option("--tokenizer", opt->tokenizer, "Use this tokenizer.json instead of the built-in small BPE");
  cmd->add_option("--shard-size", *shard, "Maximum safetensors shard size (e.g. 2G)")->default_val("4G");
  for (const auto& f : int_flags) {
    cmd->add_option_function<int64_t>(
        f.flag, [ints, field = f.field](const int64_t& v) { (*ints)[field] = v; }, f.help);
  }
  cmd->add_option("--mlp-only-layers", *mlp_only, "Layers with a dense MLP instead of experts")->delimiter(',');
  cmd->add_flag("--tie-embeddings", *tie, "Share embedding and lm_head weights");
  cmd->add_flag("--no-norm-topk", *no_norm_topk, "Do not renormalise the top-k router weights");
  cmd->add_flag("--attention-bias", *attn_bias, "Add q/k/v/o biases");
  auto sets = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--set", *sets,
                  "Set any config.json field: FIELD=JSON, e.g. --set clip_qkv=0.5 --set norm_topk_prob=true "
                  "(repeatable; applied after the other flags)");
  cmd->add_flag("--force", opt->force, "Replace the output if it exists");
  cmd->add_flag("-q,--quiet", opt->quiet, "No progress output");
  cmd->callback([=] {
    if (*dtype == "bf16") opt->dtype = DType::BF16;
    else if (*dtype == "f32") opt->dtype = DType::F32;
    else if (*dtype == "f16") opt->dtype = DType::F16;
    else fail("--dtype must be bf16, f32 or f16, not '{}'", *dtype);
    opt->shard_bytes = parse_size(*shard);
    if (opt->shard_bytes == 0) fail("--shard-size must be positive");
    for (const auto& [field, v] : *ints) opt->overrides[field] = v;
    if (!mlp_only->empty()) opt->overrides["mlp_only_layers"] = *mlp_only;
    if (*tie) opt->overrides["tie_word_embeddings"] = true;
    if (*no_norm_topk) opt->overrides["norm_topk_prob"] = false;
    if (*attn_bias) opt->overrides["attention_bias"] = true;
    for (const std::string& set : *sets) {
      const size_t eq = set.find('=');
      if (eq == std::string::npos || eq == 0) fail("--set takes FIELD=JSON, not '{}'", set);
      const auto value = nlohmann::json::parse(set.substr(eq + 1), nullptr, /*allow_exceptions=*/false);
      if (value.is_discarded()) fail("--set {}: '{}' is not a JSON value", set.substr(0, eq), set.substr(eq + 1));
      opt->overrides[set.substr(0, eq)] = value;
    }
    if (opt->layout.empty() && dtype_opt->count() > 0) {
      // --dtype alone asks for float weights: the float layout where there is one.
      const auto& layouts = find_arch(opt->architecture).layouts;
      if (std::find(layouts.begin(), layouts.end(), "float") != layouts.end() && layouts.front() != "float")
        opt->layout = "float";
    }
    SynthResult r = synthesize_model(*opt);
    const std::string layout =
        r.config.contains("tern_synthetic") && r.config["tern_synthetic"].contains("layout")
            ? fmt::format(", {} layout", r.config["tern_synthetic"]["layout"].get<std::string>())
            : "";
    fmt::print("wrote {} ({} {}{}, {} tensors in {} shard(s), {}); weights are random\n", opt->output.string(),
               opt->architecture, opt->preset, layout, r.num_tensors, r.num_shards, format_bytes(r.total_bytes));
  });
}

}  // namespace tern::cli
