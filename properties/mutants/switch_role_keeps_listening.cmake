# switch_role without llm.listenIpInfo keeps the process listening where it was
# (LLMLinkManager::SwitchRole stops the daemon), so a later link to that address still succeeds.
set(FILE llm_datadist.cpp)
set(FROM [=[  } else if (!listen) {
    core.set_listen_ip_info(std::nullopt);
  }]=])
set(TO [=[  }]=])
