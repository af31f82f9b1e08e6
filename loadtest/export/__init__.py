"""What the load generator tells monitoring: live Prometheus metrics and the final push."""
