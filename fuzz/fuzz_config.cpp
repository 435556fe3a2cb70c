// Fuzz target "config": the input is a config.json. Parsing must either
// give a clean tern::Error or a config whose tensor declarations (for its
// architecture) are bounded by config_limits and whose sizes compute
// without overflow, so nothing sized or looped over from a config is
// unbounded (the `num_experts: 2^63-1` hang of issue 16).
#include "fuzz_target.h"
#include "tern/core/error.h"
#include "tern/core/json.h"
#include "tern/core/tensor_format.h"
#include "tern/format/architectures.h"
#include "tern/format/model_config.h"

namespace tern::fuzz {

void fuzz_config(std::span<const uint8_t> input) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  run_expecting_clean_errors([&] {
    ModelConfig cfg = parse_model_config(parse_json(text, "config.json"), "config.json");
    namespace lim = config_limits;
    if (cfg.vocab_size < 1 || cfg.vocab_size > lim::kMaxVocab || cfg.hidden_size < 1 ||
        cfg.hidden_size > lim::kMaxHidden || cfg.num_layers < 1 || cfg.num_layers > lim::kMaxLayers ||
        cfg.num_heads < 1 || cfg.num_kv_heads < 1 || cfg.head_dim < 2 || cfg.head_dim > lim::kMaxHeadDim ||
        cfg.num_experts < 0 || cfg.num_experts > lim::kMaxExperts ||
        cfg.max_position_embeddings < 1 || cfg.max_position_embeddings > lim::kMaxPositions)
      broken("a parsed config is outside config_limits");
    if (cfg.num_moe_layers() * cfg.num_experts > lim::kMaxExpertRecords)
      broken("more expert records than kMaxExpertRecords");
    const ArchSpec& arch = find_arch(cfg.architecture);
    for (size_t layout = 0; layout < arch.layouts.size(); ++layout) {
      const CheckpointDecls decls = arch.tensors(cfg, layout);
      const DeclIndex index = index_decls(decls.tensors);
      for (const TensorDecl& d : decls.tensors) {
        format_bytes(TensorFormat::F32, d.shape);  // overflow-checked; throws tern::Error
        // Trunk tensors are vectors, matrices or conv taps [channels, 1, kernel]
        // (Qwen3-Next; the engine reads them flattened); experts up to 4-D.
        if (d.shape.empty() || d.shape.size() > (d.is_expert ? 4u : 3u))
          broken("tensor '" + d.name + "' has a rank its role does not allow");
        for (int64_t dim : d.shape)
          if (dim < 1) broken("tensor '" + d.name + "' has a dimension below 1");
      }
      for (const SectionDecl& s : decls.sections) {
        if (!cfg.layer_is_moe(s.layer) || s.expert < 0 || s.expert >= cfg.num_experts)
          broken("expert section '" + s.name + "' outside the config's MoE layers or experts");
        format_bytes(TensorFormat::F32, s.shape);
        try {
          section_source_geometry(s, index);
        } catch (const Error& e) {
          broken(std::string("the architecture's description is inconsistent: ") + e.what());
        }
      }
      if (decls.sections.size() !=
          static_cast<uint64_t>(cfg.num_moe_layers() * cfg.num_experts) * arch.expert_sections.size())
        broken("expert section count differs from MoE layers x experts x sections");
    }
  });
}

}  // namespace tern::fuzz
