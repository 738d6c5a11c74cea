"""`retrod mcp`: a stdio MCP server that speaks retrod's own verbs, so that Claude tracks its own
session, logs phases and reads its figures mid-session without a shell command per step.

Two modules, imported one way: `tools` does the work without the SDK (what each tool does,
through the same functions as the commands), `server` binds it to the SDK's MCPServer (typed
inputs and outputs, errors) and serves it; `server` imports `tools`, never the reverse. The MCP
SDK is an optional extra (`pip install 'retrod[mcp]'`): only `server` imports it, and this
package's own module imports nothing, so that `skills install` and the `mcp` command can ask
whether the extra is there without loading it.
"""

from __future__ import annotations

EXTRA = "pip install 'retrod[mcp]'"
INSTALL_HINT = f"`retrod mcp` needs the MCP SDK, an optional extra: {EXTRA}"


def sdk_installed() -> bool:
    try:
        import mcp.server.mcpserver  # noqa: F401 - only whether it imports
    except ImportError:
        return False
    return True
