#pragma once
// The dashboard's page (src/tern/server/dashboard/index.html, one file with
// its styles and script, no CDN), embedded in the binary at build time
// (cmake/embed_file.cmake).
#include <string_view>

namespace tern {

std::string_view dashboard_html();

}  // namespace tern
