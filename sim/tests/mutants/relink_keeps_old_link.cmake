# The engine's relink skips the unlink: link_clusters then finds the old link (ALREADY_LINK) and
# every retry runs on the link the failure left unusable.
set(FILE serving/serving_runner.cpp)
set(FROM [=[(void)client.unlink_clusters({info}, v_.recovery.link_timeout_ms, true);]=])
set(TO [=[]=])
