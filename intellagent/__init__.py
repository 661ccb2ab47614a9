"""IntellAgent: test conversational agents against policy-targeted simulated users."""

from intellagent.hookspecs import hookimpl

__version__ = "0.1.0"
__all__ = ["hookimpl", "__version__"]
