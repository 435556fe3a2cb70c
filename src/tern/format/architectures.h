#pragma once
// The architecture registry. An architecture is described by data the rest
// of Tern reads: how its config.json parses, which tensors a checkpoint of it
// holds (with shapes and encodings), and which expert-record sections are
// cut out of which checkpoint tensors. Adding an architecture = one
// arch_<name>.cpp plus one line in architectures.cpp; install, synth and
// the manifest check at model open all read the same description, so they
// cannot disagree.
//
// Checkpoint tensors and expert sections are separate lists because they
// are not one to one: Qwen3-MoE (like Mixtral, OLMoE, Qwen2-MoE) ships one
// tensor per expert projection, which is one section; gpt_oss (like Gemma 4)
// ships one tensor per layer fused over all experts, gate and up interleaved
// in it, stored [in, out], and in OpenAI's MXFP4 blocks as released. A
// section names its source tensor, the expert's slice of it, the rows it
// takes, and whether the source is transposed; the installer only executes
// that.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tern/format/config_reader.h"
#include "tern/format/model_config.h"

namespace tern {

// How `tern synth` fills a tensor with random values.
enum class WeightInit {
  Ones,       // norm weights: 1 + small noise
  Linear,     // projections: uniform with std 1/sqrt(fan_in)
  Router,     // router: larger spread so routing is not degenerate
  Embedding,  // embeddings: std 1
  Zeros,      // biases: small (±0.1) so they are exercised
  Logit,      // per-head learned logits (attention sinks): std 1
  // Qwen3-Next's A_log (the log of each value head's decay rate): log A
  // around log 0.1, so exp(g) = exp(-A softplus(a + dt_bias)) keeps a state
  // for several tokens.
  LogDecay,
  // MXFP4 blocks and their scales, drawn together so the values have std
  // ~1/sqrt(fan_in) (random E2M1 codes, scale bytes around the exponent that
  // gives it).
  Mxfp4Blocks,
  Mxfp4Scales,
  // A float tensor holding the dequantized values of an MXFP4 pair of
  // another layout of the same architecture (TensorDecl::twin_*), so both
  // layouts of one seed hold the same weights.
  Mxfp4Dequantized,
};

// What a checkpoint tensor's bytes are.
enum class TensorEncoding : uint8_t {
  Float,  // F32, BF16 or F16 values
  // OpenAI's MXFP4 as released (U8): blocks [..., rows, in / 32, 16], byte b
  // of a block holds E2M1 codes of elements 2b (low nibble) and 2b + 1 (high
  // nibble); scales [..., rows, in / 32] are E8M0 bytes, bias 127.
  Mxfp4Blocks,
  Mxfp4Scales,
};

// One tensor a checkpoint must contain (in one layout of the architecture).
struct TensorDecl {
  std::string name;
  std::vector<int64_t> shape;
  WeightInit init = WeightInit::Linear;
  // A routed-expert source: its values reach experts.bin through the
  // architecture's SectionDecls. Everything else is trunk (one .tern tensor
  // of the same name and shape).
  bool is_expert = false;
  // The config.json fields each dimension comes from ("hidden_size",
  // "num_attention_heads x head_dim"), for errors when a file disagrees.
  std::vector<std::string_view> dim_fields;
  TensorEncoding encoding = TensorEncoding::Float;
  // init == Mxfp4Dequantized: the MXFP4 pair (names in the other layout)
  // whose values this tensor holds slice by slice of dimension 0; transposed
  // when this tensor stores each slice [in, out] and the blocks [out, in].
  std::string twin_blocks, twin_scales;
  bool twin_transposed = false;
};

// A declaration with the fields most tensors set (members assigned one by
// one: GCC 12 warns about designated initializers that leave some out).
TensorDecl tensor_decl(std::string name, std::vector<int64_t> shape, std::vector<std::string_view> fields,
                       WeightInit init = WeightInit::Linear);

// Where one section of an expert record comes from. A section is a matrix
// [out, in] (rows are output features, like every Tern matrix) or a vector
// [n] (seen as [n, 1]). Its source is a checkpoint tensor, or one slice of a
// tensor fused over the experts of a layer; the source (slice) is seen as an
// [out, in] matrix, and the section takes rows row_start, row_start +
// row_step, ... of it (gate/up interleaved in one fused projection: start 0
// and 1, step 2).
struct SectionSource {
  std::string tensor;          // the source TensorDecl (MXFP4: the blocks)
  std::string scales;          // MXFP4 only: the scales TensorDecl
  int64_t expert_index = -1;   // >= 0: slice [expert_index] of dimension 0; -1: the whole tensor
  bool transposed = false;     // Float only: the (slice of the) source is stored [in, out]
  int64_t row_start = 0;
  int64_t row_step = 1;
};

// One section of one expert record: (layer, expert, name), e.g. (3, 17, "gate").
struct SectionDecl {
  int64_t layer = 0;
  int64_t expert = 0;
  std::string name;            // one of ArchSpec::expert_sections
  std::vector<int64_t> shape;  // as stored in the record: [out, in] or [n]
  std::vector<std::string_view> dim_fields;
  SectionSource source;
};

// A checkpoint layout's declarations.
struct CheckpointDecls {
  // Trunk tensors then expert sources, in a stable order.
  std::vector<TensorDecl> tensors;
  // Every expert section: (layer, expert) ascending, sections in record order.
  std::vector<SectionDecl> sections;
};

struct ArchSpec {
  std::string_view model_type;
  // Fills cfg from config.json and validates it; throws tern::Error naming
  // the field. Shared field readers live in config_reader.h.
  void (*parse)(const ConfigReader& config, ModelConfig& cfg);
  // The layouts checkpoints of this architecture come in (gpt_oss: "mxfp4"
  // as released, "float" dequantized). layouts[0] is what synth writes by
  // default. Layouts differ only in expert sources: the trunk tensors and the
  // expert sections (names, shapes) are the same in all.
  std::vector<std::string_view> layouts;
  // Every tensor of a checkpoint in layout `layout` (an index into layouts),
  // and the expert sections cut from them.
  CheckpointDecls (*declare)(const ModelConfig& cfg, size_t layout);
  // The sections of one expert record, in on-disk order.
  std::vector<std::string> expert_sections;

  CheckpointDecls tensors(const ModelConfig& cfg, size_t layout = 0) const { return declare(cfg, layout); }
  // Index of a layout by name; throws listing the layouts.
  size_t layout_index(std::string_view name) const;
};

// Declaration helpers the Llama-style architectures share.
//
// One section of a routed expert shipped as its own checkpoint tensor, taken
// whole (Qwen3-MoE, Mixtral, OLMoE, Qwen2-MoE): declares the expert tensor
// and the section cut from it.
void declare_expert_tensor(CheckpointDecls& decls, int64_t layer, int64_t expert, std::string section,
                           std::string tensor, std::vector<int64_t> shape, std::vector<std::string_view> fields);
// The SwiGLU experts of one layer shipped that way: expert e's gate, up and
// down projections are "{prefix}{e}.{gate_name}.weight" etc., sections
// gate [ffn, hidden], up [ffn, hidden], down [hidden, ffn]; `ffn_field` names
// the config field of ffn.
struct ExpertTensorNames {
  std::string_view gate = "gate_proj", up = "up_proj", down = "down_proj";
};
void declare_swiglu_experts(CheckpointDecls& decls, const ModelConfig& c, int64_t layer, const std::string& prefix,
                            int64_t ffn, std::string_view ffn_field, ExpertTensorNames names = {});
// The q/k/v/o projections of a Llama-style attention under `prefix`
// ("model.layers.3.self_attn."), with q/k/v biases when qkv_bias and an o
// bias when o_bias.
void declare_attention_projections(std::vector<TensorDecl>& tensors, const std::string& prefix, const ModelConfig& c,
                                   bool qkv_bias, bool o_bias);

// DeepSeek-V3's family (deepseek_v3, glm4_moe): layer l's feed-forward
// under `prefix` ("model.layers.3.mlp."): on an MoE layer the router
// gate.weight [n_routed_experts, hidden], gate.e_score_correction_bias and,
// when there are any, shared_experts.{gate,up,down}_proj; on a dense layer
// {gate,up,down}_proj of intermediate_size. The tail after the layers:
// model.norm, lm_head (unless tied), then every MoE layer's routed experts
// "model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight".
void declare_grouped_moe_or_dense(std::vector<TensorDecl>& tensors, const std::string& prefix, const ModelConfig& c,
                                  int64_t layer);
void declare_grouped_moe_tail(CheckpointDecls& decls, const ModelConfig& c);

// "[a, b]" with the fields of decl's dimensions, e.g. "[num_experts, hidden_size]".
std::string dim_fields_str(const TensorDecl& decl);
std::string dim_fields_str(const SectionDecl& decl);

// The [out, in] view of a section's source, checked against the section.
struct SourceGeometry {
  const TensorDecl* tensor = nullptr;  // the source (MXFP4: blocks)
  const TensorDecl* scales = nullptr;  // MXFP4 only
  int64_t slices = 1;                  // dimension 0 of a fused source, else 1
  int64_t out = 0, in = 0;             // the [out, in] view of one slice
};

// Declarations by name (views into the declarations, which must outlive it).
using DeclIndex = std::unordered_map<std::string_view, const TensorDecl*>;
DeclIndex index_decls(std::span<const TensorDecl> tensors);

// Resolves a section's source among an architecture's own declarations and
// checks that the description is consistent: the source
// is an expert tensor of a matching encoding, the expert index and rows lie
// inside it, its width equals the section's. Throws tern::Error naming the
// section (an error here is a bug in the architecture's description).
SourceGeometry section_source_geometry(const SectionDecl& section, const DeclIndex& tensors);

// Throws "unsupported architecture X; supported: a, b".
const ArchSpec& find_arch(std::string_view model_type);
std::vector<std::string_view> supported_architectures();

}  // namespace tern
