#include "tern/format/tern_manifest.h"

#include <set>

#include "tern/core/error.h"
#include "tern/core/hash.h"

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
  int64_t i64(const char* key) const { return static_cast<int64_t>(u64(key)); }
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
      if (!d.is_number_unsigned()) fail("{}: field '{}' must be a list of sizes", where, key);
      s.push_back(d.get<int64_t>());
    }
    return s;
  }
  TensorFormat format(const char* key) const {
    try {
      return parse_tensor_format(str(key));
    } catch (const Error& e) {
      fail("{}: {}", where, e.what());
    }
  }
};

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
  m.version = static_cast<int>(root.u64("version"));
  if (m.version != kManifestVersion)
    fail("{}: manifest version {} is not supported by this Tern (supports {}); reinstall the model",
         source, m.version, kManifestVersion);
  m.created_by = j.value("created_by", "");
  m.architecture = root.str("architecture");
  m.config = root.at("config");
  m.source = j.value("source", json::object());

  const json& trunk = root.at("trunk");
  Fields tf{trunk, source + " trunk"};
  m.trunk_file = tf.str("file");
  m.trunk_size = tf.u64("size");
  std::set<std::string> names;
  for (const auto& e : tf.at("tensors")) {
    std::string where = source + " trunk tensor " + (e.is_object() ? e.value("name", "?") : "?");
    Fields f{e, where};
    TrunkTensor t;
    t.name = f.str("name");
    t.format = f.format("format");
    t.shape = f.shape("shape");
    t.offset = f.u64("offset");
    t.size = f.u64("size");
    t.checksum = parse_hash_hex(f.str("xxh3"));
    if (!names.insert(t.name).second) fail("{}: duplicate trunk tensor", where);
    if (t.offset % kTrunkAlignment != 0) fail("{}: offset {} is not {}-byte aligned", where, t.offset, kTrunkAlignment);
    if (format_bytes(t.format, t.shape) != t.size)
      fail("{}: size {} does not match shape and format", where, t.size);
    check_range(t.offset, t.size, m.trunk_size, where);
    m.trunk.push_back(std::move(t));
  }

  const json& experts = root.at("experts");
  Fields ef{experts, source + " experts"};
  m.experts_file = ef.str("file");
  m.experts_size = ef.u64("size");
  int64_t prev_layer = -1;
  for (const auto& e : ef.at("layers")) {
    std::string where = source + " expert layer " + (e.is_object() && e.contains("layer") ? e["layer"].dump() : "?");
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
      if (format_bytes(sec.format, sec.shape) != sec.size)
        fail("{} section {}: size {} does not match shape and format", where, sec.name, sec.size);
      if (sec.offset < section_end) fail("{} section {}: overlaps the previous section", where, sec.name);
      check_range(sec.offset, sec.size, l.record_size, where + " section " + sec.name);
      section_end = sec.offset + sec.size;
      l.sections.push_back(std::move(sec));
    }
    const json& sums = f.at("xxh3");
    if (!sums.is_array() || sums.size() != static_cast<size_t>(l.num_experts))
      fail("{}: expected {} checksums", where, l.num_experts);
    for (const auto& c : sums) {
      if (!c.is_string()) fail("{}: checksums must be hex strings", where);
      l.checksums.push_back(parse_hash_hex(c.get<std::string>()));
    }
    uint64_t span = checked_add(checked_mul(l.stride, static_cast<uint64_t>(l.num_experts - 1), "layer span"),
                                l.record_size, "layer span");
    check_range(l.offset, span, m.experts_size, where);
    m.expert_layers.push_back(std::move(l));
  }
  for (const auto& e : root.at("files")) {
    Fields f{e, source + " file entry"};
    ContainerFile cf{f.str("name"), f.u64("size"), parse_hash_hex(f.str("xxh3"))};
    if (cf.name.find('/') != std::string::npos || cf.name.empty() || cf.name == "..")
      fail("{}: invalid file name '{}'", source, cf.name);
    m.files.push_back(std::move(cf));
  }
  return m;
}

}  // namespace tern
