#include "tern/format/tern_manifest.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "tern/core/error.h"
#include "tern/core/hash.h"
#include "tern/core/json.h"
#include "tern/format/architectures.h"
#include "tern/format/safetensors.h"

namespace tern {

using nlohmann::json;

const ExpertSection* ExpertLayer::find_section(const std::string& name) const {
  for (const auto& s : sections)
    if (s.name == name) return &s;
  return nullptr;
}

const TrunkTensor* Manifest::find_trunk(const std::string& name) const {
  for (const auto& t : trunk)
    if (t.name == name) return &t;
  return nullptr;
}

const ExpertLayer* Manifest::find_expert_layer(int64_t layer) const {
  for (const auto& l : expert_layers)
    if (l.layer == layer) return &l;
  return nullptr;
}

json manifest_to_json(const Manifest& m) {
  json trunk = json::array();
  for (const auto& t : m.trunk)
    trunk.push_back({{"name", t.name},
                     {"format", format_name(t.format)},
                     {"shape", t.shape},
                     {"offset", t.offset},
                     {"size", t.size},
                     {"xxh3", hash_hex(t.checksum)}});
  json layers = json::array();
  for (const auto& l : m.expert_layers) {
    json sections = json::array();
    for (const auto& s : l.sections)
      sections.push_back({{"name", s.name},
                          {"format", format_name(s.format)},
                          {"shape", s.shape},
                          {"offset", s.offset},
                          {"size", s.size}});
    json sums = json::array();
    for (uint64_t c : l.checksums) sums.push_back(hash_hex(c));
    layers.push_back({{"layer", l.layer},
                      {"offset", l.offset},
                      {"stride", l.stride},
                      {"record_size", l.record_size},
                      {"num_experts", l.num_experts},
                      {"sections", sections},
                      {"xxh3", sums}});
  }
  json files = json::array();
  for (const auto& f : m.files)
    files.push_back({{"name", f.name}, {"size", f.size}, {"xxh3", hash_hex(f.checksum)}});
  return {{"format", "tern"},
          {"version", m.version},
          {"created_by", m.created_by},
          {"architecture", m.architecture},
          {"config", m.config},
          {"trunk", {{"file", m.trunk_file}, {"size", m.trunk_size}, {"tensors", trunk}}},
          {"experts", {{"file", m.experts_file}, {"size", m.experts_size}, {"layers", layers}}},
          {"files", files},
          {"source", m.source}};
}

namespace {

// Typed field access with errors naming the manifest and the entry.
struct Fields {
  const json& j;
  const std::string& where;

  const json& at(const char* key) const {
    if (!j.is_object() || !j.contains(key)) fail("{}: missing field '{}'", where, key);
    return j[key];
  }
  uint64_t u64(const char* key) const {
    const json& v = at(key);
    if (!v.is_number_unsigned()) fail("{}: field '{}' must be a non-negative integer", where, key);
    return v.get<uint64_t>();
  }
  int64_t i64(const char* key) const {
    uint64_t v = u64(key);
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("{}: field '{}' is out of range ({})", where, key, v);
    return static_cast<int64_t>(v);
  }
  std::string str(const char* key) const {
    const json& v = at(key);
    if (!v.is_string()) fail("{}: field '{}' must be a string", where, key);
    return v.get<std::string>();
  }
  std::vector<int64_t> shape(const char* key) const {
    const json& v = at(key);
    if (!v.is_array()) fail("{}: field '{}' must be a list", where, key);
    std::vector<int64_t> s;
    for (const auto& d : v) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail("{}: field '{}' must be a list of sizes, got {}", where, key, json_excerpt(v));
      s.push_back(d.get<int64_t>());
    }
    return s;
  }
  uint64_t hash(const char* key) const {
    try {
      return parse_hash_hex(str(key));
    } catch (const Error& e) {
      fail("{}: field '{}': {}", where, key, e.what());
    }
  }
  TensorFormat format(const char* key) const {
    try {
      return parse_tensor_format(str(key));
    } catch (const Error& e) {
      fail("{}: {}", where, e.what());
    }
  }
};

// Bytes of a tensor of this shape and format; errors name `where`.
uint64_t tensor_bytes(TensorFormat format, const std::vector<int64_t>& shape, const std::string& where) {
  try {
    return format_bytes(format, shape);
  } catch (const Error& e) {
    fail("{}: shape {}: {}", where, json_excerpt(shape), e.what());
  }
}

// A file of the container: a plain name inside the model directory.
void check_file_name(const std::string& name, const std::string& where) {
  const bool control = std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; });
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos || control)
    fail("{}: invalid file name {} (must be a plain name inside the model directory)", where, json_excerpt(name));
}

// start + size inside [0, limit) without overflow.
void check_range(uint64_t start, uint64_t size, uint64_t limit, const std::string& what) {
  uint64_t end;
  if (__builtin_add_overflow(start, size, &end) || end > limit)
    fail("{}: byte range [{}, +{}) lies outside its {} byte file", what, start, size, limit);
}

}  // namespace

Manifest manifest_from_json(const json& j, const std::string& source) {
  Fields root{j, source};
  if (!j.is_object()) fail("{}: not a JSON object", source);
  if (root.str("format") != "tern") fail("{}: not a Tern manifest (format != \"tern\")", source);
  Manifest m;
  const uint64_t version = root.u64("version");
  if (version != kManifestVersion)
    fail("{}: manifest version {} is not supported by this Tern (supports {}); reinstall the model",
         source, version, kManifestVersion);
  m.version = kManifestVersion;
  if (j.contains("created_by") && j["created_by"].is_string()) m.created_by = j["created_by"].get<std::string>();
  m.architecture = root.str("architecture");
  m.config = root.at("config");
  m.source = j.value("source", json::object());

  const json& trunk = root.at("trunk");
  Fields tf{trunk, source + " trunk"};
  m.trunk_file = tf.str("file");
  check_file_name(m.trunk_file, source + " trunk");
  m.trunk_size = tf.u64("size");
  std::set<std::string> names;
  for (const auto& e : tf.at("tensors")) {
    std::string where = source + " trunk tensor " +
                        (e.is_object() && e.contains("name") && e["name"].is_string() ? printable(e["name"].get<std::string>()) : "?");
    Fields f{e, where};
    TrunkTensor t;
    t.name = f.str("name");
    t.format = f.format("format");
    t.shape = f.shape("shape");
    t.offset = f.u64("offset");
    t.size = f.u64("size");
    t.checksum = f.hash("xxh3");
    if (!names.insert(t.name).second) fail("{}: duplicate trunk tensor", where);
    if (t.offset % kTrunkAlignment != 0) fail("{}: offset {} is not {}-byte aligned", where, t.offset, kTrunkAlignment);
    if (tensor_bytes(t.format, t.shape, where) != t.size)
      fail("{}: size {} does not match shape and format", where, t.size);
    check_range(t.offset, t.size, m.trunk_size, where);
    m.trunk.push_back(std::move(t));
  }

  const json& experts = root.at("experts");
  Fields ef{experts, source + " experts"};
  m.experts_file = ef.str("file");
  check_file_name(m.experts_file, source + " experts");
  m.experts_size = ef.u64("size");
  int64_t prev_layer = -1;
  for (const auto& e : ef.at("layers")) {
    std::string where = source + " expert layer " + (e.is_object() && e.contains("layer") ? json_excerpt(e["layer"]) : "?");
    Fields f{e, where};
    ExpertLayer l;
    l.layer = f.i64("layer");
    l.offset = f.u64("offset");
    l.stride = f.u64("stride");
    l.record_size = f.u64("record_size");
    l.num_experts = f.i64("num_experts");
    if (l.layer <= prev_layer) fail("{}: layers must be listed once, in ascending order", where);
    prev_layer = l.layer;
    if (l.offset % kExpertAlignment != 0 || l.stride % kExpertAlignment != 0)
      fail("{}: offset and stride must be {}-byte aligned", where, kExpertAlignment);
    if (l.num_experts <= 0) fail("{}: num_experts must be positive", where);
    if (l.record_size == 0 || l.record_size > l.stride) fail("{}: record_size must be in (0, stride]", where);
    uint64_t section_end = 0;
    for (const auto& s : f.at("sections")) {
      Fields sf{s, where + " section"};
      ExpertSection sec;
      sec.name = sf.str("name");
      sec.format = sf.format("format");
      sec.shape = sf.shape("shape");
      sec.offset = sf.u64("offset");
      sec.size = sf.u64("size");
      const std::string swhere = where + " section " + printable(sec.name);
      if (tensor_bytes(sec.format, sec.shape, swhere) != sec.size)
        fail("{}: size {} does not match shape and format", swhere, sec.size);
      if (sec.offset < section_end) fail("{}: overlaps the previous section", swhere);
      check_range(sec.offset, sec.size, l.record_size, swhere);
      section_end = sec.offset + sec.size;
      l.sections.push_back(std::move(sec));
    }
    const json& sums = f.at("xxh3");
    if (!sums.is_array() || sums.size() != static_cast<size_t>(l.num_experts))
      fail("{}: expected {} checksums", where, l.num_experts);
    for (const auto& c : sums) {
      if (!c.is_string()) fail("{}: checksums must be hex strings", where);
      try {
        l.checksums.push_back(parse_hash_hex(c.get<std::string>()));
      } catch (const Error& e) {
        fail("{}: {}", where, e.what());
      }
    }
    // Whole strides: the expert store reads [offset, offset + stride) per expert.
    uint64_t span;
    if (__builtin_mul_overflow(l.stride, static_cast<uint64_t>(l.num_experts), &span))
      fail("{}: stride {} x {} experts overflows", where, l.stride, l.num_experts);
    check_range(l.offset, span, m.experts_size, where);
    m.expert_layers.push_back(std::move(l));
  }
  for (const auto& e : root.at("files")) {
    Fields f{e, source + " file entry"};
    ContainerFile cf{f.str("name"), f.u64("size"), f.hash("xxh3")};
    check_file_name(cf.name, source + " file entry");
    m.files.push_back(std::move(cf));
  }
  return m;
}

namespace {

// Formats the engine can use for a weight matrix (kernels) or a 1-D tensor
// (converted to F32 at load).
bool is_matrix_format(TensorFormat f) {
  return f == TensorFormat::F32 || f == TensorFormat::F16 || f == TensorFormat::BF16 || is_block_format(f);
}
bool is_vector_format(TensorFormat f) {
  return f == TensorFormat::F32 || f == TensorFormat::F16 || f == TensorFormat::BF16;
}

void check_role_format(TensorFormat f, const std::vector<int64_t>& shape, const std::string& what) {
  const bool ok = shape.size() == 1 ? is_vector_format(f) : is_matrix_format(f);
  if (!ok)
    fail("{}: format {} cannot hold a {} (expected {})", what, format_name(f),
         shape.size() == 1 ? "1-D tensor" : "weight matrix",
         shape.size() == 1 ? "f32, f16 or bf16" : "f32, f16, bf16 or a block format");
}

}  // namespace

void check_manifest_against_config(const Manifest& m, const ModelConfig& cfg, const std::string& source) {
  if (m.architecture != cfg.architecture)
    fail("{}: field 'architecture' is {} but the config's model_type is {}", source, json_excerpt(m.architecture),
         json_excerpt(cfg.architecture));
  const ArchSpec& arch = find_arch(cfg.architecture);
  // Declaring every tensor costs memory in proportion to the config's
  // expert records: a config implying far more records than the manifest
  // lists is refused before anything is declared (smaller disagreements get
  // the precise messages below).
  int64_t moe_layers = 0;
  for (int64_t layer = 0; layer < cfg.num_layers; ++layer) moe_layers += cfg.layer_is_moe(layer) ? 1 : 0;
  uint64_t listed_records = 0;
  for (const ExpertLayer& l : m.expert_layers) listed_records += static_cast<uint64_t>(l.num_experts);
  const uint64_t config_records = static_cast<uint64_t>(moe_layers) * static_cast<uint64_t>(cfg.num_experts);
  if (config_records > 2 * listed_records + 4096)
    fail("{}: the config implies {} expert records ({} MoE layers x num_experts {}) but the expert table lists {}",
         source, config_records, moe_layers, cfg.num_experts, listed_records);
  // Trunk tensors and expert sections are the same in every checkpoint
  // layout of an architecture (only expert sources differ), so layout 0 speaks for all.
  const CheckpointDecls decls = arch.tensors(cfg);
  std::map<std::string, const TensorDecl*, std::less<>> trunk_decls;
  std::map<std::pair<int64_t, std::string>, const SectionDecl*> section_decls;  // (layer, section) of expert 0
  for (const TensorDecl& d : decls.tensors)
    if (!d.is_expert) trunk_decls.emplace(d.name, &d);
  for (const SectionDecl& s : decls.sections)
    if (s.expert == 0) section_decls.emplace(std::pair{s.layer, s.name}, &s);

  // Trunk: exactly the declared tensors, with the declared shapes.
  std::set<std::string_view> listed;
  for (const TrunkTensor& t : m.trunk) {
    const std::string what = fmt::format("{}: trunk tensor {}", source, json_excerpt(t.name));
    auto it = trunk_decls.find(t.name);
    if (it == trunk_decls.end()) fail("{} is not a tensor of {} with this config", what, cfg.architecture);
    if (t.shape != it->second->shape)
      fail("{} has shape {} but the manifest's config implies {} = {} (the config and the tensor table disagree)",
           what, shape_str(t.shape), shape_str(it->second->shape), dim_fields_str(*it->second));
    check_role_format(t.format, t.shape, what);
    listed.insert(t.name);
  }
  for (const TensorDecl& d : decls.tensors)
    if (!d.is_expert && !listed.count(d.name))
      fail("{}: trunk tensor {} is missing (the config implies shape {})", source, json_excerpt(d.name),
           shape_str(d.shape));
  std::vector<const TrunkTensor*> by_offset;
  for (const TrunkTensor& t : m.trunk) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TrunkTensor* a, const TrunkTensor* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->offset < by_offset[i - 1]->offset + by_offset[i - 1]->size)
      fail("{}: trunk tensors {} and {} overlap in {}", source, json_excerpt(by_offset[i - 1]->name),
           json_excerpt(by_offset[i]->name), m.trunk_file);

  // Experts: one layer per MoE layer of the config, records as declared.
  uint64_t previous_end = 0;
  for (const ExpertLayer& l : m.expert_layers) {
    const std::string what = fmt::format("{}: expert layer {}", source, l.layer);
    if (l.layer >= cfg.num_layers || !cfg.layer_is_moe(l.layer))
      fail("{} is not a MoE layer of this config ({} layers)", what, cfg.num_layers);
    if (l.num_experts != cfg.num_experts)
      fail("{} has {} experts but the config says num_experts = {}", what, l.num_experts, cfg.num_experts);
    if (l.sections.size() != arch.expert_sections.size())
      fail("{} has {} sections, {} records have {} ({})", what, l.sections.size(), cfg.architecture,
           arch.expert_sections.size(), fmt::join(arch.expert_sections, ", "));
    uint64_t record = 0;
    for (size_t i = 0; i < l.sections.size(); ++i) {
      const ExpertSection& sec = l.sections[i];
      const std::string& name = arch.expert_sections[i];
      if (sec.name != name) fail("{} section {} is {}, expected '{}'", what, i, json_excerpt(sec.name), name);
      auto it = section_decls.find({l.layer, name});
      if (it == section_decls.end()) fail("{} section '{}' is not declared by {}", what, name, cfg.architecture);
      if (sec.shape != it->second->shape)
        fail("{} section '{}' has shape {} but the manifest's config implies {} = {} (the config and the expert "
             "table disagree)",
             what, name, shape_str(sec.shape), shape_str(it->second->shape), dim_fields_str(*it->second));
      check_role_format(sec.format, sec.shape, what + " section '" + name + "'");
      // Vectors inside expert records (biases) are F32: the engine reads them in place.
      if (sec.shape.size() == 1 && sec.format != TensorFormat::F32)
        fail("{} section '{}' is {}; vectors in expert records must be f32", what, name, format_name(sec.format));
      if (sec.offset != record) fail("{} section '{}' starts at {}, expected {} (back to back)", what, name, sec.offset, record);
      record += sec.size;
    }
    if (l.record_size != record) fail("{}: record_size {} is not the sections' total {}", what, l.record_size, record);
    if (l.stride != round_up(record, kExpertAlignment))
      fail("{}: stride {} is not the record size {} rounded up to {}", what, l.stride, record, kExpertAlignment);
    if (l.offset < previous_end) fail("{} overlaps the previous layer's records", what);
    previous_end = l.offset + l.stride * static_cast<uint64_t>(l.num_experts);  // range-checked at parse
  }
  for (int64_t layer = 0; layer < cfg.num_layers; ++layer)
    if (cfg.layer_is_moe(layer) && !m.find_expert_layer(layer))
      fail("{}: layer {} is a MoE layer in the config but has no expert records", source, layer);
}

}  // namespace tern
