"""The server's lifecycle and what it says: starting llama-server, its logs, slots, and external
servers.
"""
