# The job sends a layer before calling synchronize_layer for it.
set(FILE transfer_job.cpp)
set(FROM [=[      if (!spec.synchronizer->synchronize_layer(layer, std::nullopt)) {]=])
set(TO [=[      for (const AnyTransferConfig* c : covering) {
        (void)transfer_layer(core, make_call(spec, *c, layer), context);
      }
      if (!spec.synchronizer->synchronize_layer(layer, std::nullopt)) {]=])
