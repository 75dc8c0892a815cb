"""The HTTP transport: a lean streaming client, bounded GETs and the SSE parser."""
