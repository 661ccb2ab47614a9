"""IntellAgent's built-in environments (airline, retail, education)."""
