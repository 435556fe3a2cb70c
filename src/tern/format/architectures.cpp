#include "tern/format/architectures.h"

#include "tern/core/error.h"
#include "tern/format/safetensors.h"

namespace tern {

// One accessor per architecture, each defined in its arch_<name>.cpp.
const ArchSpec& qwen3_moe_arch();
const ArchSpec& gpt_oss_arch();
const ArchSpec& mixtral_arch();
const ArchSpec& olmoe_arch();
const ArchSpec& qwen2_moe_arch();
const ArchSpec& deepseek_v3_arch();
const ArchSpec& glm4_moe_arch();
const ArchSpec& qwen3_next_arch();
const ArchSpec& gemma4_arch();
const ArchSpec& gemma4_text_arch();

namespace {

const std::vector<const ArchSpec*>& registry() {
  static const std::vector<const ArchSpec*> archs = {&qwen3_moe_arch(), &gpt_oss_arch(), &mixtral_arch(), &olmoe_arch(),
                                                     &qwen2_moe_arch(), &deepseek_v3_arch(),
                                                     &glm4_moe_arch(), &qwen3_next_arch(), &gemma4_arch(),
                                                     &gemma4_text_arch()};
  return archs;
}

}  // namespace

std::string dim_fields_str(const TensorDecl& decl) {
  return fmt::format("[{}]", fmt::join(decl.dim_fields, ", "));
}

std::string dim_fields_str(const SectionDecl& decl) {
  return fmt::format("[{}]", fmt::join(decl.dim_fields, ", "));
}

size_t ArchSpec::layout_index(std::string_view name) const {
  for (size_t i = 0; i < layouts.size(); ++i)
    if (layouts[i] == name) return i;
  fail("{} checkpoints have no layout '{}'; layouts: {}", model_type, printable(name), fmt::join(layouts, ", "));
}

DeclIndex index_decls(std::span<const TensorDecl> tensors) {
  DeclIndex index;
  index.reserve(tensors.size());
  for (const TensorDecl& t : tensors) index.emplace(t.name, &t);
  return index;
}

SourceGeometry section_source_geometry(const SectionDecl& s, const DeclIndex& tensors) {
  const std::string what = fmt::format("expert section '{}' of (layer {}, expert {})", s.name, s.layer, s.expert);
  auto find = [&](const std::string& name) -> const TensorDecl* {
    auto it = tensors.find(name);
    if (it == tensors.end()) fail("{}: source tensor '{}' is not declared", what, name);
    if (!it->second->is_expert) fail("{}: source tensor '{}' is not an expert tensor", what, name);
    return it->second;
  };
  const SectionSource& src = s.source;
  SourceGeometry g;
  g.tensor = find(src.tensor);
  std::vector<int64_t> shape = g.tensor->shape;
  if (src.expert_index >= 0) {
    if (shape.size() < 2 || src.expert_index >= shape[0])
      fail("{}: expert index {} outside '{}' {}", what, src.expert_index, src.tensor, shape_str(shape));
    g.slices = shape[0];
    shape.erase(shape.begin());
  }
  switch (g.tensor->encoding) {
    case TensorEncoding::Float:
      if (!src.scales.empty()) fail("{}: a float source has no scales", what);
      if (shape.size() == 1) shape.push_back(1);  // a vector is [n, 1]
      if (shape.size() != 2) fail("{}: source '{}' is not a matrix or vector per slice", what, src.tensor);
      g.out = shape[src.transposed ? 1 : 0];
      g.in = shape[src.transposed ? 0 : 1];
      break;
    case TensorEncoding::Mxfp4Blocks: {
      g.scales = find(src.scales);
      if (g.scales->encoding != TensorEncoding::Mxfp4Scales) fail("{}: '{}' is not MXFP4 scales", what, src.scales);
      if (src.transposed) fail("{}: MXFP4 blocks are [out, in]; they cannot be transposed", what);
      if (shape.size() != 3 || shape[2] != 16) fail("{}: MXFP4 blocks '{}' are not [rows, in / 32, 16]", what, src.tensor);
      std::vector<int64_t> want = g.tensor->shape;
      want.pop_back();
      if (g.scales->shape != want)
        fail("{}: MXFP4 scales {} do not match blocks {}", what, shape_str(g.scales->shape), shape_str(g.tensor->shape));
      g.out = shape[0];
      g.in = shape[1] * 32;
      break;
    }
    case TensorEncoding::Mxfp4Scales:
      fail("{}: source '{}' is MXFP4 scales; name the blocks as the source", what, src.tensor);
  }
  const bool vector = s.shape.size() == 1;
  if (s.shape.empty() || s.shape.size() > 2) fail("{}: shape {} is not a matrix or vector", what, shape_str(s.shape));
  const int64_t rows = s.shape[0], cols = vector ? 1 : s.shape[1];
  if (cols != g.in)
    fail("{}: rows of {} elements, but '{}' gives rows of {}", what, cols, src.tensor, g.in);
  if (src.row_start < 0 || src.row_step < 1 || rows < 1 || src.row_start + (rows - 1) * src.row_step >= g.out)
    fail("{}: rows {} + {} x {} lie outside the {} rows of '{}'", what, src.row_start, rows - 1, src.row_step,
         g.out, src.tensor);
  return g;
}

std::vector<std::string_view> supported_architectures() {
  std::vector<std::string_view> names;
  for (const ArchSpec* a : registry()) names.push_back(a->model_type);
  return names;
}

const ArchSpec& find_arch(std::string_view model_type) {
  for (const ArchSpec* a : registry())
    if (a->model_type == model_type) return *a;
  fail("unsupported architecture '{}'; supported: {}", printable(model_type),
       fmt::join(supported_architectures(), ", "));
}

TensorDecl tensor_decl(std::string name, std::vector<int64_t> shape, std::vector<std::string_view> fields,
                       WeightInit init) {
  TensorDecl d;
  d.name = std::move(name);
  d.shape = std::move(shape);
  d.init = init;
  d.dim_fields = std::move(fields);
  return d;
}

void declare_expert_tensor(CheckpointDecls& decls, int64_t layer, int64_t expert, std::string section,
                           std::string tensor, std::vector<int64_t> shape, std::vector<std::string_view> fields) {
  TensorDecl d = tensor_decl(tensor, shape, fields);
  d.is_expert = true;
  decls.tensors.push_back(std::move(d));
  SectionSource source;
  source.tensor = std::move(tensor);
  decls.sections.push_back({layer, expert, std::move(section), std::move(shape), std::move(fields), std::move(source)});
}

void declare_swiglu_experts(CheckpointDecls& decls, const ModelConfig& c, int64_t layer, const std::string& prefix,
                            int64_t ffn, std::string_view ffn_field, ExpertTensorNames names) {
  constexpr std::string_view kHidden = "hidden_size";
  const int64_t H = c.hidden_size;
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const std::string p = fmt::format("{}{}.", prefix, e);
    declare_expert_tensor(decls, layer, e, "gate", fmt::format("{}{}.weight", p, names.gate), {ffn, H},
                          {ffn_field, kHidden});
    declare_expert_tensor(decls, layer, e, "up", fmt::format("{}{}.weight", p, names.up), {ffn, H},
                          {ffn_field, kHidden});
    declare_expert_tensor(decls, layer, e, "down", fmt::format("{}{}.weight", p, names.down), {H, ffn},
                          {kHidden, ffn_field});
  }
}

namespace {

void declare_swiglu_mlp(std::vector<TensorDecl>& t, const std::string& p, int64_t hidden, int64_t I,
                        std::string_view field) {
  constexpr std::string_view kHidden = "hidden_size";
  t.push_back(tensor_decl(p + "gate_proj.weight", {I, hidden}, {field, kHidden}));
  t.push_back(tensor_decl(p + "up_proj.weight", {I, hidden}, {field, kHidden}));
  t.push_back(tensor_decl(p + "down_proj.weight", {hidden, I}, {kHidden, field}));
}

}  // namespace

void declare_grouped_moe_or_dense(std::vector<TensorDecl>& t, const std::string& p, const ModelConfig& c,
                                  int64_t layer) {
  constexpr std::string_view kHidden = "hidden_size", kExperts = "n_routed_experts";
  const int64_t H = c.hidden_size;
  if (!c.layer_is_moe(layer)) {
    declare_swiglu_mlp(t, p, H, c.intermediate_size, "intermediate_size");
    return;
  }
  t.push_back(tensor_decl(p + "gate.weight", {c.num_experts, H}, {kExperts, kHidden}, WeightInit::Router));
  t.push_back(tensor_decl(p + "gate.e_score_correction_bias", {c.num_experts}, {kExperts}, WeightInit::Zeros));
  if (c.shared_expert_intermediate_size > 0)
    declare_swiglu_mlp(t, p + "shared_experts.", H, c.shared_expert_intermediate_size,
                       "moe_intermediate_size x n_shared_experts");
}

void declare_grouped_moe_tail(CheckpointDecls& decls, const ModelConfig& c) {
  constexpr std::string_view kHidden = "hidden_size", kVocab = "vocab_size";
  const int64_t H = c.hidden_size;
  decls.tensors.push_back(tensor_decl("model.norm.weight", {H}, {kHidden}, WeightInit::Ones));
  if (!c.tie_word_embeddings)
    decls.tensors.push_back(tensor_decl("lm_head.weight", {c.vocab_size, H}, {kVocab, kHidden}));
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (c.layer_is_moe(l))
      declare_swiglu_experts(decls, c, l, fmt::format("model.layers.{}.mlp.experts.", l), c.moe_intermediate_size,
                             "moe_intermediate_size");
}

void declare_attention_projections(std::vector<TensorDecl>& t, const std::string& prefix, const ModelConfig& c,
                                   bool qkv_bias, bool o_bias) {
  constexpr std::string_view kHidden = "hidden_size", kQ = "num_attention_heads x head_dim",
                             kKv = "num_key_value_heads x head_dim";
  const int64_t H = c.hidden_size, q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  t.push_back(tensor_decl(prefix + "q_proj.weight", {q_dim, H}, {kQ, kHidden}));
  if (qkv_bias) t.push_back(tensor_decl(prefix + "q_proj.bias", {q_dim}, {kQ}, WeightInit::Zeros));
  t.push_back(tensor_decl(prefix + "k_proj.weight", {kv_dim, H}, {kKv, kHidden}));
  if (qkv_bias) t.push_back(tensor_decl(prefix + "k_proj.bias", {kv_dim}, {kKv}, WeightInit::Zeros));
  t.push_back(tensor_decl(prefix + "v_proj.weight", {kv_dim, H}, {kKv, kHidden}));
  if (qkv_bias) t.push_back(tensor_decl(prefix + "v_proj.bias", {kv_dim}, {kKv}, WeightInit::Zeros));
  t.push_back(tensor_decl(prefix + "o_proj.weight", {H, q_dim}, {kHidden, kQ}));
  if (o_bias) t.push_back(tensor_decl(prefix + "o_proj.bias", {H}, {kHidden}, WeightInit::Zeros));
}

}  // namespace tern
