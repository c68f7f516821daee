# Strict mode records diagnostics but no longer raises them as errors.
set(FILE data_dist_core.cpp)
set(FROM [=[  if (settings_.strict) throw DiagnosticError(std::move(d), argument);]=])
set(TO [=[  if (false) throw DiagnosticError(std::move(d), argument);]=])
