"""Partner-memory behind the agent frameworks' own memory interfaces.

One module per framework, each an optional extra (`pip install -e
'.[openai-agents]'` in a clone), each over `binding.NamespaceBinding`: one
namespace of a `MemoryService` (opened from a database URL, or handed in) or
of a remote `serve` through `MemoryClient`.
"""
