"""Built-in education environment."""
