"""IntellAgent's built-in stage plugins, registered through entry points like any other plugin."""
