"""Tools every built-in customer-service environment offers: arithmetic, thinking, hand-off."""

from __future__ import annotations

import ast
import operator

from intellagent.environment import Database, ToolError

_ALLOWED = set("0123456789+-*/(). ")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow,
           ast.Mod: operator.mod}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _evaluate(node: ast.AST) -> int | float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 10_000:
            raise OverflowError("exponent too large")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise SyntaxError("invalid syntax")


def calculate(db: Database | None, expression: str) -> str:
    """Evaluate an arithmetic expression; the result is a float rounded to 2 places."""
    if not set(expression) <= _ALLOWED:
        raise ToolError("Invalid characters in expression")
    try:
        value = _evaluate(ast.parse(expression, mode="eval"))
        return str(round(float(value), 2))
    except (SyntaxError, ArithmeticError, ValueError) as exc:
        raise ToolError(str(exc.msg if isinstance(exc, SyntaxError) else exc)) from None


def think(db: Database | None, thought: str) -> str:
    """A scratchpad: nothing happens, the thought is kept in the transcript."""
    return ""


def transfer_to_human_agents(db: Database | None, summary: str) -> str:
    """Hand the conversation to a human agent (ends it)."""
    return "Transfer successful"
