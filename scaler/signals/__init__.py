"""Where demand comes from: activator reports, pod scrapes, Prometheus queries."""
