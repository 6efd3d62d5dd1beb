"""compactor: deterministic context compaction for agent trajectories and logs."""
