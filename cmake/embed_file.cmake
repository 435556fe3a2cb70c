# cmake -DINPUT=file -DOUTPUT=file.cpp -DFUNCTION=name -P embed_file.cmake
# Writes a C++ file defining `std::string_view tern::NAME()` that returns
# the bytes of INPUT (a build step, so editing INPUT rebuilds it).
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR length "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
string(REGEX REPLACE "(([^,]*,){24})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by cmake/embed_file.cmake; do not edit.\n"
  "#include <string_view>\n"
  "namespace tern {\n"
  "namespace { const char kData[] = {\n${bytes}\n'\\0'}; }\n"
  "std::string_view ${FUNCTION}() { return {kData, ${length}}; }\n"
  "}  // namespace tern\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
