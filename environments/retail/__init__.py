"""The built-in retail customer-service environment (τ-bench's data model and tools)."""
