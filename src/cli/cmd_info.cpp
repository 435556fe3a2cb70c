// tern info <model.tern> [--json]: architecture and sizes of an installed model.
#include <fmt/format.h>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/commands.h"
#include "tern/core/units.h"
#include "tern/format/architectures.h"
#include "tern/format/tern_model.h"

namespace tern::cli {

namespace {

std::string params_str(uint64_t n) {
  if (n >= 1000000000ull) return fmt::format("{:.2f}B", static_cast<double>(n) / 1e9);
  if (n >= 1000000ull) return fmt::format("{:.2f}M", static_cast<double>(n) / 1e6);
  if (n >= 1000ull) return fmt::format("{:.1f}K", static_cast<double>(n) / 1e3);
  return std::to_string(n);
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show the architecture and sizes of a .tern model");
  auto path = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  cmd->add_option("model", *path, ".tern model directory")->required();
  cmd->add_flag("--json", *as_json, "Print JSON");
  cmd->callback([path, as_json] {
    TernModel model = TernModel::open(*path);
    const ModelConfig& c = model.config();
    ModelSummary s = model.summary();
    std::set<std::string_view> format_set;
    for (const auto& l : model.manifest().expert_layers)
      for (const auto& sec : l.sections) format_set.insert(format_name(sec.format));
    std::string formats = fmt::format("{}", fmt::join(format_set, ","));
    int64_t sliding = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) sliding += c.layer_is_sliding(l) ? 1 : 0;
    const nlohmann::json& source = model.manifest().source;
    const std::string layout =
        source.is_object() && source.contains("layout") && source["layout"].is_string() ? source["layout"].get<std::string>() : "";
    if (*as_json) {
      nlohmann::json j = {
          {"path", *path},
          {"architecture", c.architecture},
          {"layers", c.num_layers},
          {"moe_layers", s.moe_layers},
          {"hidden_size", c.hidden_size},
          {"vocab_size", c.vocab_size},
          {"experts_per_layer", s.experts_per_layer},
          {"experts_per_token", s.experts_per_token},
          {"params", {{"total", s.total_params}, {"active_per_token", s.active_params},
                      {"trunk", s.trunk_params}, {"experts", s.expert_params}}},
          {"bytes", {{"trunk", s.trunk_bytes}, {"experts", s.expert_bytes},
                     {"expert_reads_per_token_uncached", s.expert_bytes_per_token}}},
          {"expert_format", formats},
          {"attention", {{"heads", c.num_heads}, {"kv_heads", c.num_kv_heads}, {"head_dim", c.head_dim},
                         {"sliding_window", c.sliding_window}, {"sliding_layers", sliding},
                         {"sinks", c.attention_sinks}}},
          {"linear_attention",
           c.linear_attention.present()
               ? nlohmann::json{{"layers", [&] {
                         std::vector<int64_t> ls;
                         for (int64_t l = 0; l < c.num_layers; ++l)
                           if (c.layer_is_linear(l)) ls.push_back(l);
                         return ls;
                       }()},
                      {"key_heads", c.linear_attention.num_key_heads},
                      {"value_heads", c.linear_attention.num_value_heads},
                      {"key_head_dim", c.linear_attention.key_head_dim},
                      {"value_head_dim", c.linear_attention.value_head_dim},
                      {"conv_kernel", c.linear_attention.conv_kernel}}
               : nlohmann::json(nullptr)},
          {"source_layout", layout},
          {"created_by", model.manifest().created_by}};
      if (c.global_head_dim > 0)  // Gemma 4: the full layers' own shape; absent for one-shape models
        j["attention"]["full_layers"] = {{"layers", c.num_layers - sliding},
                                         {"head_dim", c.global_head_dim},
                                         {"kv_heads", c.layer_kv_heads(c.num_layers - 1)},
                                         {"values_are_keys", c.attention_k_eq_v},
                                         {"rotary_pairs", c.full_rotary_pairs}};
      fmt::print("{}\n", j.dump(2));
      return;
    }
    fmt::print("model:            {}\n", *path);
    fmt::print("architecture:     {} ({} layers, {} MoE; hidden {}, vocab {})\n", c.architecture,
               c.num_layers, s.moe_layers, c.hidden_size, c.vocab_size);
    fmt::print("attention:        {} heads, {} kv heads, head_dim {}{}{}\n", c.num_heads, c.num_kv_heads, c.head_dim,
               sliding > 0 ? fmt::format(", sliding window {} on {} of {} layers", c.sliding_window, sliding, c.num_layers)
                           : "",
               c.attention_sinks ? ", sinks" : "");
    if (c.global_head_dim > 0)  // Gemma 4: the full layers' own shape (the last layer is always full)
      fmt::print("full layers:      {} of {}: head_dim {}, {} kv heads{}, proportional RoPE on {} of {} pairs\n",
                 c.num_layers - sliding, c.num_layers, c.global_head_dim, c.layer_kv_heads(c.num_layers - 1),
                 c.attention_k_eq_v ? ", values = keys" : "", c.full_rotary_pairs, c.global_head_dim / 2);
    if (c.linear_attention.present()) {
      const auto& la = c.linear_attention;
      int64_t linear = 0;
      for (int64_t l = 0; l < c.num_layers; ++l) linear += c.layer_is_linear(l) ? 1 : 0;
      fmt::print("linear attention: {} of {} layers, Gated DeltaNet: {} key / {} value heads of {} / {}, conv {}; "
                 "the others gated full attention\n",
                 linear, c.num_layers, la.num_key_heads, la.num_value_heads, la.key_head_dim, la.value_head_dim,
                 la.conv_kernel);
    }
    fmt::print("experts:          {} per layer, {} per token, format {}{}\n", s.experts_per_layer,
               s.experts_per_token, formats.empty() ? "-" : formats,
               layout.empty() || find_arch(c.architecture).layouts.size() < 2
                   ? ""
                   : fmt::format(" (installed from the {} layout)", layout));
    fmt::print("parameters:       {} total, {} active per token\n", params_str(s.total_params),
               params_str(s.active_params));
    fmt::print("trunk (resident): {}\n", format_bytes(s.trunk_bytes));
    fmt::print("experts (disk):   {}\n", format_bytes(s.expert_bytes));
    fmt::print("read per token:   {} of experts if nothing is cached\n", format_bytes(s.expert_bytes_per_token));
  });
}

}  // namespace tern::cli
