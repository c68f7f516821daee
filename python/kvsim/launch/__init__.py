"""kvsim launch: users' multi-process programs as simulated host processes of one world."""
