"""Runs on other machines: the engine driven over a channel (SSH) by ``workbench agent``.

- ``wire``: engine events as JSON, and back, checked field by field against their types.
- ``protocol``: the agent's messages (JSON lines, versioned, bounded), the records they carry,
  the channel's reader; ``HostTarget``, how a command is started on a host.
- ``ssh``: destinations through the user's own OpenSSH client, host keys, ``~/.ssh/config``.
- ``targets``: the host a name stands for (SSH, or a local process for tests).
- ``link``: the near side's end of one channel (its process, bounded reads, the clock offset).
- ``agent``: the far side: facts, runs into its own data folder, fetch, load jobs.
- ``host_check``: what a host has for a run, a line per problem.
- ``remote_runner``: a run on another host followed from here, into a local session.
- ``load_worker``: a client worker on another host (``--load-from``).
- ``fetch``: the far copy of a session brought home.
- ``hosts``: the runner and the check for a host name, for the CLI and the window.
"""
