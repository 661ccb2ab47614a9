"""Environments: what an environment author writes against, and how the engine loads it."""

from intellagent.environment.checks import Action, CheckFailure, RuleCheck, Trace, rule_check, run_actions, run_checks
from intellagent.environment.database import Database, RowError, state_hash
from intellagent.environment.diff import DbDiff, diff_databases, diff_dumps
from intellagent.environment.loader import Environment, Row, check_environment, load_environment
from intellagent.environment.tools import Tool, ToolResult, ToolSpec
from intellagent.environment.validators import database_validator, row_validator
from intellagent.errors import ToolError, ValidationFailed

__all__ = [
    "Action", "CheckFailure", "RuleCheck", "Trace", "rule_check", "run_actions", "run_checks",
    "Database", "DbDiff", "Environment", "Row", "RowError", "Tool", "ToolError", "ToolResult", "ToolSpec",
    "ValidationFailed", "check_environment", "database_validator", "diff_databases", "diff_dumps", "load_environment",
    "row_validator", "state_hash",
]
