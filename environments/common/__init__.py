"""Tools shared by the built-in customer-service environments."""
