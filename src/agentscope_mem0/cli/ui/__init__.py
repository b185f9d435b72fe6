"""The memory inspector: ``agentscope-mem0 ui``, a local web page on the CLI's store
(the command is :mod:`._command`, the pages :mod:`._web`)."""
