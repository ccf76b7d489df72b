"""Shared code for every mcpvectordb service: contracts, errors, settings, clients, telemetry.

Nothing here imports a service. Services import from here and never from each other.
"""

SERVER_NAME = "mcpvectordb"
SERVER_VERSION = "0.8.28"
