"""The built-in airline customer-service environment (τ-bench's data model and tools)."""
