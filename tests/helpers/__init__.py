"""What the test modules share: support code, worker scripts, the MCP servers they start.

No test module imports another; what two of them need lives here.
"""
