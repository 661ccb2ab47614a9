"""Test helpers for IntellAgent and for environment/plugin authors."""
