// `kvsim report`: renders a run or sweep folder with the plotting code in reports/*.py, through
// pybind11's embedded interpreter (Debian's /usr/bin/python3 and its matplotlib).
#pragma once

#include <string>
#include <vector>

namespace kvsim::sim {

/// Folder of the plotting scripts: $KVSIM_REPORTS_DIR, else the source tree's reports/.
std::string reports_dir();
/// Renders `dir` (PNG and SVG plots plus index.html); returns the image base names. Throws
/// std::runtime_error with Python's message if rendering fails.
std::vector<std::string> render_report(const std::string& dir);

}  // namespace kvsim::sim
