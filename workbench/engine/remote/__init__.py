"""Runs on other machines: the engine driven over a channel (SSH) by ``workbench agent``.

- ``wire``: engine events as JSON, and back, checked field by field against their types.
- ``protocol``: the agent's messages (JSON lines, versioned, bounded) and the channel's
  reader; ``HostTarget``, how a command is started on a host.
"""
