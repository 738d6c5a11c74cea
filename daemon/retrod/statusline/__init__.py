"""`retrod statusline`: Claude Code's status line with retrod's figures (client.py, render.py:
standard library only) and its entry in Claude Code's settings (install.py)."""
