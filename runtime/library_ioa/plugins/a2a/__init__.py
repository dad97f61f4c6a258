"""The A2A protocol plugins: client (agent_comm), exposure (agent_expose), AgentCard."""
