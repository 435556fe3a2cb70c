#include "tern/format/config_reader.h"

#include <cmath>
#include <limits>

#include "tern/core/error.h"
#include "tern/core/json.h"
#include "tern/format/model_config.h"

namespace tern {

using nlohmann::json;

bool ConfigReader::has(const std::string& key) const {
  return json_.contains(key) && !json_[key].is_null();
}

void ConfigReader::invalid(const std::string& key, const std::string& message) const {
  fail("{}: field '{}' {}", source_, key, message);
}

int64_t ConfigReader::get_int(const std::string& key) const {
  if (!has(key)) invalid(key, fmt::format("is missing (required for {})", arch_));
  const json& v = json_[key];
  if (!v.is_number_integer()) invalid(key, fmt::format("must be an integer, got {}", json_excerpt(v)));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    invalid(key, fmt::format("is out of range, got {}", v.get<uint64_t>()));
  return v.get<int64_t>();
}

int64_t ConfigReader::get_int(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double ConfigReader::get_double(const std::string& key) const {
  if (!has(key)) invalid(key, fmt::format("is missing (required for {})", arch_));
  const json& v = json_[key];
  if (!v.is_number()) invalid(key, fmt::format("must be a number, got {}", json_excerpt(v)));
  return v.get<double>();
}

double ConfigReader::get_double(const std::string& key, double fallback) const {
  return has(key) ? get_double(key) : fallback;
}

bool ConfigReader::get_bool(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const json& v = json_[key];
  if (!v.is_boolean()) invalid(key, fmt::format("must be true or false, got {}", json_excerpt(v)));
  return v.get<bool>();
}

std::vector<int64_t> ConfigReader::get_int_list(const std::string& key) const {
  std::vector<int64_t> out;
  if (!has(key)) return out;
  const json& v = json_[key];
  if (!v.is_array()) invalid(key, fmt::format("must be a list of integers, got {}", json_excerpt(v)));
  for (const auto& e : v) {
    if (!e.is_number_integer() ||
        (e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
      invalid(key, fmt::format("must be a list of integers, got {}", json_excerpt(v)));
    out.push_back(e.get<int64_t>());
  }
  return out;
}

std::string ConfigReader::get_string(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  const json& v = json_[key];
  if (!v.is_string()) invalid(key, fmt::format("must be a string, got {}", json_excerpt(v)));
  return v.get<std::string>();
}

std::vector<std::string> ConfigReader::get_string_list(const std::string& key) const {
  std::vector<std::string> out;
  if (!has(key)) return out;
  const json& v = json_[key];
  if (!v.is_array()) invalid(key, fmt::format("must be a list of strings, got {}", json_excerpt(v)));
  for (const auto& e : v) {
    if (!e.is_string()) invalid(key, fmt::format("must be a list of strings, got {}", json_excerpt(e)));
    out.push_back(e.get<std::string>());
  }
  return out;
}

void ConfigReader::require_positive(const std::string& key, int64_t value) const {
  if (value <= 0) invalid(key, fmt::format("must be positive, got {}", value));
}

void ConfigReader::require_range(const std::string& key, int64_t value, int64_t lo, int64_t hi) const {
  if (value < lo || value > hi) invalid(key, fmt::format("must be in [{}, {}], got {}", lo, hi, value));
}

void ConfigReader::require_finite(const std::string& key, double value, double lo_exclusive, double hi) const {
  if (!std::isfinite(value) || !(value > lo_exclusive) || value > hi)
    invalid(key, fmt::format("must be a finite number in ({}, {}], got {}", lo_exclusive, hi, value));
}

namespace {

RopeScalingConfig read_rope_scaling(const ConfigReader& r) {
  const json& j = r.raw()["rope_scaling"];
  if (!j.is_object()) r.invalid("rope_scaling", "must be an object or null");
  ConfigReader rr(j, r.source() + " rope_scaling", "rope_scaling");
  RopeScalingConfig s;
  if (rr.has("rope_type") && j["rope_type"].is_string()) s.type = j["rope_type"].get<std::string>();
  else if (rr.has("type") && j["type"].is_string()) s.type = j["type"].get<std::string>();
  else r.invalid("rope_scaling", "has no 'type' or 'rope_type'");
  s.factor = rr.get_double("factor", 1.0);
  s.original_max_position_embeddings = rr.get_int("original_max_position_embeddings", 0);
  rr.require_range("original_max_position_embeddings", s.original_max_position_embeddings, 0,
                   config_limits::kMaxPositions);
  s.beta_fast = rr.get_double("beta_fast", 32.0);
  s.beta_slow = rr.get_double("beta_slow", 1.0);
  s.mscale = rr.get_double("mscale", 1.0);
  s.mscale_all_dim = rr.get_double("mscale_all_dim", 0.0);
  s.low_freq_factor = rr.get_double("low_freq_factor", 1.0);
  s.high_freq_factor = rr.get_double("high_freq_factor", 4.0);
  s.truncate = rr.get_bool("truncate", true);
  static const char* known[] = {"default", "linear", "dynamic", "yarn", "llama3", "longrope"};
  bool ok = false;
  for (const char* k : known) ok = ok || s.type == k;
  if (!ok) r.invalid("rope_scaling", fmt::format("has unsupported type {}", json_excerpt(s.type)));
  rr.require_finite("factor", s.factor, 0.0, 1e6);
  const std::pair<const char*, double> finite_fields[] = {
      {"beta_fast", s.beta_fast}, {"beta_slow", s.beta_slow}, {"mscale", s.mscale},
      {"mscale_all_dim", s.mscale_all_dim}, {"low_freq_factor", s.low_freq_factor},
      {"high_freq_factor", s.high_freq_factor}};
  for (const auto& [key, value] : finite_fields)
    if (!std::isfinite(value)) rr.invalid(key, fmt::format("must be finite, got {}", value));
  return s;
}

}  // namespace

void read_sliding_layer_types(const ConfigReader& r, ModelConfig& cfg, bool (*default_sliding)(int64_t layer)) {
  constexpr std::string_view kSliding = "sliding_attention", kFull = "full_attention";
  cfg.sliding_layers.assign(static_cast<size_t>(cfg.num_layers), false);
  if (!r.has("layer_types")) {
    for (int64_t l = 0; l < cfg.num_layers; ++l) cfg.sliding_layers[static_cast<size_t>(l)] = default_sliding(l);
    return;
  }
  const std::vector<std::string> types = r.get_string_list("layer_types");
  if (static_cast<int64_t>(types.size()) != cfg.num_layers)
    r.invalid("layer_types", fmt::format("has {} entries but num_hidden_layers is {}", types.size(), cfg.num_layers));
  for (size_t l = 0; l < types.size(); ++l) {
    if (types[l] != kSliding && types[l] != kFull)
      r.invalid("layer_types",
                fmt::format("entry {} is {}; expected \"{}\" or \"{}\"", l, json_excerpt(types[l]), kSliding, kFull));
    cfg.sliding_layers[l] = types[l] == kSliding;
  }
}

void read_decoder_fields(const ConfigReader& r, ModelConfig& cfg) {
  namespace lim = config_limits;
  cfg.vocab_size = r.get_int("vocab_size");
  cfg.hidden_size = r.get_int("hidden_size");
  cfg.num_layers = r.get_int("num_hidden_layers");
  cfg.num_heads = r.get_int("num_attention_heads");
  r.require_range("vocab_size", cfg.vocab_size, 1, lim::kMaxVocab);
  r.require_range("hidden_size", cfg.hidden_size, 1, lim::kMaxHidden);
  r.require_range("num_hidden_layers", cfg.num_layers, 1, lim::kMaxLayers);
  r.require_range("num_attention_heads", cfg.num_heads, 1, lim::kMaxHeads);
  cfg.num_kv_heads = r.get_int("num_key_value_heads", cfg.num_heads);
  r.require_range("num_key_value_heads", cfg.num_kv_heads, 1, cfg.num_heads);
  if (cfg.num_heads % cfg.num_kv_heads != 0)
    r.invalid("num_key_value_heads",
              fmt::format("({}) must divide num_attention_heads ({})", cfg.num_kv_heads, cfg.num_heads));
  if (r.has("head_dim")) {
    cfg.head_dim = r.get_int("head_dim");
  } else {
    if (cfg.hidden_size % cfg.num_heads != 0)
      r.invalid("head_dim", "is missing and hidden_size is not divisible by num_attention_heads");
    cfg.head_dim = cfg.hidden_size / cfg.num_heads;
  }
  r.require_range("head_dim", cfg.head_dim, 2, lim::kMaxHeadDim);
  if (cfg.head_dim % 2 != 0) r.invalid("head_dim", fmt::format("must be even for RoPE, got {}", cfg.head_dim));
  cfg.attention_bias = r.get_bool("attention_bias", false);
  cfg.rms_norm_eps = r.get_double("rms_norm_eps", 1e-6);
  r.require_finite("rms_norm_eps", cfg.rms_norm_eps, 0.0, 1.0);
  cfg.rope_theta = r.get_double("rope_theta", 10000.0);
  r.require_finite("rope_theta", cfg.rope_theta, 0.0, 1e15);
  if (r.has("rope_scaling")) cfg.rope_scaling = read_rope_scaling(r);
  cfg.max_position_embeddings = r.get_int("max_position_embeddings", 2048);
  r.require_range("max_position_embeddings", cfg.max_position_embeddings, 1, lim::kMaxPositions);
  cfg.tie_word_embeddings = r.get_bool("tie_word_embeddings", false);
  read_weight_quantization(r, cfg);
}

void read_weight_quantization(const ConfigReader& r, ModelConfig& cfg) {
  if (!r.has("quantization_config")) return;
  const nlohmann::json& q = r.raw()["quantization_config"];
  const std::string method = q.is_object() && q.contains("quant_method") && q["quant_method"].is_string()
                                 ? q["quant_method"].get<std::string>()
                                 : "";
  if (method == "mxfp4") return;  // the architecture's (gpt_oss) to accept or refuse
  if (method != "fp8")
    r.invalid("quantization_config",
              fmt::format("is {}; Tern installs float checkpoints (F32/BF16/F16), fine-grained FP8 (quant_method "
                          "\"fp8\") and gpt-oss's MXFP4 (\"mxfp4\"); convert other quantizations to BF16 first",
                          json_excerpt(q)));
  const std::string fmt_name = q.value("fmt", "e4m3");
  if (fmt_name != "e4m3")
    r.invalid("quantization_config", fmt::format("has fmt {}; Tern reads FP8 weights as e4m3", json_excerpt(fmt_name)));
  if (!q.contains("weight_block_size") || !q["weight_block_size"].is_array() || q["weight_block_size"].size() != 2 ||
      !q["weight_block_size"][0].is_number_integer() || !q["weight_block_size"][1].is_number_integer())
    r.invalid("quantization_config",
              fmt::format("has weight_block_size {}; Tern reads block-scaled FP8 ([rows, cols], e.g. [128, 128])",
                          json_excerpt(q.value("weight_block_size", nlohmann::json()))));
  cfg.fp8.rows = q["weight_block_size"][0].get<int64_t>();
  cfg.fp8.cols = q["weight_block_size"][1].get<int64_t>();
  constexpr int64_t kMaxBlock = 1 << 16;
  if (cfg.fp8.rows < 1 || cfg.fp8.cols < 1 || cfg.fp8.rows > kMaxBlock || cfg.fp8.cols > kMaxBlock)
    r.invalid("quantization_config",
              fmt::format("has weight_block_size [{}, {}]; each must be in [1, {}]", cfg.fp8.rows, cfg.fp8.cols, kMaxBlock));
}

void read_norm_rope_fields(const ConfigReader& r, ModelConfig& cfg, double rms_norm_eps, double rope_theta,
                           int64_t max_position_embeddings) {
  cfg.rms_norm_eps = r.get_double("rms_norm_eps", rms_norm_eps);
  r.require_finite("rms_norm_eps", cfg.rms_norm_eps, 0.0, 1.0);
  cfg.rope_theta = r.get_double("rope_theta", rope_theta);
  r.require_finite("rope_theta", cfg.rope_theta, 0.0, 1e15);
  cfg.max_position_embeddings = r.get_int("max_position_embeddings", max_position_embeddings);
  r.require_range("max_position_embeddings", cfg.max_position_embeddings, 1, config_limits::kMaxPositions);
}

void require_plain_rope_and_silu(const ConfigReader& r, ModelConfig& cfg, std::string_view family) {
  if (cfg.rope_scaling) {
    if (cfg.rope_scaling->type != "default")
      r.invalid("rope_scaling", fmt::format("has type {}; Tern runs {} without RoPE scaling",
                                            json_excerpt(cfg.rope_scaling->type), family));
    cfg.rope_scaling.reset();
  }
  const std::string act = r.get_string("hidden_act", "silu");
  if (act != "silu") r.invalid("hidden_act", fmt::format("is {}; {} uses silu", json_excerpt(act), family));
}

void read_qwen_moe_fields(const ConfigReader& r, ModelConfig& cfg) {
  namespace lim = config_limits;
  cfg.intermediate_size = r.get_int("intermediate_size");
  r.require_range("intermediate_size", cfg.intermediate_size, 1, lim::kMaxFfn);
  cfg.num_experts = r.get_int("num_experts");
  r.require_range("num_experts", cfg.num_experts, 0, lim::kMaxExperts);
  cfg.num_experts_per_tok = r.get_int("num_experts_per_tok");
  cfg.moe_intermediate_size = r.get_int("moe_intermediate_size");
  cfg.norm_topk_prob = r.get_bool("norm_topk_prob", false);
  cfg.decoder_sparse_step = r.get_int("decoder_sparse_step", 1);
  cfg.mlp_only_layers = r.get_int_list("mlp_only_layers");
  // Bounded even without experts (a config with num_experts 0 still sizes
  // scratch estimates from them).
  r.require_range("num_experts_per_tok", cfg.num_experts_per_tok, 0, lim::kMaxExperts);
  r.require_range("moe_intermediate_size", cfg.moe_intermediate_size, 0, lim::kMaxFfn);
  if (cfg.num_experts > 0) {
    r.require_positive("num_experts_per_tok", cfg.num_experts_per_tok);
    r.require_range("moe_intermediate_size", cfg.moe_intermediate_size, 1, lim::kMaxFfn);
    if (cfg.num_experts_per_tok > cfg.num_experts)
      r.invalid("num_experts_per_tok", fmt::format("({}) exceeds num_experts ({})",
                                                   cfg.num_experts_per_tok, cfg.num_experts));
  }
  r.require_range("decoder_sparse_step", cfg.decoder_sparse_step, 1, lim::kMaxLayers);
  if (static_cast<int64_t>(cfg.mlp_only_layers.size()) > cfg.num_layers)
    r.invalid("mlp_only_layers", fmt::format("lists {} layers but the model has {}", cfg.mlp_only_layers.size(),
                                             cfg.num_layers));
  for (int64_t l : cfg.mlp_only_layers)
    if (l < 0 || l >= cfg.num_layers)
      r.invalid("mlp_only_layers", fmt::format("names layer {} but the model has {} layers", l, cfg.num_layers));
}

void read_grouped_moe_fields(const ConfigReader& r, ModelConfig& cfg, const GroupedMoeDefaults& d) {
  namespace lim = config_limits;
  const std::string family = cfg.architecture.empty() ? "this architecture" : cfg.architecture;
  // Routed experts behind the first first_k_dense_replace dense layers.
  cfg.num_experts = r.get_int("n_routed_experts", d.experts);
  r.require_range("n_routed_experts", cfg.num_experts, 1, lim::kMaxExperts);
  cfg.num_experts_per_tok = r.get_int("num_experts_per_tok", d.top_k);
  r.require_range("num_experts_per_tok", cfg.num_experts_per_tok, 1, cfg.num_experts);
  cfg.moe_intermediate_size = r.get_int("moe_intermediate_size");
  r.require_range("moe_intermediate_size", cfg.moe_intermediate_size, 1, lim::kMaxFfn);
  const int64_t first_dense = r.get_int("first_k_dense_replace", d.first_dense);
  r.require_range("first_k_dense_replace", first_dense, 0, cfg.num_layers);
  cfg.decoder_sparse_step = 1;
  cfg.mlp_only_layers.clear();
  for (int64_t l = 0; l < first_dense; ++l) cfg.mlp_only_layers.push_back(l);
  // transformers ignores moe_layer_freq (every layer from first_k_dense_replace
  // on is MoE); a config asking for another spacing would not load there either.
  if (r.get_int("moe_layer_freq", 1) != 1)
    r.invalid("moe_layer_freq", fmt::format("is not 1; {} has an MoE block in every layer after the dense ones", family));
  if (first_dense > 0) {
    cfg.intermediate_size = r.get_int("intermediate_size");
    r.require_range("intermediate_size", cfg.intermediate_size, 1, lim::kMaxFfn);
  }
  const int64_t shared = r.get_int("n_shared_experts", d.shared);
  r.require_range("n_shared_experts", shared, 0, 64);
  cfg.shared_expert_intermediate_size = shared * cfg.moe_intermediate_size;
  r.require_range("moe_intermediate_size x n_shared_experts", cfg.shared_expert_intermediate_size, 0, lim::kMaxFfn);
  cfg.shared_expert_gated = false;

  // The router: noaux_tc, the only top-k method transformers runs for these.
  const std::string method = r.get_string("topk_method", "noaux_tc");
  if (method != "noaux_tc")
    r.invalid("topk_method", fmt::format("is {}; {} routes with noaux_tc", json_excerpt(method), family));
  const std::string scoring = r.get_string("scoring_func", "sigmoid");
  if (scoring != "sigmoid")
    r.invalid("scoring_func", fmt::format("is {}; {} scores experts with a sigmoid", json_excerpt(scoring), family));
  cfg.router_scoring = "sigmoid_grouped";
  cfg.n_group = r.get_int("n_group", d.n_group);
  r.require_range("n_group", cfg.n_group, 1, cfg.num_experts);
  if (cfg.num_experts % cfg.n_group != 0 || cfg.num_experts / cfg.n_group < 2)
    r.invalid("n_group", fmt::format("({}) must divide n_routed_experts ({}) into groups of at least 2 (a group "
                                     "scores by its two best experts)",
                                     cfg.n_group, cfg.num_experts));
  cfg.topk_group = r.get_int("topk_group", d.topk_group);
  r.require_range("topk_group", cfg.topk_group, 1, cfg.n_group);
  if (cfg.num_experts_per_tok > cfg.topk_group * (cfg.num_experts / cfg.n_group))
    r.invalid("num_experts_per_tok", fmt::format("({}) exceeds the experts of topk_group ({}) groups of {}",
                                                 cfg.num_experts_per_tok, cfg.topk_group,
                                                 cfg.num_experts / cfg.n_group));
  cfg.norm_topk_prob = r.get_bool("norm_topk_prob", true);
  cfg.routed_scaling_factor = r.get_double("routed_scaling_factor", d.routed_scaling);
  r.require_finite("routed_scaling_factor", cfg.routed_scaling_factor, 0.0, 1e6);
}

void check_config_products(const ConfigReader& r, const ModelConfig& cfg) {
  namespace lim = config_limits;
  // Each factor is already range-checked, so these products cannot overflow;
  // checked_mul keeps that true if a limit is ever raised.
  const auto width = static_cast<int64_t>(checked_mul(static_cast<uint64_t>(cfg.num_heads),
                                                      static_cast<uint64_t>(cfg.head_dim), "attention width"));
  if (width > lim::kMaxAttentionWidth)
    r.invalid("head_dim", fmt::format("x num_attention_heads = {} exceeds the limit {}", width, lim::kMaxAttentionWidth));
  const auto records = static_cast<int64_t>(checked_mul(static_cast<uint64_t>(cfg.num_moe_layers()),
                                                        static_cast<uint64_t>(cfg.num_experts), "expert records"));
  if (records > lim::kMaxExpertRecords)
    r.invalid("num_experts", fmt::format("({}) x MoE layers ({}) = {} expert records exceeds the limit {}",
                                         cfg.num_experts, cfg.num_moe_layers(), records, lim::kMaxExpertRecords));
}

}  // namespace tern
