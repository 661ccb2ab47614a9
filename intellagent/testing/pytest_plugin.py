"""pytest fixtures shipped for environment and plugin authors (registered via ``pytest11``)."""
