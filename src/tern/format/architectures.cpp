#include "tern/format/architectures.h"

#include "tern/core/error.h"

namespace tern {

// One accessor per architecture, each defined in its arch_<name>.cpp.
const ArchSpec& qwen3_moe_arch();

namespace {

const std::vector<const ArchSpec*>& registry() {
  static const std::vector<const ArchSpec*> archs = {&qwen3_moe_arch()};
  return archs;
}

}  // namespace

std::string dim_fields_str(const TensorDecl& decl) {
  return fmt::format("[{}]", fmt::join(decl.dim_fields, ", "));
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

}  // namespace tern
