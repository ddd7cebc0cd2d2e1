"""The policy simulator: replays traces through the policy in simulated time."""
