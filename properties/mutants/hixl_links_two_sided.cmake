# The hixl backend gives the server a side of every link too, as the comm backend does, so a
# server transfers, pulls and pushes over its client's link (HixlTransferEngine::LinkCluster makes
# the client's entity only).
set(FILE cluster_links.cpp)
set(FROM [=[    if (!core.hixl()) {
      drop_peer_side(core, peer.cluster_id());]=])
set(TO [=[    if (true) {
      drop_peer_side(core, peer.cluster_id());]=])
